package trainer

import (
	"fmt"
	"math"
	"sort"

	"github.com/hone-rl/hone/capture"
)

// Advantage algorithm names accepted by AdvantageOptions.Algorithm.
const (
	AlgGRPO         = "grpo"
	AlgStepWiseGRPO = "step_wise_grpo"
	AlgRLOO         = "rloo"
	AlgReinforceEMA = "reinforce_ema"
)

// AdvantageOptions configures how rewards become per-token advantages.
type AdvantageOptions struct {
	// Algorithm is one of grpo, step_wise_grpo, rloo, reinforce_ema.
	Algorithm string `yaml:"algorithm"`
	// Epsilon is added to the standard deviation before dividing.
	Epsilon float64 `yaml:"epsilon"`
	// StdThreshold skips groups whose reward standard deviation is <= it
	// (0 skips exactly the zero-variance groups) and groups of one. A
	// negative value disables skipping (Trinity-RFT's std_threshold=None):
	// a group of one then uses mean 0 and std 1.
	StdThreshold float64 `yaml:"std_threshold"`
	// StdLevel is "group" (default) or "batch": the scope of the std used
	// to normalise; the mean is always the group's.
	StdLevel string `yaml:"std_level"`
	// StepNorm divides a step-wise GRPO run's advantage by its step count.
	StepNorm bool `yaml:"step_norm"`
	// EMADecay is the baseline decay of reinforce_ema (b = d*b + (1-d)*mean).
	EMADecay float64 `yaml:"ema_decay"`
}

// Sample is one experience with its per-token advantages, ready for a loss.
type Sample struct {
	Exp        *capture.Experience
	Advantages []float32 // per token; 0 where the mask is 0
	Score      float64   // the scalar advantage broadcast to the tokens
	Weight     float64   // loss weight (staleness down-weighting), 1 by default
	Lag        int64     // policy versions behind the trainer
}

// AdvantageStats summarises one batch's rewards and advantages.
type AdvantageStats struct {
	RewardMean, RewardStd float64
	AdvMean, AdvStd       float64
	AdvMin, AdvMax        float64
	Kept, Skipped         int // samples kept / dropped by group filtering
	Groups, SkippedGroups int
}

// Advantager turns a batch of experiences into training samples.
type Advantager interface {
	Compute(exps []*capture.Experience) ([]Sample, AdvantageStats)
}

// NewAdvantager returns the advantage estimator named by o.Algorithm.
func NewAdvantager(o AdvantageOptions) (Advantager, error) {
	if o.StdLevel != "" && o.StdLevel != "group" && o.StdLevel != "batch" {
		return nil, fmt.Errorf("advantage std_level %q: want group or batch", o.StdLevel)
	}
	switch o.Algorithm {
	case AlgGRPO, "":
		return grpo{o}, nil
	case AlgStepWiseGRPO:
		return stepWiseGRPO{o}, nil
	case AlgRLOO:
		return rloo{o}, nil
	case AlgReinforceEMA:
		if o.EMADecay < 0 || o.EMADecay >= 1 {
			return nil, fmt.Errorf("advantage ema_decay %v: want [0,1)", o.EMADecay)
		}
		return &emaBaseline{opts: o}, nil
	}
	return nil, fmt.Errorf("unknown advantage algorithm %q", o.Algorithm)
}

// meanStd returns the mean and the unbiased (n-1) standard deviation, the
// same estimator as torch.std used by Trinity-RFT and verl.
func meanStd(xs []float64) (mean, std float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss / float64(len(xs)-1))
}

// groupBy groups indices of exps by key, keeping first-seen order of keys.
func groupBy(exps []*capture.Experience, key func(*capture.Experience) string) [][]int {
	pos := map[string]int{}
	var out [][]int
	for i, e := range exps {
		k := key(e)
		j, ok := pos[k]
		if !ok {
			j = len(out)
			pos[k] = j
			out = append(out, nil)
		}
		out[j] = append(out[j], i)
	}
	return out
}

// taskKey groups by task within an owner (a client's sessions never enter
// the baseline of another client's task); experiences without a task are
// their own group.
func taskKey(e *capture.Experience) string {
	if e.Task == "" {
		return "\x00session:" + e.Session + fmt.Sprintf("#%d", e.Leaf)
	}
	return e.Owner + "\x01" + e.Task
}

