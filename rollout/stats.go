package rollout

import (
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// Stats summarises one arm's per-session rewards (Welford's running mean
// and squared deviations, stable for long runs) and its calls, with the
// guard metrics per successful call.
type Stats struct {
	N      int     `json:"n"`      // sessions rewarded
	Mean   float64 `json:"mean"`   // mean session reward
	M2     float64 `json:"m2"`     // sum of squared deviations from the mean
	Calls  int     `json:"calls"`  // calls served
	Errors int     `json:"errors"` // calls that failed (engine error or invalid answer)
	// Latency (seconds) and Length (completion tokens) of the calls that
	// succeeded.
	Latency Welford `json:"latency"`
	Length  Welford `json:"length"`
	// ToolCalls counts the successful calls that made tool calls;
	// BadToolCalls those of them with arguments that are not a JSON object.
	ToolCalls    int `json:"tool_calls"`
	BadToolCalls int `json:"bad_tool_calls"`
}

// Welford is a running mean and sum of squared deviations.
type Welford struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	M2   float64 `json:"m2"`
}

// add folds in one value.
func (w *Welford) add(x float64) {
	w.N++
	d := x - w.Mean
	w.Mean += d / float64(w.N)
	w.M2 += d * (x - w.Mean)
}

// variance is the unbiased sample variance (0 below two values).
func (w Welford) variance() float64 {
	if w.N < 2 {
		return 0
	}
	return w.M2 / float64(w.N-1)
}

// add folds in one session's reward.
func (s *Stats) add(r float64) {
	w := Welford{N: s.N, Mean: s.Mean, M2: s.M2}
	w.add(r)
	s.N, s.Mean, s.M2 = w.N, w.Mean, w.M2
}

// variance is the unbiased sample variance (0 below two sessions).
func (s Stats) variance() float64 { return Welford{N: s.N, Mean: s.Mean, M2: s.M2}.variance() }

// badToolRate is the share of tool-calling calls whose arguments were bad.
func (s Stats) badToolRate() float64 {
	if s.ToolCalls == 0 {
		return 0
	}
	return float64(s.BadToolCalls) / float64(s.ToolCalls)
}

// errorRate is the share of failed calls.
func (s Stats) errorRate() float64 {
	if s.Calls == 0 {
		return 0
	}
	return float64(s.Errors) / float64(s.Calls)
}

// interval is the one-sided (1-alpha) confidence interval of the difference
// of means cand - inc by Welch's t (unequal variances, Welch-Satterthwaite
// degrees of freedom): lo is the lower bound, hi the upper.
func interval(cand, inc Stats, alpha float64) (diff, lo, hi float64) {
	diff = cand.Mean - inc.Mean
	vc, vi := cand.variance()/float64(cand.N), inc.variance()/float64(inc.N)
	se := math.Sqrt(vc + vi)
	if se == 0 {
		return diff, diff, diff // every reward equal in both arms: the difference is known
	}
	df := (vc + vi) * (vc + vi) / (vc*vc/float64(cand.N-1) + vi*vi/float64(inc.N-1))
	q := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(1 - alpha)
	return diff, diff - q*se, diff + q*se
}

// proportionWorse reports whether the candidate's rate pc (of nc trials)
// exceeds the incumbent's pi (of ni) by more than margin, by a one-sided
// two-proportion z-test at level alpha.
func proportionWorse(pc float64, nc int, pi float64, ni int, margin, alpha float64) bool {
	if nc == 0 || ni == 0 {
		return false
	}
	se := math.Sqrt(pc*(1-pc)/float64(nc) + pi*(1-pi)/float64(ni))
	z := distuv.UnitNormal.Quantile(1 - alpha)
	if se == 0 {
		return pc-pi > margin
	}
	return pc-pi-z*se > margin
}

// errorsWorse reports whether the candidate's call error rate exceeds the
// incumbent's by more than margin.
func errorsWorse(cand, inc Stats, margin, alpha float64) bool {
	return proportionWorse(cand.errorRate(), cand.Calls, inc.errorRate(), inc.Calls, margin, alpha)
}

// toolCallsWorse reports whether the candidate's share of bad tool calls
// exceeds the incumbent's by more than margin.
func toolCallsWorse(cand, inc Stats, margin, alpha float64) bool {
	return proportionWorse(cand.badToolRate(), cand.ToolCalls, inc.badToolRate(), inc.ToolCalls, margin, alpha)
}

// ratioWorse reports whether the candidate's mean exceeds ratio times the
// incumbent's, significantly: the one-sided Welch lower bound of
// cand - ratio*inc at level alpha is above 0. A ratio of 0 turns it off;
// each arm needs two values.
func ratioWorse(cand, inc Welford, ratio, alpha float64) bool {
	if ratio <= 0 || cand.N < 2 || inc.N < 2 {
		return false
	}
	scaled := Welford{N: inc.N, Mean: ratio * inc.Mean, M2: ratio * ratio * inc.M2}
	_, lo, _ := interval(Stats{N: cand.N, Mean: cand.Mean, M2: cand.M2}, Stats{N: scaled.N, Mean: scaled.Mean, M2: scaled.M2}, alpha)
	return lo > 0
}
