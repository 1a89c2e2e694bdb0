package rollout

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// memStore is a Store in memory.
type memStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memStore) PutMeta(k string, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string][]byte{}
	}
	s.m[k] = append([]byte(nil), v...)
	return nil
}

func (s *memStore) MetaPrefix(p string) (map[string][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]byte{}
	for k, v := range s.m {
		if strings.HasPrefix(k, p) {
			out[k] = v
		}
	}
	return out, nil
}

var inc, cand = Version{Version: 1, Target: "agent-v1"}, Version{Version: 2, Target: "agent-v2"}

// simulate routes sessions through m until the rollout of "agent" is
// decided or max sessions ran; each session's reward is drawn from the
// normal distribution of the arm that served it (clipped to [0, 1] when
// bernoulli is false, a 0/1 success with that probability otherwise).
func simulate(t testing.TB, m *Manager, rng *rand.Rand, incMean, candMean, sd float64, max int) (Rollout, int) {
	t.Helper()
	for n := 0; n < max; n++ {
		v, ok := m.Route("agent", fmt.Sprintf("s%d-%d", rng.Int64(), n))
		if !ok {
			r, _ := m.cur["agent"]
			return copyRollout(r), n
		}
		mean := incMean
		if v == cand {
			mean = candMean
		}
		m.ObserveSession("agent", mean+sd*rng.NormFloat64(), []int64{v.Version})
	}
	r := m.cur["agent"]
	return copyRollout(r), max
}

func newManager(t testing.TB, o Options, s Store) *Manager {
	t.Helper()
	m, err := New(o, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestPromotionAndRollback(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		name              string
		incMean, candMean float64
		want              string
		steps             int
	}{
		{"better", 0.5, 0.7, Promoted, 2},
		{"equal", 0.5, 0.5, Promoted, 2},
		{"much worse", 0.5, 0.2, RolledBack, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newManager(t, DefaultOptions(), nil)
			var got []Rollout
			m.OnDecision(func(r Rollout) { got = append(got, r) })
			if err := m.Begin("agent", inc, cand); err != nil {
				t.Fatal(err)
			}
			r, n := simulate(t, m, rng, c.incMean, c.candMean, 0.1, 20000)
			if r.Decision != c.want || r.Step != c.steps || len(got) != 1 || got[0].Decision != c.want {
				t.Fatalf("after %d sessions: %s at step %d (%s), callbacks %d", n, r.Decision, r.Step, r.Reason, len(got))
			}
			t.Logf("%s after %d sessions (%d candidate): %s", r.Decision, n, r.Arms[Candidate].N, r.Reason)
			if _, ok := m.Route("agent", "late"); ok {
				t.Fatal("a decided rollout still routes")
			}
		})
	}
}

// TestDecisionErrorRates measures, on synthetic reward streams with known
// answers, how often a rollout decides wrongly: an equal candidate rolled
// back (by the test, not by running out of looks), a worse one (by twice
// the margin) promoted. Both are bounded by alpha (0.05) by construction.
func TestDecisionErrorRates(t *testing.T) {
	const runs = 400
	rng := rand.New(rand.NewPCG(3, 4))
	o := DefaultOptions()
	falseRollback, undecided, falsePromote, promotedAt := 0, 0, 0, 0
	for i := 0; i < runs; i++ {
		m := newManager(t, o, nil)
		_ = m.Begin("agent", inc, cand)
		r, _ := simulate(t, m, rng, 0.5, 0.5, 0.3, 100000)
		if r.Decision == Promoted {
			promotedAt += r.Arms[Candidate].N
		}
		if r.Decision == RolledBack {
			if strings.HasPrefix(r.Reason, "undecided") {
				undecided++
			} else {
				falseRollback++
			}
		}
		m = newManager(t, o, nil)
		_ = m.Begin("agent", inc, cand)
		if r, _ := simulate(t, m, rng, 0.5, 0.5-2*o.Margin, 0.3, 100000); r.Decision == Promoted {
			falsePromote++
		}
	}
	promoted := runs - falseRollback - undecided
	t.Logf("%d runs each (reward sd 0.3): equal candidate rolled back as worse %d (%.1f%%), undecided %d, promoted %d "+
		"after %.0f candidate sessions on average; candidate worse by 2x margin promoted %d (%.1f%%)",
		runs, falseRollback, 100*float64(falseRollback)/runs, undecided, promoted,
		float64(promotedAt)/float64(max(promoted, 1)), falsePromote, 100*float64(falsePromote)/runs)
	// alpha bounds each error rate; 400 runs give a standard error of ~1.1% at 5%
	if falseRollback > runs*8/100 || falsePromote > runs*8/100 || undecided > runs/10 {
		t.Fatalf("error rates above alpha, or too many undecided")
	}
}

