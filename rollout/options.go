package rollout

import (
	"fmt"
	"math"
	"time"
)

// Options configure guarded rollouts (the rollout: section of hone's
// config).
type Options struct {
	// Enabled makes every newly published version a candidate that earns
	// its traffic; off, a new version serves everyone at once.
	Enabled bool `yaml:"enabled"`
	// Steps are the candidate's shares of new sessions, in order; after
	// the last step's check the candidate is promoted.
	Steps []float64 `yaml:"steps"`
	// MinSessions is the number of rewarded candidate sessions between two
	// looks at the evidence (and the minimum on each arm for the first).
	MinSessions int `yaml:"min_sessions"`
	// MaxLooks bounds the looks: each is a test at Alpha/MaxLooks
	// (Bonferroni), so over a whole rollout the chance of a wrong decision
	// by chance stays within Alpha. Without a decision at the last look
	// the candidate is rolled back.
	MaxLooks int `yaml:"max_looks"`
	// MaxWait rolls back a candidate that has not been promoted this long
	// after its rollout began (too little traffic or reward to decide).
	MaxWait time.Duration `yaml:"max_wait"`
	// Alpha is the significance level of the whole rollout's decisions.
	Alpha float64 `yaml:"alpha"`
	// Margin is how much lower (in reward units) the candidate's mean
	// session reward may be and still count as not worse.
	Margin float64 `yaml:"margin"`
	// ErrorMargin is how much higher the candidate's call error rate may
	// be (a guard metric: engine errors and invalid answers).
	ErrorMargin float64 `yaml:"error_margin"`
	// ToolCallMargin is how much higher the candidate's share of tool
	// calls with arguments that are not a JSON object may be.
	ToolCallMargin float64 `yaml:"tool_call_margin"`
	// LatencyRatio is how many times the incumbent's mean call latency the
	// candidate's may be (0: not guarded).
	LatencyRatio float64 `yaml:"latency_ratio"`
	// LengthRatio is how many times the incumbent's mean completion length
	// (tokens per call) the candidate's may be (0: not guarded): a policy
	// that learned to ramble.
	LengthRatio float64 `yaml:"length_ratio"`
}

// DefaultOptions are off, with the schedule a first rollout would use:
// 10%, 25%, 50% of new sessions, a look every 50 rewarded candidate
// sessions, at most 20 looks, 5% error over the whole rollout, and a
// margin of 0.1 (for rewards in 0..1: set it to the loss your reward scale
// calls meaningful). With rewards of standard deviation 0.3 an equal
// candidate is promoted after about 150 to 250 candidate sessions
// (TestDecisionErrorRates).
func DefaultOptions() Options {
	return Options{Steps: []float64{0.1, 0.25, 0.5}, MinSessions: 50, MaxLooks: 20, MaxWait: 24 * time.Hour,
		Alpha: 0.05, Margin: 0.1, ErrorMargin: 0.02, ToolCallMargin: 0.05, LatencyRatio: 1.5, LengthRatio: 2}
}

// Validate names the first invalid key.
func (o Options) Validate() error {
	if len(o.Steps) == 0 {
		return fmt.Errorf("rollout.steps: empty, want shares in (0, 1] in increasing order, e.g. [0.1, 0.25, 0.5]")
	}
	for i, s := range o.Steps {
		if !(s > 0 && s <= 1) || (i > 0 && s <= o.Steps[i-1]) {
			return fmt.Errorf("rollout.steps: %v, want shares in (0, 1] in increasing order", o.Steps)
		}
	}
	switch {
	case o.MinSessions < 2:
		return fmt.Errorf("rollout.min_sessions: %d, want >= 2 (a variance needs two sessions)", o.MinSessions)
	case o.MaxLooks < len(o.Steps):
		return fmt.Errorf("rollout.max_looks: %d, want >= len(rollout.steps) = %d (one look per step at least)",
			o.MaxLooks, len(o.Steps))
	case o.MaxWait <= 0:
		return fmt.Errorf("rollout.max_wait: %s, want > 0", o.MaxWait)
	case !(o.Alpha > 0 && o.Alpha < 0.5):
		return fmt.Errorf("rollout.alpha: %g, want in (0, 0.5)", o.Alpha)
	case !(o.Margin >= 0):
		return fmt.Errorf("rollout.margin: %g, want >= 0", o.Margin)
	case !(o.ErrorMargin >= 0 && o.ErrorMargin < 1):
		return fmt.Errorf("rollout.error_margin: %g, want in [0, 1)", o.ErrorMargin)
	case !(o.ToolCallMargin >= 0 && o.ToolCallMargin < 1):
		return fmt.Errorf("rollout.tool_call_margin: %g, want in [0, 1)", o.ToolCallMargin)
	case !(o.LatencyRatio == 0 || o.LatencyRatio >= 1) || math.IsInf(o.LatencyRatio, 0):
		return fmt.Errorf("rollout.latency_ratio: %g, want 0 (off) or >= 1", o.LatencyRatio)
	case !(o.LengthRatio == 0 || o.LengthRatio >= 1) || math.IsInf(o.LengthRatio, 0):
		return fmt.Errorf("rollout.length_ratio: %g, want 0 (off) or >= 1", o.LengthRatio)
	}
	return nil
}