// broadcast spreads a scalar advantage over an experience's masked tokens.
func broadcast(e *capture.Experience, score float64) []float32 {
	adv := make([]float32, len(e.Tokens))
	for t := 1; t < len(adv) && t < len(e.Mask); t++ {
		if e.Mask[t] != 0 {
			adv[t] = float32(score)
		}
	}
	return adv
}

func newSample(e *capture.Experience, score float64) Sample {
	return Sample{Exp: e, Advantages: broadcast(e, score), Score: score, Weight: 1}
}

// batchStd is the std of all values when StdLevel is "batch", else -1.
func batchStd(o AdvantageOptions, vals []float64) float64 {
	if o.StdLevel != "batch" {
		return -1
	}
	if len(vals) <= 1 {
		return 1
	}
	_, s := meanStd(vals)
	return s
}

// normScores normalises one group's rewards GRPO-style. ok is false when the
// group must be skipped (fewer than two members or std <= threshold).
func normScores(o AdvantageOptions, rs []float64, bstd float64) (scores []float64, ok bool) {
	mean, std := meanStd(rs)
	if o.StdThreshold >= 0 && (len(rs) < 2 || std <= o.StdThreshold) {
		return nil, false
	}
	if len(rs) < 2 {
		mean, std = 0, 1
	}
	div := std
	if bstd >= 0 {
		div = bstd
	}
	scores = make([]float64, len(rs))
	for i, r := range rs {
		scores[i] = (r - mean) / (div + o.Epsilon)
	}
	return scores, true
}

type grpo struct{ o AdvantageOptions }

// Compute implements GRPO: group by task, (r-mean)/(std+eps).
func (g grpo) Compute(exps []*capture.Experience) ([]Sample, AdvantageStats) {
	groups := groupBy(exps, taskKey)
	bstd := batchStd(g.o, rewards(exps, nil))
	var out []Sample
	st := AdvantageStats{Groups: len(groups)}
	for _, idx := range groups {
		scores, ok := normScores(g.o, rewards(exps, idx), bstd)
		if !ok {
			st.SkippedGroups++
			st.Skipped += len(idx)
			continue
		}
		for k, i := range idx {
			out = append(out, newSample(exps[i], scores[k]))
		}
	}
	finishStats(&st, exps, out)
	return out, st
}

// rewards returns the rewards of exps at idx (all when idx is nil).
func rewards(exps []*capture.Experience, idx []int) []float64 {
	if idx == nil {
		rs := make([]float64, len(exps))
		for i, e := range exps {
			rs[i] = e.Reward
		}
		return rs
	}
	rs := make([]float64, len(idx))
	for k, i := range idx {
		rs[k] = exps[i].Reward
	}
	return rs
}

func finishStats(st *AdvantageStats, exps []*capture.Experience, out []Sample) {
	st.RewardMean, st.RewardStd = meanStd(rewards(exps, nil))
	st.Kept = len(out)
	if len(out) == 0 {
		return
	}
	scores := make([]float64, len(out))
	st.AdvMin, st.AdvMax = math.Inf(1), math.Inf(-1)
	for i, s := range out {
		scores[i] = s.Score
		st.AdvMin = math.Min(st.AdvMin, s.Score)
		st.AdvMax = math.Max(st.AdvMax, s.Score)
	}
	st.AdvMean, st.AdvStd = meanStd(scores)
}

type rloo struct{ o AdvantageOptions }

// Compute implements RLOO: r_i minus the mean of the other members of its
// group, i.e. n/(n-1) * (r_i - mean). Singleton and zero-variance groups
// carry no signal and are skipped unless StdThreshold is negative.
func (g rloo) Compute(exps []*capture.Experience) ([]Sample, AdvantageStats) {
	groups := groupBy(exps, taskKey)
	var out []Sample
	st := AdvantageStats{Groups: len(groups)}
	for _, idx := range groups {
		rs := rewards(exps, idx)
		mean, std := meanStd(rs)
		if g.o.StdThreshold >= 0 && (len(rs) < 2 || std <= g.o.StdThreshold) {
			st.SkippedGroups++
			st.Skipped += len(idx)
			continue
		}
		n := float64(len(rs))
		for k, i := range idx {
			a := rs[k] // a group of one has no baseline (Trinity-RFT)
			if n > 1 {
				a = (rs[k] - mean) * n / (n - 1)
			}
			out = append(out, newSample(exps[i], a))
		}
	}
	finishStats(&st, exps, out)
	return out, st
}

