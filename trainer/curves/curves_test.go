package curves

import (
	"bytes"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hone-rl/hone/trainer"
)

func TestReadLogAndDraw(t *testing.T) {
	var b bytes.Buffer
	for i := int64(1); i <= 20; i++ {
		m := trainer.StepMetrics{Step: i, Version: i, Trained: true, RewardMean: float64(i) / 20, Loss: 1 / float64(i), GradNorm: 0.5, TokensPerSec: 1000}
		line, _ := json.Marshal(m)
		b.Write(append(line, '\n'))
	}
	b.WriteString("\n")
	steps, err := ReadLog(&b)
	if err != nil || len(steps) != 20 || steps[19].RewardMean != 1 {
		t.Fatalf("read %d steps, err %v", len(steps), err)
	}
	out := filepath.Join(t.TempDir(), "curves.png")
	if err := Draw(steps, out); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil || img.Bounds().Dx() < 800 {
		t.Fatalf("png %v %v", img.Bounds(), err)
	}
	if err := Draw(nil, out); err == nil {
		t.Fatal("empty log accepted")
	}
	if _, err := ReadLog(strings.NewReader("{\"step\":1}\nnot json\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("bad line: %v", err)
	}
}

func FuzzReadLog(f *testing.F) {
	f.Add([]byte("{\"step\":1,\"loss\":0.5}\n"))
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = ReadLog(bytes.NewReader(b)) })
}

// TestLearningRatePanel: the learning-rate panel's axis is around the
// learning rate (a constant 0.001 was drawn on the 0 tick of a -1..1 axis)
// and its title names the last value.
func TestLearningRatePanel(t *testing.T) {
	var lrPanel panel
	for _, pn := range panels {
		if pn.title == "learning rate" {
			lrPanel = pn
		}
	}
	for _, tc := range []struct {
		name  string
		lr    func(step int) float64
		title string
	}{
		{"constant 1e-3", func(int) float64 { return 1e-3 }, "learning rate (last 0.001)"},
		{"constant 1e-5", func(int) float64 { return 1e-5 }, "learning rate (last 1e-05)"},
		{"warmup to 1e-5", func(s int) float64 { return 1e-5 * math.Min(1, float64(s)/5) }, "learning rate (last 1e-05)"},
		{"cosine 1e-3 to 1e-4", func(s int) float64 { return 1e-4 + 0.9e-3*(1+math.Cos(math.Pi*float64(s)/20))/2 }, "learning rate (last 0.0001)"},
		{"zero", func(int) float64 { return 0 }, "learning rate (last 0)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var steps []trainer.StepMetrics
			for s := 1; s <= 20; s++ {
				steps = append(steps, trainer.StepMetrics{Step: int64(s), Trained: true, LR: tc.lr(s)})
			}
			p, err := chart(lrPanel, steps)
			if err != nil {
				t.Fatal(err)
			}
			if p.Title.Text != tc.title {
				t.Errorf("title %q, want %q", p.Title.Text, tc.title)
			}
			lo, hi := p.Y.Min, p.Y.Max
			if !(lo < hi) {
				t.Fatalf("degenerate y axis %g..%g", lo, hi)
			}
			for _, m := range steps {
				if m.LR < lo || m.LR > hi {
					t.Fatalf("lr %g outside the axis %g..%g", m.LR, lo, hi)
				}
			}
			top := steps[len(steps)-1].LR
			for _, m := range steps {
				top = math.Max(top, m.LR)
			}
			if top > 0 && (hi > 2*top || lo < -top) {
				t.Errorf("axis %g..%g dwarfs the learning rate (max %g): the line looks flat at 0", lo, hi, top)
			}
			// The labelled ticks span the data, and a flat line is not on the 0 tick.
			var labels []string
			for _, tk := range p.Y.Tick.Marker.Ticks(lo, hi) {
				if tk.Label != "" {
					labels = append(labels, tk.Label)
				}
			}
			if len(labels) < 2 {
				t.Errorf("y labels %q", labels)
			}
			if top > 0 && lo == top-top/2 && (lo <= 0 || slices.Contains(labels, "0")) {
				t.Errorf("constant lr %g labelled %q on %g..%g", top, labels, lo, hi)
			}
		})
	}
}

// TestSkippedBatches: a batch that trained nothing is a gap in the loss,
// gradient and rate panels (not a drop to zero), keeps its reward, counts
// on the x axis, and never sets the learning rate's "last" value; logs
// from before records said "trained" read their samples instead.
func TestSkippedBatches(t *testing.T) {
	var steps []trainer.StepMetrics
	for b := 1; b <= 10; b++ {
		m := trainer.StepMetrics{Step: int64(b), Trained: b%3 != 0, RewardMean: 0.5, Loss: 2, LR: 1e-3, GradNorm: 1}
		if !m.Trained {
			m = trainer.StepMetrics{Step: int64(b - 1), RewardMean: 0.5, SkipReason: "no_reward_variance"}
		}
		steps = append(steps, m)
	}
	byTitle := map[string]panel{}
	for _, pn := range panels {
		byTitle[pn.title] = pn
	}
	pts, skipped := points(byTitle["loss"], byTitle["loss"].series[0], steps)
	if len(pts) != 7 || len(skipped) != 3 || skipped[0].X != 3 || pts[len(pts)-1].X != 10 {
		t.Fatalf("loss points %v, skipped %v", pts, skipped)
	}
	for _, p := range pts {
		if p.Y != 2 {
			t.Fatalf("a loss point at %v", p)
		}
	}
	if pts, skipped := points(byTitle["reward"], byTitle["reward"].series[0], steps); len(pts) != 10 || len(skipped) != 0 {
		t.Fatalf("reward points %d, skipped %d", len(pts), len(skipped))
	}
	steps[9] = trainer.StepMetrics{Step: 7, RewardMean: 0.5}
	p, err := chart(byTitle["learning rate"], steps)
	if err != nil || p.Title.Text != "learning rate (last 0.001)" || p.X.Max != 10 {
		t.Fatalf("lr panel %q x..%g %v", p.Title.Text, p.X.Max, err)
	}
	if !trained(&trainer.StepMetrics{Samples: 3}) || trained(&trainer.StepMetrics{}) {
		t.Fatal("old records misread")
	}
	if err := Draw(steps[2:3], filepath.Join(t.TempDir(), "c.png")); err != nil {
		t.Fatalf("a log of one skipped batch: %v", err)
	}
}
