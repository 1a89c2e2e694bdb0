package acceptance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/rollout"
	"github.com/hone-rl/hone/trainer"
	"github.com/hone-rl/hone/trainer/publish"
	"github.com/hone-rl/hone/trainer/trainertest"
)

// TestGuardedRolloutThroughProxy runs hone's loop with guarded rollouts on:
// the trainer's first version serves half of the new sessions while the
// agent keeps calling (rewarded by its digit share, as in
// TestLearningThroughProxy) and is promoted on its reward; a version
// trained on inverted rewards is then published as the candidate and
// rolled back automatically, after which no new session is served by it.
func TestGuardedRolloutThroughProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("learning run")
	}
	dir, engineURL, store, s, base, ctl := startDigitLoop(t)

	ro := rollout.DefaultOptions()
	ro.Steps, ro.MinSessions, ro.MaxLooks, ro.Margin = []float64{0.5}, 16, 8, 0.05
	m, err := rollout.New(ro, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.SetRollouts(m)
	store.OnReady(func(rs capture.ReadySession) {
		if p, ok := s.Aliases().Lookup(rs.Model); ok {
			m.ObserveSession(p.Alias, rs.Reward, rs.Versions)
		}
	})
	pub := &publish.Publisher{Engines: []publish.Engine{{URL: engineURL, Kind: publish.KindEmbedded}}, Aliases: s.Aliases(),
		PollInterval: 5 * time.Millisecond}
	m.OnDecision(pub.Decided)
	var mu sync.Mutex
	decided := map[int64]rollout.Rollout{} // by candidate version
	m.OnDecision(func(r rollout.Rollout) {
		mu.Lock()
		defer mu.Unlock()
		decided[r.Candidate.Version] = r
	})
	decision := func(v int64) (rollout.Rollout, bool) {
		mu.Lock()
		defer mu.Unlock()
		r, ok := decided[v]
		return r, ok
	}
	newTrainer := func(src trainer.Source, p trainer.Publisher, ckpt string) *trainer.Trainer {
		return trainertest.LoRA(t, dir, ckpt, 512, src, p)
	}
	goodCkpt := t.TempDir()
	tr := newTrainer(trainer.StoreSource{Store: store}, pub, goodCkpt)
	m.OnDecision(func(r rollout.Rollout) {
		if r.Decision == rollout.RolledBack {
			tr.Revert(r.Incumbent.Version)
		}
	})

	prompts := []string{"a", "k", "Q", "="}
	n := 0
	// round sends 32 rewarded sessions and returns how many each version served.
	round := func() map[string]int {
		served := map[string]int{}
		for i := 0; i < 32; i++ {
			n++
			session := fmt.Sprintf("r-%d", n)
			text, policy := complete(t, base, session, fmt.Sprint("p", n%4), prompts[n%4], n)
			served[policy]++
			feedback(t, ctl.URL, session, digitShare(text))
		}
		return served
	}
	waitDecided := func(candidate int64, maxRounds int) (rollout.Rollout, int) {
		for r := 0; r <= maxRounds; r++ {
			time.Sleep(100 * time.Millisecond) // the ready hook runs on its own goroutine
			if ro, ok := decision(candidate); ok {
				return ro, r
			}
			round()
		}
		t.Fatalf("v%d undecided after %d rounds: %+v", candidate, maxRounds, m.List())
		return rollout.Rollout{}, 0
	}

	// Eight steps on the digit reward with rollouts off: each version
	// serves everyone at once, as without this feature.
	for step := 0; step < 8; step++ {
		round()
		mt := trainertest.PollStep(t, tr, time.Minute)
		t.Logf("step %d: v%d reward %.3f", step+1, mt.Version, mt.RewardMean)
	}
	pub.Wait()
	// Rollouts on: the next good version is a candidate for half of the new
	// sessions and is promoted on its reward.
	pub.Rollouts = m
	served := round()
	mt := trainertest.PollStep(t, tr, time.Minute)
	t.Logf("step 9: v%d reward %.3f; sessions by version %v", mt.Version, mt.RewardMean, served)
	if r, ok := m.Running("agent"); !ok || r.Candidate.Version != mt.Version || r.Incumbent.Version != mt.Version-1 {
		t.Fatalf("v%d is not the candidate against v%d: %+v", mt.Version, mt.Version-1, r)
	}
	good, rounds := waitDecided(mt.Version, 40)
	t.Logf("v%d %s after %d rounds: %s", mt.Version, good.Decision, rounds, good.Reason)
	if good.Decision != rollout.Promoted {
		t.Fatalf("the version trained on the reward was %s: %s", good.Decision, good.Reason)
	}
	if _, v, _ := s.Aliases().Get("agent"); v != mt.Version {
		t.Fatalf("alias at v%d after the promotion of v%d", v, mt.Version)
	}
	pub.Wait()

	// A bad version: the live version trained further on its own new
	// sessions with the rewards inverted, published as the next candidate.
	for i := 0; i < 8; i++ {
		round()
	}
	badCkpt := t.TempDir()
	if err := os.CopyFS(badCkpt, os.DirFS(goodCkpt)); err != nil {
		t.Fatal(err)
	}
	bad := newTrainer(trainertest.InvertedSource{Store: store}, nil, badCkpt)
	var last *trainer.StepMetrics
	for i := 0; i < 8; i++ {
		last = trainertest.PollStep(t, bad, time.Minute)
		t.Logf("bad step %d: v%d reward %.3f samples %d", i+1, last.Version, last.RewardMean, last.Samples)
	}
	const badVersion = 100
	badDir := filepath.Join(badCkpt, "agent", fmt.Sprintf("v%d", last.Version))
	if err := pub.PublishAdapter(context.Background(), "agent", badVersion, badDir); err != nil {
		t.Fatal(err)
	}
	if r, ok := m.Running("agent"); !ok || r.Candidate.Version != badVersion {
		t.Fatalf("the bad version is not the candidate: %+v", r)
	}
	rb, rounds := waitDecided(badVersion, 20)
	c := rb.Arms[rollout.Candidate]
	t.Logf("bad v%d %s after %d rounds (%d of its sessions rewarded, mean %.3f against %.3f): %s", badVersion, rb.Decision, rounds, c.N, c.Mean, rb.Arms[rollout.Incumbent].Mean, rb.Reason)
	if rb.Decision != rollout.RolledBack {
		t.Fatalf("the version trained on inverted rewards was %s: %s", rb.Decision, rb.Reason)
	}
	for i := 0; i < 3; i++ {
		if served := round(); served[fmt.Sprint(badVersion)] > 0 {
			t.Fatalf("after the rollback %d new sessions were served by the bad version", served[fmt.Sprint(badVersion)])
		}
	}
	pub.Wait()
}
