package rollout

import (
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// Stats summarises one arm's per-session rewards (Welford's running mean
// and squared deviations, stable for long runs) and its calls.
type Stats struct {
	N      int     `json:"n"`      // sessions rewarded
	Mean   float64 `json:"mean"`   // mean session reward
	M2     float64 `json:"m2"`     // sum of squared deviations from the mean
	Calls  int     `json:"calls"`  // calls served
	Errors int     `json:"errors"` // calls that failed (engine error or invalid answer)
}

// add folds in one session's reward.
func (s *Stats) add(r float64) {
	s.N++
	d := r - s.Mean
	s.Mean += d / float64(s.N)
	s.M2 += d * (r - s.Mean)
}

// variance is the unbiased sample variance (0 below two sessions).
func (s Stats) variance() float64 {
	if s.N < 2 {
		return 0
	}
	return s.M2 / float64(s.N-1)
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

// errorsWorse reports whether the candidate's call error rate exceeds the
// incumbent's by more than margin, by a one-sided two-proportion z-test at
// level alpha.
func errorsWorse(cand, inc Stats, margin, alpha float64) bool {
	if cand.Calls == 0 || inc.Calls == 0 {
		return false
	}
	pc, pi := cand.errorRate(), inc.errorRate()
	se := math.Sqrt(pc*(1-pc)/float64(cand.Calls) + pi*(1-pi)/float64(inc.Calls))
	z := distuv.UnitNormal.Quantile(1 - alpha)
	if se == 0 {
		return pc-pi > margin
	}
	return pc-pi-z*se > margin
}
