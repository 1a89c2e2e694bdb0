package capture

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"
)

func TestTimeHeap(t *testing.T) {
	t0 := time.Unix(1000, 0)
	h := newTimeHeap()
	r := rand.New(rand.NewSource(1))
	want := map[string]time.Time{}
	for i := 0; i < 500; i++ {
		id := fmt.Sprintf("s%d", r.Intn(200))
		switch r.Intn(4) {
		case 0:
			h.remove(id)
			delete(want, id)
		default:
			at := t0.Add(time.Duration(r.Intn(100)) * time.Second)
			h.set(id, at)
			want[id] = at
		}
	}
	if h.Len() != len(want) {
		t.Fatalf("%d held, want %d", h.Len(), len(want))
	}
	for id, at := range want {
		if got, ok := h.get(id); !ok || !got.Equal(at) {
			t.Fatalf("%s: %v %v, want %v", id, got, ok, at)
		}
	}
	cutoff := t0.Add(30 * time.Second)
	var expired []string
	for id, at := range want {
		if at.Before(cutoff) {
			expired = append(expired, id)
		}
	}
	got := h.before(cutoff, 1<<20)
	slices.Sort(got)
	slices.Sort(expired)
	if !slices.Equal(got, expired) {
		t.Fatalf("before(cutoff) = %v\nwant %v", got, expired)
	}
	if n := len(h.before(cutoff, 3)); n != min(3, len(expired)) {
		t.Fatalf("max 3 gave %d", n)
	}
	h.drop(expired, cutoff)
	if len(h.before(cutoff, 1<<20)) != 0 || h.Len() != len(want)-len(expired) {
		t.Fatal("drop left expired sessions")
	}
}

// BenchmarkIdlePass: the janitor's look-up of timed-out sessions among a
// million open ones, of which a few have timed out, against walking them
// all (what it did before).
func BenchmarkIdlePass(b *testing.B) {
	t0 := time.Unix(1000, 0)
	h := newTimeHeap()
	m := map[string]time.Time{}
	for i := 0; i < 1_000_000; i++ {
		at := t0.Add(time.Duration(i) * time.Millisecond)
		h.set(fmt.Sprintf("session-%d", i), at)
		m[fmt.Sprintf("session-%d", i)] = at
	}
	cutoff := t0.Add(100 * time.Millisecond)
	b.Run("heap", func(b *testing.B) {
		for b.Loop() {
			_ = h.before(cutoff, maxPerPass)
		}
	})
	b.Run("walk", func(b *testing.B) {
		for b.Loop() {
			var ids []string
			for id, at := range m {
				if at.Before(cutoff) && len(ids) < maxPerPass {
					ids = append(ids, id)
				}
			}
		}
	})
}

// TestTimeHeapOldest: oldest returns the sessions with the k earliest
// times, earliest first, and leaves the heap holding what it held.
func TestTimeHeapOldest(t *testing.T) {
	t0 := time.Unix(1000, 0)
	h := newTimeHeap()
	r := rand.New(rand.NewSource(2))
	perm := r.Perm(300)
	for _, i := range perm {
		h.set(fmt.Sprintf("s%03d", i), t0.Add(time.Duration(i)*time.Second))
	}
	for _, k := range []int{0, 1, 7, 300, 400} {
		got, last := h.oldest(k)
		if n := min(k, 300); n > 0 && !last.Equal(t0.Add(time.Duration(n-1)*time.Second)) {
			t.Fatalf("oldest(%d): latest time %v, want %v", k, last, t0.Add(time.Duration(n-1)*time.Second))
		}
		want := make([]string, 0, k)
		for i := 0; i < min(k, 300); i++ {
			want = append(want, fmt.Sprintf("s%03d", i))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("oldest(%d) = %v, want %v", k, got, want)
		}
		if h.Len() != 300 {
			t.Fatalf("after oldest(%d) the heap holds %d, want 300", k, h.Len())
		}
		for i := range 300 {
			if at, ok := h.get(fmt.Sprintf("s%03d", i)); !ok || !at.Equal(t0.Add(time.Duration(i)*time.Second)) {
				t.Fatalf("after oldest(%d): s%03d at %v, %v", k, i, at, ok)
			}
		}
	}
}
