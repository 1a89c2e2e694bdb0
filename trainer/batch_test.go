package trainer

import (
	"sort"
	"testing"

	"github.com/hone-rl/hone/capture"
)

func TestApplyStaleness(t *testing.T) {
	mk := func(versions ...int64) Sample {
		e := &capture.Experience{Mask: []uint8{0, 1, 1, 0}, Versions: append([]int64{0}, versions...)}
		return Sample{Exp: e, Weight: 1}
	}
	tests := []struct {
		opts     StalenessOptions
		wantLags []int64
		wantW    []float64
		dropped  int
	}{
		{StalenessOptions{MaxPolicyLag: 1, Policy: StaleDrop}, []int64{0, 1}, []float64{1, 1}, 2},
		{StalenessOptions{MaxPolicyLag: 1, Policy: StaleDownweight, Decay: 0.5}, []int64{0, 1, 2, 4}, []float64{1, 1, 0.5, 0.125}, 0},
		{StalenessOptions{MaxPolicyLag: -1, Policy: StaleDrop}, []int64{0, 1, 2, 4}, []float64{1, 1, 1, 1}, 0},
	}
	for i, tc := range tests {
		// trainer at version 5; the version of masked-out token 3 is ignored.
		in := []Sample{mk(5, 6, 0), mk(4, 5, 0), mk(3, 5, 9), mk(5, 1, 0)}
		got, dropped := tc.opts.ApplyStaleness(in, func(v int64) int64 { return max(5-v, 0) })
		if dropped != tc.dropped || len(got) != len(tc.wantLags) {
			t.Fatalf("case %d: kept %d dropped %d", i, len(got), dropped)
		}
		for j, s := range got {
			if s.Lag != tc.wantLags[j] || s.Weight != tc.wantW[j] {
				t.Errorf("case %d sample %d: lag %d weight %v, want %d %v", i, j, s.Lag, s.Weight, tc.wantLags[j], tc.wantW[j])
			}
		}
	}
}

func TestPackMicroBatches(t *testing.T) {
	lengths := []int{7, 3, 5, 2, 12, 1}
	bins := PackMicroBatches(lengths, 10)
	var seen []int
	for _, b := range bins {
		sum := 0
		for _, i := range b {
			sum += lengths[i]
			seen = append(seen, i)
		}
		if sum > 10 && len(b) > 1 {
			t.Errorf("bin %v holds %d tokens > budget", b, sum)
		}
	}
	sort.Ints(seen)
	for i, s := range seen {
		if s != i {
			t.Fatalf("indices %v: want each of 0..5 once", seen)
		}
	}
	if len(bins) != 3 { // first-fit decreasing: {12} (oversize, alone) {7,3} {5,2,1}
		t.Errorf("got %d micro-batches %v, want 3", len(bins), bins)
	}
}