// emaBaseline is REINFORCE with an exponential-moving-average baseline, for
// ungrouped online traffic. Not safe for concurrent use.
type emaBaseline struct {
	opts     AdvantageOptions
	baseline float64
	init     bool
}

// Compute returns r - b for every experience, b being the baseline before
// this batch, then moves b toward the batch mean reward.
func (e *emaBaseline) Compute(exps []*capture.Experience) ([]Sample, AdvantageStats) {
	rs := rewards(exps, nil)
	mean, _ := meanStd(rs)
	if !e.init && len(rs) > 0 {
		e.baseline, e.init = mean, true
	}
	out := make([]Sample, len(exps))
	for i, x := range exps {
		out[i] = newSample(x, rs[i]-e.baseline)
	}
	if len(rs) > 0 {
		e.baseline = e.opts.EMADecay*e.baseline + (1-e.opts.EMADecay)*mean
	}
	st := AdvantageStats{Groups: 1}
	finishStats(&st, exps, out)
	return out, st
}

// Baseline reports the current EMA baseline.
func (e *emaBaseline) Baseline() float64 { return e.baseline }

type stepWiseGRPO struct{ o AdvantageOptions }

// lastStepReward is the reward of a run's final step: its own call reward
// when one was given, else the experience's combined reward.
func lastStepReward(e *capture.Experience) float64 {
	if n := len(e.Steps); n > 0 && e.Steps[n-1].Reward != nil {
		return *e.Steps[n-1].Reward
	}
	return e.Reward
}

// run is one session's experiences, ordered by leaf.
type run struct {
	idx   []int
	steps int
	last  float64
}

func runsOf(exps []*capture.Experience, idx []int) []run {
	sub := make([]*capture.Experience, len(idx))
	for k, i := range idx {
		sub[k] = exps[i]
	}
	var runs []run
	for _, r := range groupBy(sub, func(e *capture.Experience) string { return e.Session }) {
		sort.SliceStable(r, func(a, b int) bool { return sub[r[a]].Leaf < sub[r[b]].Leaf })
		ru := run{}
		for _, k := range r {
			ru.idx = append(ru.idx, idx[k])
			ru.steps += max(len(sub[k].Steps), 1)
		}
		ru.last = lastStepReward(sub[r[len(r)-1]])
		runs = append(runs, ru)
	}
	return runs
}

// Compute implements Trinity-RFT's step_wise_grpo: within each task, each
// run (session) is scored by its last step's reward normalised in the
// group, and that score is broadcast to every step of the run (divided by
// the run's step count with StepNorm).
func (g stepWiseGRPO) Compute(exps []*capture.Experience) ([]Sample, AdvantageStats) {
	groups := groupBy(exps, func(e *capture.Experience) string {
		if e.Task == "" {
			return "\x00session:" + e.Session
		}
		return e.Owner + "\x01" + e.Task
	})
	all := make([][]run, len(groups))
	var lasts []float64
	for gi, idx := range groups {
		all[gi] = runsOf(exps, idx)
		for _, r := range all[gi] {
			lasts = append(lasts, r.last)
		}
	}
	bstd := batchStd(g.o, lasts)
	var out []Sample
	st := AdvantageStats{Groups: len(groups)}
	for _, runs := range all {
		out = g.group(runs, exps, bstd, out, &st)
	}
	finishStats(&st, exps, out)
	return out, st
}

func (g stepWiseGRPO) group(runs []run, exps []*capture.Experience, bstd float64, out []Sample, st *AdvantageStats) []Sample {
	rs := make([]float64, len(runs))
	for i, r := range runs {
		rs[i] = r.last
	}
	scores, ok := normScores(g.o, rs, bstd)
	if !ok {
		st.SkippedGroups++
		for _, r := range runs {
			st.Skipped += len(r.idx)
		}
		return out
	}
	for i, r := range runs {
		s := scores[i]
		if g.o.StepNorm {
			s /= float64(r.steps)
		}
		for _, j := range r.idx {
			out = append(out, newSample(exps[j], s))
		}
	}
	return out
}
