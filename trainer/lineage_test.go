package trainer

import "testing"

func TestLineageLag(t *testing.T) {
	// Started at v2 (resumed); trained v3, v4, v5; rolled back to v3;
	// trained v6, v7.
	var l lineage
	l.cur = 2
	for _, v := range []int64{3, 4, 5} {
		l.stepped(v)
	}
	if got := l.lag(2); got != 3 {
		t.Fatalf("before the revert: lag of v2 %d, want 3", got)
	}
	l.reverted(3)
	if got := l.lag(3); got != 0 {
		t.Fatalf("right after the revert to v3: its lag %d, want 0 (its weights are the trainer's)", got)
	}
	l.stepped(6)
	l.stepped(7)
	for _, tc := range []struct{ v, want int64 }{
		{7, 0}, {6, 1}, {3, 2}, {2, 3},
		{4, 3}, {5, 4}, // the rolled-back branch: up to v3, then down to v7
		{0, 5}, // from before the resume: on the line below v2
		{9, 0}, // newer than anything trained here (another trainer's): no lag known
	} {
		if got := l.lag(tc.v); got != tc.want {
			t.Errorf("lag of v%d: %d, want %d", tc.v, got, tc.want)
		}
	}
}