// A session keeps the version of its first call, across a step up and a
// restart.
func TestStickySessionsAndRestart(t *testing.T) {
	store := &memStore{}
	o := DefaultOptions()
	m := newManager(t, o, store)
	_ = m.Begin("agent", inc, cand)
	first := map[string]Version{}
	for i := 0; i < 2000; i++ {
		s := fmt.Sprint("live-", i)
		first[s], _ = m.Route("agent", s)
	}
	onCand := 0
	for _, v := range first {
		if v == cand {
			onCand++
		}
	}
	if onCand < 120 || onCand > 280 {
		t.Fatalf("%d of 2000 sessions on the candidate at share 0.1", onCand)
	}
	// enough equal rewards from other sessions for a step up
	rng := rand.New(rand.NewPCG(5, 6))
	for m.cur["agent"].Step == 0 && m.cur["agent"].Decision == Running {
		v, _ := m.Route("agent", fmt.Sprint("r-", rng.Int64()))
		m.ObserveSession("agent", 0.5+0.01*rng.NormFloat64(), []int64{v.Version})
	}
	if m.cur["agent"].Share != 0.25 || len(m.cur["agent"].Held) == 0 {
		t.Fatalf("share %g, held %d", m.cur["agent"].Share, len(m.cur["agent"].Held))
	}
	check := func(m *Manager, when string) {
		for s, v := range first {
			if got, _ := m.Route("agent", s); got != v {
				t.Fatalf("%s: session %s moved from v%d to v%d", when, s, v.Version, got.Version)
			}
		}
	}
	check(m, "after the step")
	m2 := newManager(t, o, store) // a restart: the state from the store
	r, ok := m2.Running("agent")
	if !ok || r.Share != 0.25 || r.Arms != m.cur["agent"].Arms || !maps.Equal(r.Held, m.cur["agent"].Held) {
		t.Fatalf("resumed %+v", r)
	}
	check(m2, "after a restart")
	newOnCand := 0
	for i := 0; i < 2000; i++ {
		if v, _ := m2.Route("agent", fmt.Sprint("new-", i)); v == cand {
			newOnCand++
		}
	}
	if newOnCand < 400 || newOnCand > 600 {
		t.Fatalf("%d of 2000 new sessions on the candidate at share 0.25", newOnCand)
	}
}

