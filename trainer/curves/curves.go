// Package curves reads the trainer's JSONL step log and draws its training
// curves (reward, advantage, loss, KL, clip fraction, gradient norm,
// throughput) into one PNG with gonum/plot.
package curves

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/hone-rl/hone/trainer"
)

// ReadLog parses a JSONL step log; blank lines are skipped.
func ReadLog(r io.Reader) ([]trainer.StepMetrics, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var out []trainer.StepMetrics
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var m trainer.StepMetrics
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return nil, fmt.Errorf("step log line %d: %w", line, err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read step log: %w", err)
	}
	return out, nil
}

// panel is one chart: a title and the series drawn in it.
type panel struct {
	title  string
	series []series
	last   bool // title shows the first series' last value
}

type series struct {
	name string
	get  func(*trainer.StepMetrics) float64
}

var panels = []panel{
	{"reward", []series{{"mean", func(m *trainer.StepMetrics) float64 { return m.RewardMean }},
		{"std", func(m *trainer.StepMetrics) float64 { return m.RewardStd }}}, false},
	{"advantage", []series{{"mean", func(m *trainer.StepMetrics) float64 { return m.AdvMean }},
		{"std", func(m *trainer.StepMetrics) float64 { return m.AdvStd }}}, false},
	{"loss", []series{{"total", func(m *trainer.StepMetrics) float64 { return m.Loss }},
		{"policy", func(m *trainer.StepMetrics) float64 { return m.PGLoss }}}, false},
	{"KL to reference", []series{{"kl", func(m *trainer.StepMetrics) float64 { return m.KL }}}, false},
	{"clip fraction", []series{{"clip", func(m *trainer.StepMetrics) float64 { return m.ClipFrac }}}, false},
	{"grad norm", []series{{"norm", func(m *trainer.StepMetrics) float64 { return m.GradNorm }}}, false},
	{"tokens/s", []series{{"tok/s", func(m *trainer.StepMetrics) float64 { return m.TokensPerSec }}}, false},
	{"learning rate", []series{{"lr", func(m *trainer.StepMetrics) float64 { return m.LR }}}, true},
}

// Draw renders the curves of steps as a grid of charts into a PNG at path.
func Draw(steps []trainer.StepMetrics, path string) error {
	if len(steps) == 0 {
		return fmt.Errorf("plot %s: the step log is empty", path)
	}
	const cols = 2
	rows := (len(panels) + cols - 1) / cols
	plots := make([][]*plot.Plot, rows)
	for i, pn := range panels {
		if plots[i/cols] == nil {
			plots[i/cols] = make([]*plot.Plot, cols)
		}
		p, err := chart(pn, steps)
		if err != nil {
			return fmt.Errorf("plot %s: %w", pn.title, err)
		}
		plots[i/cols][i%cols] = p
	}
	img := vgimg.New(vg.Points(900), vg.Points(float64(260*rows)))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(plots, tiles, dc)
	for r := range plots {
		for c, p := range plots[r] {
			if p != nil {
				p.Draw(canvases[r][c])
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return f.Close()
}

func chart(pn panel, steps []trainer.StepMetrics) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = pn.title
	if pn.last {
		p.Title.Text = fmt.Sprintf("%s (last %g)", pn.title, pn.series[0].get(&steps[len(steps)-1]))
	}
	p.X.Label.Text = "step"
	for i, s := range pn.series {
		pts := make(plotter.XYs, len(steps))
		for j := range steps {
			pts[j].X, pts[j].Y = float64(steps[j].Step), s.get(&steps[j])
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		l.Color = plotter.DefaultLineStyle.Color
		if i > 0 {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l)
		if len(pn.series) > 1 {
			p.Legend.Add(s.name, l)
		}
	}
	p.Legend.Top = true
	p.Y.Min, p.Y.Max = yRange(p.Y.Min, p.Y.Max)
	return p, nil
}

// yRange widens a flat series' range around its value. gonum pads a
// zero-height range to ±1 around it, so a constant learning rate of 0.001
// was drawn on the 0 tick of a -1..1 axis.
func yRange(lo, hi float64) (float64, float64) {
	if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return lo, hi
	}
	scale := math.Max(math.Abs(lo), math.Abs(hi))
	if hi-lo > 1e-6*scale {
		return lo, hi
	}
	if scale == 0 {
		return -1, 1
	}
	mid := (lo + hi) / 2
	return mid - scale/2, mid + scale/2
}
