package proxy

import (
	"sync"
	"sync/atomic"
	"testing"
)

func TestAliasLinkedNamesFollow(t *testing.T) {
	a := NewAliases([]AliasConfig{{Name: "hone", Target: "tiny", Names: []string{"tiny"}}})
	a.Link("Qwen/Qwen3-8B", "hone")
	for _, name := range []string{"hone", "tiny", "Qwen/Qwen3-8B"} {
		if p, ok := a.Lookup(name); !ok || p.Alias != "hone" || p.Target != "tiny" || p.Version != 0 {
			t.Fatalf("%s → %+v %v", name, p, ok)
		}
	}
	a.Swap("hone", "hone-v1", 1)
	for _, name := range []string{"hone", "tiny", "Qwen/Qwen3-8B"} {
		if p, _ := a.Lookup(name); p.Target != "hone-v1" || p.Version != 1 {
			t.Fatalf("after swap %s → %+v", name, p)
		}
	}
	if l := a.List(); len(l) != 1 || l[0].Alias != "hone" {
		t.Fatalf("List = %+v, want the one policy", l)
	}
	if n := a.Names("hone"); len(n) != 3 {
		t.Fatalf("Names = %v", n)
	}
	// a name follows one alias at a time
	a.Swap("other", "other-base", 0)
	a.Link("tiny", "other")
	if p, _ := a.Lookup("tiny"); p.Alias != "other" {
		t.Fatalf("relinked tiny → %+v", p)
	}
	if n := a.Names("hone"); len(n) != 2 {
		t.Fatalf("hone still lists tiny: %v", n)
	}
}

func TestAliasHistoryAndCountersBounded(t *testing.T) {
	a := NewAliases(nil)
	for v := int64(1); v <= 500; v++ {
		a.Swap("hone", "t", v)
		_, release, _ := a.acquire("hone")
		release()
	}
	if h := a.History("hone"); len(h) != maxHistory || h[len(h)-1].Version != 500 {
		t.Fatalf("history holds %d, last %+v", len(h), h[len(h)-1])
	}
	n := 0
	a.inflight.Range(func(any, any) bool { n++; return true })
	if n > 2 {
		t.Fatalf("%d in-flight counters kept after 500 versions", n)
	}
}

// TestAcquireNeverUsesRetired races calls against a publisher that swaps,
// waits for the old version to drain, then retires it: no call may hold a
// retired version.
func TestAcquireNeverUsesRetired(t *testing.T) {
	a := NewAliases([]AliasConfig{{Name: "hone", Target: "v0"}})
	var retired [501]atomic.Bool
	var stop atomic.Bool
	var bad atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				p, release, ok := a.acquire("hone")
				if !ok {
					bad.Add(1)
					return
				}
				if retired[p.Version].Load() {
					bad.Add(1)
				}
				release()
			}
		}()
	}
	for v := int64(1); v <= 500; v++ {
		a.Swap("hone", "t", v)
		for a.InFlight("hone", v-1) > 0 {
		}
		retired[v-1].Store(true)
	}
	stop.Store(true)
	wg.Wait()
	if bad.Load() > 0 {
		t.Fatalf("%d calls used a retired version", bad.Load())
	}
}
