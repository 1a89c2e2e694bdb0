// Package curves reads the trainer's JSONL step log and draws its training
// curves (reward, advantage, loss, KL, clip fraction, gradient norm,
// throughput) into one PNG with gonum/plot.
package curves

import (
	"bufio"
	"encoding/json"
	"fmt"
	"image/color"
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
	all    bool // drawn for every batch; otherwise for the batches that trained
}

type series struct {
	name string
	get  func(*trainer.StepMetrics) float64
}

var panels = []panel{
	{"reward", []series{{"mean", func(m *trainer.StepMetrics) float64 { return m.RewardMean }},
		{"std", func(m *trainer.StepMetrics) float64 { return m.RewardStd }}}, false, true},
	{"advantage", []series{{"mean", func(m *trainer.StepMetrics) float64 { return m.AdvMean }},
		{"std", func(m *trainer.StepMetrics) float64 { return m.AdvStd }}}, false, false},
	{"loss", []series{{"total", func(m *trainer.StepMetrics) float64 { return m.Loss }},
		{"policy", func(m *trainer.StepMetrics) float64 { return m.PGLoss }}}, false, false},
	{"KL to reference", []series{{"kl", func(m *trainer.StepMetrics) float64 { return m.KL }}}, false, false},
	{"clip fraction", []series{{"clip", func(m *trainer.StepMetrics) float64 { return m.ClipFrac }}}, false, false},
	{"grad norm", []series{{"norm", func(m *trainer.StepMetrics) float64 { return m.GradNorm }}}, false, false},
	{"tokens/s", []series{{"tok/s", func(m *trainer.StepMetrics) float64 { return m.TokensPerSec }}}, false, false},
	{"learning rate", []series{{"lr", func(m *trainer.StepMetrics) float64 { return m.LR }}}, true, false},
}

// trained reports whether a step record updated the policy. Logs written
// before records said so have no "trained" field; their skipped batches
// trained no sample.
func trained(m *trainer.StepMetrics) bool { return m.Trained || m.Samples > 0 }

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

// chart draws one panel against the batch number, so the x axis covers the
// whole run. A batch that trained nothing has no loss, gradient or rate: it
// is left out of those panels (a gap, not a drop to zero) and marked on the
// x axis of each with a grey cross. Series are named in the title (solid,
// then dashed), where no curve runs under them.
func chart(pn panel, steps []trainer.StepMetrics) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = pn.title
	if len(pn.series) > 1 {
		p.Title.Text = fmt.Sprintf("%s: %s (solid), %s (dashed)", pn.title, pn.series[0].name, pn.series[1].name)
	}
	if pn.last {
		for j := len(steps) - 1; j >= 0; j-- {
			if trained(&steps[j]) {
				p.Title.Text = fmt.Sprintf("%s (last %g)", pn.title, pn.series[0].get(&steps[j]))
				break
			}
		}
	}
	p.X.Label.Text = "batch"
	p.X.Min, p.X.Max = 1, float64(max(len(steps), 2))
	var skipped plotter.XYs
	for i, s := range pn.series {
		pts, skip := points(pn, s, steps)
		if i == 0 {
			skipped = skip
		}
		if len(pts) == 0 {
			continue
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
	}
	if math.IsInf(p.Y.Min, 0) { // nothing trained: the panel holds only the crosses
		p.Y.Min, p.Y.Max = 0, 1
	}
	p.Y.Min, p.Y.Max = yRange(p.Y.Min, p.Y.Max)
	if len(skipped) > 0 {
		for k := range skipped {
			skipped[k].Y = p.Y.Min
		}
		sc, err := plotter.NewScatter(skipped)
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle = draw.GlyphStyle{Shape: draw.CrossGlyph{}, Radius: vg.Points(3), Color: color.Gray{Y: 150}}
		p.Add(sc)
		p.X.Label.Text = "batch (x: trained nothing)"
	}
	return p, nil
}

// points are a series' points by batch number, and the batches it leaves
// out because they trained nothing (none for a panel drawn for all).
func points(pn panel, s series, steps []trainer.StepMetrics) (pts, skipped plotter.XYs) {
	for j := range steps {
		if pn.all || trained(&steps[j]) {
			pts = append(pts, plotter.XY{X: float64(j + 1), Y: s.get(&steps[j])})
		} else {
			skipped = append(skipped, plotter.XY{X: float64(j + 1)})
		}
	}
	return pts, skipped
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
