package rollout_test

import (
	"testing"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/rollout"
	"github.com/prometheus/client_golang/prometheus"
)

// A rollout survives a restart of hone: its state is in the trace store
// (Badger), and the sessions keep their versions.
func TestRolloutInCaptureStoreSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	open := func() *capture.Store {
		s, err := capture.Open(dir, capture.DefaultOptions(), prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	store := open()
	m, err := rollout.New(rollout.DefaultOptions(), store, nil)
	if err != nil {
		t.Fatal(err)
	}
	inc, cand := rollout.Version{Version: 3, Target: "agent-v3"}, rollout.Version{Version: 4, Target: "agent-v4"}
	if err := m.Begin("agent", inc, cand); err != nil {
		t.Fatal(err)
	}
	served := map[string]rollout.Version{}
	for _, s := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"} {
		served[s], _ = m.Route("agent", s)
		m.ObserveSession("agent", 0.5, []int64{served[s].Version})
	}
	m.Tick() // saves the evidence
	before, _ := m.Running("agent")
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	store = open()
	defer store.Close()
	m2, err := rollout.New(rollout.DefaultOptions(), store, nil)
	if err != nil {
		t.Fatal(err)
	}
	after, ok := m2.Running("agent")
	if !ok || after.Candidate != cand || after.Incumbent != inc || after.Arms != before.Arms || after.Share != before.Share {
		t.Fatalf("after a restart %+v, before %+v", after, before)
	}
	for s, v := range served {
		if got, _ := m2.Route("agent", s); got != v {
			t.Fatalf("session %s moved from v%d to v%d across the restart", s, v.Version, got.Version)
		}
	}
}