func TestManualActions(t *testing.T) {
	m := newManager(t, DefaultOptions(), &memStore{})
	var got []string
	m.OnDecision(func(r Rollout) { got = append(got, r.Decision) })
	if _, err := m.Set("agent", "promote", 0); err == nil {
		t.Fatal("promote without a rollout")
	}
	_ = m.Begin("agent", inc, cand)
	r, err := m.Set("agent", "pin", 0.5)
	if err != nil || !r.Pinned || r.Share != 0.5 {
		t.Fatalf("pin: %+v %v", r, err)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	if r, _ := simulate(t, m, rng, 0.5, 0.0, 0.1, 2000); r.Decision != Running {
		t.Fatalf("a pinned rollout decided: %s", r.Reason)
	}
	if _, err := m.Set("agent", "unpin", 0); err != nil {
		t.Fatal(err)
	}
	if r, _ := m.Set("agent", "rollback", 0); r.Decision != RolledBack || r.Reason != "rolled back by hand" {
		t.Fatalf("rollback: %+v", r)
	}
	_ = m.Begin("agent", inc, cand)
	if r, _ := m.Set("agent", "promote", 0); r.Decision != Promoted {
		t.Fatalf("promote: %+v", r)
	}
	if fmt.Sprint(got) != "[rolled_back promoted]" {
		t.Fatalf("callbacks %v", got)
	}
	if _, err := m.Set("agent", "explode", 0); err == nil {
		t.Fatal("unknown action accepted")
	}
}

func TestErrorGuardAndMaxWait(t *testing.T) {
	m := newManager(t, DefaultOptions(), nil)
	_ = m.Begin("agent", inc, cand)
	for i := 0; i < 400; i++ {
		m.ObserveCall("agent", inc.Version, Call{Failed: i%100 == 0})
		m.ObserveCall("agent", cand.Version, Call{Failed: i%5 == 0})
	}
	rng := rand.New(rand.NewPCG(9, 10))
	if r, _ := simulate(t, m, rng, 0.5, 0.5, 0.1, 5000); r.Decision != RolledBack || !strings.Contains(r.Reason, "error rate") {
		t.Fatalf("error guard: %s %s", r.Decision, r.Reason)
	}
	m = newManager(t, DefaultOptions(), nil)
	now := time.Now()
	m.now = func() time.Time { return now }
	_ = m.Begin("agent", inc, cand)
	m.Tick()
	if _, ok := m.Running("agent"); !ok {
		t.Fatal("rolled back before max_wait")
	}
	now = now.Add(25 * time.Hour)
	m.Tick()
	if r := m.List()[0]; r.Decision != RolledBack || !strings.Contains(r.Reason, "max_wait") {
		t.Fatalf("max wait: %+v", r)
	}
}

func TestMixedSessionsNotCounted(t *testing.T) {
	m := newManager(t, DefaultOptions(), nil)
	_ = m.Begin("agent", inc, cand)
	m.ObserveSession("agent", 1, []int64{1, 2})
	m.ObserveSession("agent", 1, []int64{7})
	if r, _ := m.Running("agent"); r.Arms[Candidate].N+r.Arms[Incumbent].N != 0 {
		t.Fatalf("counted %+v", r.Arms)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, mut := range []func(*Options){
		func(o *Options) { o.Steps = nil }, func(o *Options) { o.Steps = []float64{0.5, 0.2} },
		func(o *Options) { o.MinSessions = 1 }, func(o *Options) { o.MaxLooks = 1 },
		func(o *Options) { o.Alpha = 0.7 }, func(o *Options) { o.MaxWait = 0 },
		func(o *Options) { o.LatencyRatio = 0.5 }, func(o *Options) { o.LengthRatio = math.Inf(1) },
		func(o *Options) { o.ToolCallMargin = 1 },
	} {
		o := DefaultOptions()
		mut(&o)
		if o.Validate() == nil {
			t.Errorf("accepted %+v", o)
		}
	}
}

// TestGuards: a candidate whose calls are significantly worse on a guard
// metric than allowed is rolled back whatever its reward; within the
// allowance it is promoted on an equal reward.
func TestGuards(t *testing.T) {
	type calls func(i int) (inc, cand Call)
	lat := func(inc, cand time.Duration) calls {
		return func(i int) (Call, Call) {
			j := time.Duration(i%7) * time.Millisecond // spread
			return Call{Latency: inc + j}, Call{Latency: cand + j}
		}
	}
	length := func(inc, cand int) calls {
		return func(i int) (Call, Call) { return Call{CompletionTokens: inc + i%5}, Call{CompletionTokens: cand + i%5} }
	}
	tools := func(incBad, candBad int) calls { // one bad tool call in every incBad / candBad tool-calling calls
		return func(i int) (Call, Call) {
			return Call{ToolCalls: 1, BadToolCalls: b2i(i%incBad == 0)}, Call{ToolCalls: 1, BadToolCalls: b2i(i%candBad == 0)}
		}
	}
	for _, tc := range []struct {
		name   string
		calls  calls
		reason string // "" : promoted
	}{
		{"latency 3x", lat(100*time.Millisecond, 300*time.Millisecond), "latency"},
		{"latency 1.2x", lat(100*time.Millisecond, 120*time.Millisecond), ""},
		{"length 3x", length(100, 300), "completion length"},
		{"length 1.5x", length(100, 150), ""},
		{"bad tool calls 25%", tools(100, 4), "bad tool calls"},
		{"bad tool calls 2%", tools(100, 50), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newManager(t, DefaultOptions(), nil)
			_ = m.Begin("agent", inc, cand)
			for i := 0; i < 400; i++ {
				ic, cc := tc.calls(i)
				m.ObserveCall("agent", inc.Version, ic)
				m.ObserveCall("agent", cand.Version, cc)
			}
			r, _ := simulate(t, m, rand.New(rand.NewPCG(3, 4)), 0.5, 0.5, 0.1, 5000)
			switch {
			case tc.reason == "" && r.Decision != Promoted:
				t.Fatalf("%s: %s", r.Decision, r.Reason)
			case tc.reason != "" && (r.Decision != RolledBack || !strings.Contains(r.Reason, tc.reason)):
				t.Fatalf("want rolled back for %s: %s %s", tc.reason, r.Decision, r.Reason)
			}
			t.Logf("%s: %s", r.Decision, r.Reason)
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
