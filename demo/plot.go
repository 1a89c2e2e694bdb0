package demo

import (
	"errors"
	"fmt"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// PlotReward draws the training reward per round (the agent's mean reward
// and the trainer's batch reward) with the held-out solve rate before and
// after training as dashed lines, into a PNG at path.
func PlotReward(rep Report, path string) error {
	if len(rep.Rounds) == 0 {
		return errors.New("plot reward: no rounds")
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("hone demo: held-out solve rate %.0f%% -> %.0f%%", 100*rep.Before.Rate, 100*rep.After.Rate)
	p.X.Label.Text = "training round (one trainer batch: a step, unless its rewards were all equal)"
	p.Y.Label.Text = "reward / solve rate"
	// The legend sits in a band above the data (rates and rewards are in
	// 0..1), where no curve runs under it; ticks stop at 1.
	p.Y.Min, p.Y.Max = 0, 1.45
	p.Y.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 0, Label: "0"}, {Value: 0.2, Label: "0.2"},
		{Value: 0.4, Label: "0.4"}, {Value: 0.6, Label: "0.6"}, {Value: 0.8, Label: "0.8"}, {Value: 1, Label: "1"}})
	p.Add(plotter.NewGrid())
	rollout := make(plotter.XYs, len(rep.Rounds))
	for i, r := range rep.Rounds {
		rollout[i] = plotter.XY{X: float64(r.Round), Y: r.Reward}
	}
	l, err := plotter.NewLine(rollout)
	if err != nil {
		return fmt.Errorf("plot reward: %w", err)
	}
	l.Width, l.Color = vg.Points(2), plotutil.Color(0)
	p.Add(l)
	p.Legend.Add("training reward (mean per round)", l)
	n := float64(len(rep.Rounds))
	for i, e := range []struct {
		name string
		rate float64
	}{{"held-out before", rep.Before.Rate}, {"held-out after", rep.After.Rate}} {
		h, err := plotter.NewLine(plotter.XYs{{X: 1, Y: e.rate}, {X: n, Y: e.rate}})
		if err != nil {
			return fmt.Errorf("plot reward: %w", err)
		}
		h.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		h.Color = plotutil.Color(i + 1)
		if i == 1 {
			h.Width = vg.Points(2)
		}
		p.Add(h)
		p.Legend.Add(e.name, h)
	}
	p.Legend.Top, p.Legend.Left = true, true
	if err := p.Save(8*vg.Inch, 4.5*vg.Inch, path); err != nil {
		return fmt.Errorf("plot reward: %w", err)
	}
	return nil
}
