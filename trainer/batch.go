package trainer

import (
	"fmt"
	"math"
	"sort"
)

// Staleness policies accepted by StalenessOptions.Policy.
const (
	StaleDrop       = "drop"       // samples older than MaxPolicyLag are discarded
	StaleDownweight = "downweight" // their weight is multiplied by Decay^(lag-MaxPolicyLag)
)

// StalenessOptions bounds how off-policy a sample may be.
type StalenessOptions struct {
	// MaxPolicyLag is how many versions behind the trainer a sample's
	// oldest generated token may be before Policy applies; < 0 disables.
	MaxPolicyLag int64   `yaml:"max_policy_lag"`
	Policy       string  `yaml:"stale_policy"` // drop or downweight
	Decay        float64 `yaml:"stale_decay"`  // downweight factor per version beyond the limit
}

// Validate reports a configuration error, if any.
func (s StalenessOptions) Validate() error {
	if s.Policy != StaleDrop && s.Policy != StaleDownweight {
		return fmt.Errorf("staleness policy %q: want drop or downweight", s.Policy)
	}
	if s.Policy == StaleDownweight && (s.Decay <= 0 || s.Decay > 1) {
		return fmt.Errorf("staleness decay %v: want (0, 1]", s.Decay)
	}
	return nil
}

// sampleLag is how many steps the weights that generated the oldest of
// s's tokens trail the trainer's by (lagOf of each distinct version of its
// generated tokens, the largest; 0 when no token carries a version).
func sampleLag(s *Sample, lagOf func(version int64) int64) int64 {
	var lag int64
	seen := int64(-1)
	for t, v := range s.Exp.Versions {
		if t < len(s.Exp.Mask) && s.Exp.Mask[t] != 0 && v != seen {
			seen = v
			lag = max(lag, lagOf(v))
		}
	}
	return lag
}

// ApplyStaleness sets each sample's Lag (lagOf says how many steps a
// version's weights trail the trainer's) and drops or down-weights those
// beyond the limit. It returns the kept samples and how many were dropped.
func (s StalenessOptions) ApplyStaleness(samples []Sample, lagOf func(version int64) int64) ([]Sample, int) {
	kept := samples[:0]
	dropped := 0
	for _, x := range samples {
		x.Lag = sampleLag(&x, lagOf)
		if over := x.Lag - s.MaxPolicyLag; s.MaxPolicyLag >= 0 && over > 0 {
			if s.Policy == StaleDrop {
				dropped++
				continue
			}
			x.Weight *= math.Pow(s.Decay, float64(over))
		}
		kept = append(kept, x)
	}
	return kept, dropped
}

// PackMicroBatches splits sequences (given by token length) into
// micro-batches of at most budget tokens, first-fit by decreasing length.
// A sequence longer than budget gets a micro-batch of its own. The result
// holds indices into lengths; every index appears exactly once.
func PackMicroBatches(lengths []int, budget int) [][]int {
	order := make([]int, len(lengths))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return lengths[order[a]] > lengths[order[b]] })
	var bins [][]int
	var used []int
	for _, i := range order {
		placed := false
		for b := range bins {
			if used[b]+lengths[i] <= budget {
				bins[b] = append(bins[b], i)
				used[b] += lengths[i]
				placed = true
				break
			}
		}
		if !placed {
			bins = append(bins, []int{i})
			used = append(used, lengths[i])
		}
	}
	return bins
}
