package demo

import (
	"errors"
	"fmt"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
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

// PlotRollout draws the guarded rollouts of a run into a PNG at path: above,
// each round's mean reward of the sessions the live version served and of
// those its candidate served (labelled with the candidate's version at its
// first round), with a vertical line at each decision (promoted or rolled
// back); below, the share of each round's sessions the candidate served.
func PlotRollout(rep Report, path string) error {
	if len(rep.Rounds) == 0 {
		return errors.New("plot rollout: no rounds")
	}
	reward, share := plot.New(), plot.New()
	promoted, rolledBack := 0, 0
	for _, d := range rep.Decisions {
		if d.Decision == "promoted" {
			promoted++
		} else {
			rolledBack++
		}
	}
	reward.Title.Text = fmt.Sprintf("guarded rollouts: %d promoted, %d rolled back", promoted, rolledBack)
	reward.Y.Label.Text = "mean session reward"
	reward.Y.Min, reward.Y.Max = 0, 1.45
	share.Y.Label.Text = "candidate's share"
	share.X.Label.Text = "training round"
	share.Y.Min, share.Y.Max = 0, 1
	for _, p := range []*plot.Plot{reward, share} {
		p.Add(plotter.NewGrid())
		p.X.Min, p.X.Max = 0.5, float64(len(rep.Rounds))+0.5
	}
	var live, cand, frac plotter.XYs
	var labels plotter.XYLabels
	seen := map[string]bool{}
	for _, r := range rep.Rounds {
		x := float64(r.Round)
		if len(r.ByPolicy) == 0 {
			continue
		}
		inc := r.ByPolicy[0]
		live = append(live, plotter.XY{X: x, Y: inc.Reward})
		var n, total int
		for _, ps := range r.ByPolicy {
			total += ps.Sessions
		}
		if len(r.ByPolicy) > 1 {
			c := r.ByPolicy[len(r.ByPolicy)-1]
			n = c.Sessions
			cand = append(cand, plotter.XY{X: x, Y: c.Reward})
			if !seen[c.Policy] {
				seen[c.Policy] = true
				labels.XYs = append(labels.XYs, plotter.XY{X: x, Y: c.Reward})
				labels.Labels = append(labels.Labels, "v"+c.Policy)
			}
		}
		frac = append(frac, plotter.XY{X: x, Y: float64(n) / float64(max(total, 1))})
	}
	l, err := plotter.NewLine(live)
	if err != nil {
		return fmt.Errorf("plot rollout: %w", err)
	}
	l.Width, l.Color = vg.Points(2), plotutil.Color(0)
	reward.Add(l)
	reward.Legend.Add("live version's sessions", l)
	if len(cand) > 0 {
		sc, err := plotter.NewScatter(cand)
		if err != nil {
			return fmt.Errorf("plot rollout: %w", err)
		}
		sc.Color, sc.Radius = plotutil.Color(1), vg.Points(3)
		reward.Add(sc)
		reward.Legend.Add("candidate's sessions", sc)
		lb, err := plotter.NewLabels(labels)
		if err != nil {
			return fmt.Errorf("plot rollout: %w", err)
		}
		reward.Add(lb)
	}
	for _, kind := range []struct {
		name, decision string
		color          int
	}{{"promoted", "promoted", 2}, {"rolled back", "rolled_back", 3}} {
		first := true
		for _, d := range rep.Decisions {
			if d.Decision != kind.decision {
				continue
			}
			v, err := plotter.NewLine(plotter.XYs{{X: float64(d.Round), Y: 0}, {X: float64(d.Round), Y: 1}})
			if err != nil {
				return fmt.Errorf("plot rollout: %w", err)
			}
			v.Color, v.Dashes = plotutil.Color(kind.color), []vg.Length{vg.Points(3), vg.Points(2)}
			reward.Add(v)
			if first {
				reward.Legend.Add(kind.name, v)
				first = false
			}
		}
	}
	reward.Legend.Top, reward.Legend.Left = true, true
	fl, err := plotter.NewLine(frac)
	if err != nil {
		return fmt.Errorf("plot rollout: %w", err)
	}
	fl.StepStyle, fl.Width, fl.Color = plotter.MidStep, vg.Points(2), plotutil.Color(1)
	share.Add(fl)
	return saveStacked(path, []*plot.Plot{reward, share})
}

// saveStacked draws plots one above the other, axes aligned, into a PNG
// at path.
func saveStacked(path string, plots []*plot.Plot) error {
	img := vgimg.New(8*vg.Inch, vg.Length(len(plots))*2.6*vg.Inch)
	rows := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		rows[i] = []*plot.Plot{p}
	}
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	canvases := plot.Align(rows, tiles, draw.New(img))
	for i, p := range plots {
		p.Draw(canvases[i][0])
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
