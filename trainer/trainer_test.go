package trainer

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/kernels/cpu"
	"github.com/hone-rl/hone/model"
	"github.com/hone-rl/hone/trainer/checkpoint"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// memStore is an in-memory experience queue with the capture.Store API.
type memStore struct {
	mu    sync.Mutex
	exps  []capture.Experience
	acked uint64
}

func (s *memStore) add(e capture.Experience) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.Cursor = uint64(len(s.exps) + 1)
	s.exps = append(s.exps, e)
}

func (s *memStore) Experiences(_ context.Context, after uint64, limit int) ([]capture.Experience, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []capture.Experience
	for _, e := range s.exps {
		if e.Cursor > after && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

func (s *memStore) Ack(_ context.Context, upTo uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acked = max(s.acked, upTo)
	return nil
}

func (s *memStore) Cursor(context.Context) (uint64, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return uint64(len(s.exps)), s.acked, nil
}

type recPublisher struct {
	versions []int64
	dirs     []string
}

func (r *recPublisher) PublishAdapter(_ context.Context, alias string, v int64, dir string) error {
	r.versions = append(r.versions, v)
	r.dirs = append(r.dirs, dir)
	return nil
}

// trajectory is a prompt followed by a generated completion.
func trajectory(task, session string, prompt, completion []int32, reward float64, version int64) capture.Experience {
	toks := append(append([]int32(nil), prompt...), completion...)
	e := capture.Experience{Task: task, Session: session, Tokens: toks, Reward: reward,
		Mask: make([]uint8, len(toks)), Logprobs: make([]float32, len(toks)), Versions: make([]int64, len(toks))}
	for i := len(prompt); i < len(toks); i++ {
		e.Mask[i], e.Logprobs[i], e.Versions[i] = 1, -3.8, version
	}
	e.Steps = []capture.StepSpan{{Call: session, Start: len(prompt), End: len(toks)}}
	return e
}

func testOptions(dir string) Options {
	o := DefaultOptions()
	o.Name, o.CheckpointDir, o.BatchSessions = "agent", dir, 4
	o.MicroBatchTokens = 16 // forces several micro-batches
	o.Schedule = ScheduleOptions{Kind: SchedConstant, LR: 1e-2}
	o.LoRA = LoRAOptions{Rank: 4, Alpha: 8, Seed: 1}
	return o
}

// TestTrainerSkipsBatchWithoutSignal: every task's rewards are equal, so
// GRPO has no signal: the batch is acknowledged, no version is made.
func TestTrainerSkipsBatchWithoutSignal(t *testing.T) {
	store := &memStore{}
	for i, r := range []float64{1, 0, 1, 0} {
		store.add(trajectory(fmt.Sprint("task", i%2), fmt.Sprint("s", i), []int32{1, 2, 3}, []int32{int32(10 + i), 11}, r, 0))
	}
	pub := &recPublisher{}
	tr, err := New(testOptions(t.TempDir()), Deps{Policy: testPolicy(t, microConfig(), 1), Sources: []Source{StoreSource{store}}, Publisher: pub})
	if err != nil {
		t.Fatal(err)
	}
	m, err := tr.Poll(context.Background())
	if err != nil || m == nil || m.Samples != 0 || m.Skipped != 4 || m.Version != 0 || tr.Version() != 0 {
		t.Fatalf("metrics %+v err %v", m, err)
	}
	if store.acked != 4 || len(pub.versions) != 0 {
		t.Fatalf("acked %d published %v", store.acked, pub.versions)
	}
}

// TestTrainerWritesLoadableAdapter trains one GRPO step, then checks the
// written version: published, acknowledged, logged, loadable by the model
// package with the same logits as the trainer's in-memory adapter.
func TestTrainerWritesLoadableAdapter(t *testing.T) {
	dir := t.TempDir()
	store := &memStore{}
	for i, r := range []float64{1, 0, 0, 1, 1} {
		store.add(trajectory("task", fmt.Sprint("s", i), []int32{1, 2, 3}, []int32{int32(10 + i), 11, 12}, r, 0))
	}
	pol := testPolicy(t, microConfig(), 1)
	pub := &recPublisher{}
	var log bytes.Buffer
	tr, err := New(testOptions(dir), Deps{Policy: pol, Sources: []Source{StoreSource{store}}, Publisher: pub, Metrics: &log, BaseModel: "micro"})
	if err != nil {
		t.Fatal(err)
	}
	before, _, _ := pol.snapshot()
	m, err := tr.Poll(context.Background())
	if err != nil || m == nil {
		t.Fatalf("step %+v %v", m, err)
	}
	if m.Version != 1 || m.Samples != 4 || m.Tokens != 12 || m.GradNorm <= 0 || store.acked != 4 {
		t.Fatalf("metrics %+v, acked %d", m, store.acked)
	}
	if !slices.Equal(pub.versions, []int64{1}) || pub.dirs[0] != filepath.Join(dir, "agent", "v1") {
		t.Fatalf("published %v %v", pub.versions, pub.dirs)
	}
	if !bytes.Contains(log.Bytes(), []byte(`"version":1`)) {
		t.Fatalf("step log %s", log.String())
	}
	after, _, _ := pol.snapshot()
	changed := 0
	for name, h := range after {
		if !slices.Equal(h.Data, before[name].Data) {
			changed++
		}
	}
	if changed == 0 {
		t.Fatal("AdamW step changed no tensor")
	}
	loaded, err := model.LoadAdapter(pub.dirs[0], pol.Model)
	if err != nil {
		t.Fatal(err)
	}
	defer loaded.Free()
	seq := []int32{1, 2, 3, 10, 11}
	want, _ := pol.Model.Logits(context.Background(), seq, pol.Adapter)
	got, _ := pol.Model.Logits(context.Background(), seq, loaded)
	for i := range want {
		if !slices.Equal(want[i], got[i]) {
			t.Fatalf("position %d: loaded adapter logits differ", i)
		}
	}
	// the fifth session waits for the next batch
	if m, err := tr.Poll(context.Background()); m != nil || err != nil {
		t.Fatalf("stepped on an incomplete batch: %+v %v", m, err)
	}
	// a fresh trainer on the same store starts after the ack watermark
	tr2, err := New(testOptions(t.TempDir()), Deps{Policy: pol, Sources: []Source{StoreSource{store}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr2.Poll(context.Background()); err != nil || len(tr2.pending) != 1 || tr2.pending[0].exp.Session != "s4" {
		t.Fatalf("fresh trainer queued %d experiences (err %v), want only s4", len(tr2.pending), err)
	}
}

// TestTrainerDropsUntrainable: experiences the model cannot take (token
// outside the vocabulary, longer than the context) are dropped, not
// retried forever.
func TestTrainerDropsUntrainable(t *testing.T) {
	store := &memStore{}
	for i, r := range []float64{1, 0, 1, 0} {
		e := trajectory("task", fmt.Sprint("s", i), []int32{1, 2}, []int32{int32(10 + i), 11}, r, 0)
		if i == 1 {
			e.Tokens[3] = 4000 // outside the 48-token vocabulary
		}
		if i == 2 {
			e = trajectory("task", "s2", make([]int32, 200), []int32{5}, r, 0) // context is 128
		}
		store.add(e)
	}
	tr, err := New(testOptions(t.TempDir()), Deps{Policy: testPolicy(t, microConfig(), 1), Sources: []Source{StoreSource{store}}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := tr.Poll(context.Background())
	if err != nil || m == nil || m.Dropped != 2 || m.Samples != 2 || m.Version != 1 {
		t.Fatalf("metrics %+v err %v", m, err)
	}
}

func TestTrainerResume(t *testing.T) {
	dir := t.TempDir()
	store := &memStore{}
	for i, r := range []float64{1, 0, 0, 1} {
		store.add(trajectory("task", fmt.Sprint("s", i), []int32{1, 2}, []int32{int32(10 + i), 11}, r, 0))
	}
	pol := testPolicy(t, microConfig(), 1)
	o1 := testOptions(dir)
	o1.KeepVersions = 1
	tr, err := New(o1, Deps{Policy: pol, Sources: []Source{StoreSource{store}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	want, wm, _ := pol.snapshot()
	opts := testOptions(dir)
	opts.Resume = true
	pol2 := testPolicy(t, microConfig(), 1)
	tr2, err := New(opts, Deps{Policy: pol2, Sources: []Source{StoreSource{store}}})
	if err != nil {
		t.Fatal(err)
	}
	got, gm, _ := pol2.snapshot()
	for n := range want {
		if !slices.Equal(want[n].Data, got[n].Data) || !slices.Equal(wm[n].Data, gm[n].Data) {
			t.Fatalf("%s not restored", n)
		}
	}
	if tr2.Version() != 1 || pol2.steps != 1 || tr2.cursors[0] != 4 {
		t.Fatalf("version %d steps %d cursor %d", tr2.Version(), pol2.steps, tr2.cursors[0])
	}
	if _, err := os.Stat(filepath.Join(dir, "agent", "v1", checkpoint.OptimizerFile)); err != nil {
		t.Fatal(err)
	}
}

type weightsPublisher struct {
	recPublisher
	calls []string
}

func (w *weightsPublisher) PublishWeights(_ context.Context, alias, target string, v int64, dir, prev string) error {
	w.calls = append(w.calls, fmt.Sprintf("%s %s v%d %s <- %s", alias, target, v, filepath.Base(dir), filepath.Base(prev)))
	return nil
}

// TestTrainerFullFineTuning trains every weight of a micro model for two
// steps: each version is a complete model folder that model.Load reads
// back with the trainer's logits, published as full weights.
func TestTrainerFullFineTuning(t *testing.T) {
	root := t.TempDir()
	base := filepath.Join(root, "base")
	m, err := model.New(microConfig(), cpu.New(1), 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Save(base); err != nil {
		t.Fatal(err)
	}
	opts := testOptions(filepath.Join(root, "ck"))
	opts.Mode, opts.ServedModel = ModeFull, "base"
	opts.Schedule.LR = 1e-3
	pol, err := LoadPolicy(base, cpu.New(1), opts)
	if err != nil {
		t.Fatal(err)
	}
	store := &memStore{}
	for i := 0; i < 8; i++ {
		store.add(trajectory("task", fmt.Sprint("s", i), []int32{1, 2}, []int32{int32(10 + i), 11}, float64(i%2), 0))
	}
	pub := &weightsPublisher{}
	tr, err := New(opts, Deps{Policy: pol, Sources: []Source{StoreSource{store}}, Publisher: pub, ModelDir: base})
	if err != nil {
		t.Fatal(err)
	}
	for step := 0; step < 2; step++ {
		if m, err := tr.Poll(context.Background()); err != nil || m == nil || m.Samples != 4 {
			t.Fatalf("step %d: %+v %v", step, m, err)
		}
	}
	if fmt.Sprint(pub.calls) != "[agent base v1 v1 <- base agent base v2 v2 <- v1]" {
		t.Fatalf("published %v", pub.calls)
	}
	loaded, err := model.Load(filepath.Join(root, "ck", "agent", "v2"), cpu.New(1))
	if err != nil {
		t.Fatal(err)
	}
	seq := []int32{1, 2, 10, 11}
	want, _ := pol.Model.Logits(context.Background(), seq, nil)
	got, _ := loaded.Logits(context.Background(), seq, nil)
	orig, _ := m.Logits(context.Background(), seq, nil)
	if !slices.Equal(want[3], got[3]) || slices.Equal(want[3], orig[3]) {
		t.Fatal("the full checkpoint does not hold the trained weights")
	}
	bad := opts
	bad.Loss.KLCoef = 0.1
	if bad.Validate() == nil {
		t.Fatal("full mode with a KL term validated")
	}
}

// colocated records the co-location sequence of a step.
type colocated struct {
	recPublisher
	calls []string
	free  uint64
}

func (c *colocated) Sleep(context.Context) error { c.calls = append(c.calls, "sleep"); return nil }
func (c *colocated) Wake(context.Context) error  { c.calls = append(c.calls, "wake"); return nil }
func (c *colocated) CheckFree(need uint64, _ ...int) error {
	c.calls = append(c.calls, "check")
	if c.free < need {
		return fmt.Errorf("GPU 0 has %d bytes free", c.free)
	}
	return nil
}
func (c *colocated) PublishAdapter(ctx context.Context, alias string, v int64, dir string) error {
	c.calls = append(c.calls, "publish")
	return c.recPublisher.PublishAdapter(ctx, alias, v, dir)
}

// TestTrainerColocation: engines sleep during a step, memory is checked
// while they sleep, a refusal wakes them and keeps the batch for later.
func TestTrainerColocation(t *testing.T) {
	store := &memStore{}
	for i, r := range []float64{1, 0, 0, 1} {
		store.add(trajectory("task", fmt.Sprint("s", i), []int32{1, 2}, []int32{int32(10 + i), 11}, r, 0))
	}
	co := &colocated{free: 1}
	opts := testOptions(t.TempDir())
	opts.SleepEngines, opts.MinFreeGPUBytes = true, 100
	tr, err := New(opts, Deps{Policy: testPolicy(t, microConfig(), 1), Sources: []Source{StoreSource{store}}, Publisher: co, GPU: co})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Poll(context.Background()); err == nil || store.acked != 0 || tr.Version() != 0 {
		t.Fatalf("refusal: err %v acked %d version %d", err, store.acked, tr.Version())
	}
	co.free = 1000
	if m, err := tr.Poll(context.Background()); err != nil || m == nil || m.Version != 1 || store.acked != 4 {
		t.Fatalf("step after the refusal: %+v %v", m, err)
	}
	if got := fmt.Sprint(co.calls); got != "[sleep check wake sleep check wake publish]" {
		t.Fatalf("sequence %s", got)
	}
}

// TestTrainerDropsNonFiniteBatch: a behaviour logprob of -200 makes the
// importance ratio overflow float32; the batch is dropped and
// acknowledged, the adapter is left untouched and no version is made.
func TestTrainerDropsNonFiniteBatch(t *testing.T) {
	store := &memStore{}
	for i, r := range []float64{1, 0, 0, 1} {
		e := trajectory("task", fmt.Sprint("s", i), []int32{1, 2}, []int32{int32(10 + i), 11}, r, 0)
		e.Logprobs[2] = -200
		store.add(e)
	}
	pol := testPolicy(t, microConfig(), 1)
	before, _, _ := pol.snapshot()
	tr, err := New(testOptions(t.TempDir()), Deps{Policy: pol, Sources: []Source{StoreSource{store}}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := tr.Poll(context.Background())
	if err != nil || m == nil || m.Version != 0 || m.Dropped != 4 || store.acked != 4 {
		t.Fatalf("metrics %+v err %v acked %d", m, err, store.acked)
	}
	after, _, _ := pol.snapshot()
	for n := range before {
		if !slices.Equal(before[n].Data, after[n].Data) {
			t.Fatalf("%s changed", n)
		}
	}
}

type livePublisher struct {
	recPublisher
	live int64
}

func (l *livePublisher) Live(string) (int64, bool) { return l.live, true }

// TestTrainerNumbersAfterLiveVersion: a fresh trainer behind a proxy that
// already serves v7 (and next to an old v2 checkpoint) publishes v8.
func TestTrainerNumbersAfterLiveVersion(t *testing.T) {
	dir := t.TempDir()
	store := &memStore{}
	for i, r := range []float64{1, 0, 0, 1} {
		store.add(trajectory("task", fmt.Sprint("s", i), []int32{1, 2}, []int32{int32(10 + i), 11}, r, 7))
	}
	pol := testPolicy(t, microConfig(), 1)
	old, err := New(testOptions(dir), Deps{Policy: pol, Sources: []Source{StoreSource{&memStore{}}}})
	if err != nil {
		t.Fatal(err)
	}
	old.version = 2
	if _, err := old.write(); err != nil {
		t.Fatal(err)
	}
	pub := &livePublisher{live: 7}
	tr, err := New(testOptions(dir), Deps{Policy: pol, Sources: []Source{StoreSource{store}}, Publisher: pub})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := tr.Poll(context.Background()); err != nil || m == nil || m.Version != 8 || fmt.Sprint(pub.versions) != "[8]" {
		t.Fatalf("step %+v %v, published %v", m, err, pub.versions)
	}
}

// TestTrainerSkipReasons: a batch that trains nothing says why in its step
// record, its log and hone_trainer_skipped_batches_total, and is not
// counted in hone_trainer_steps_total.
func TestTrainerSkipReasons(t *testing.T) {
	for _, c := range []struct {
		name, reason, why string
		rewards           []float64
		mutate            func(*Options)
		exp               func(i int, e *capture.Experience)
	}{
		{"equal rewards within every task", skipNoVariance, "equal within every task", []float64{1, 0, 1, 0}, nil, nil},
		{"sft below the minimum", skipMinReward, "sft_min_reward", []float64{0, 0, 0, 0},
			func(o *Options) { o.Loss.Kind, o.SFTMinReward = LossSFT, 0.5 }, nil},
		{"too long for the context", skipUnfit, "too long", []float64{1, 0, 1, 0}, nil,
			func(i int, e *capture.Experience) {
				*e = trajectory("task", e.Session, make([]int32, 200), []int32{5}, e.Reward, 0)
			}},
		{"too stale", skipStale, "trainer.staleness", []float64{1, 0, 1, 0}, func(o *Options) { o.Staleness.MaxPolicyLag = 1 },
			func(i int, e *capture.Experience) {
				for j := range e.Versions {
					if e.Mask[j] == 1 {
						e.Versions[j] = -5
					}
				}
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := &memStore{}
			for i, r := range c.rewards {
				task := fmt.Sprint("task", i%2)
				if c.reason != skipNoVariance {
					task = "task"
				}
				e := trajectory(task, fmt.Sprint("s", i), []int32{1, 2, 3}, []int32{int32(10 + i), 11}, r, 0)
				if c.exp != nil {
					c.exp(i, &e)
				}
				store.add(e)
			}
			o := testOptions(t.TempDir())
			if c.mutate != nil {
				c.mutate(&o)
			}
			reg := prometheus.NewRegistry()
			var log, steps bytes.Buffer
			tr, err := New(o, Deps{Policy: testPolicy(t, microConfig(), 1), Sources: []Source{StoreSource{store}},
				Registry: reg, Metrics: &steps, Log: slog.New(slog.NewTextHandler(&log, nil))})
			if err != nil {
				t.Fatal(err)
			}
			m, err := tr.Poll(context.Background())
			if err != nil || m == nil || m.Trained || m.SkipReason != c.reason || !strings.Contains(m.Why, c.why) {
				t.Fatalf("metrics %+v err %v", m, err)
			}
			if !strings.Contains(log.String(), "batch trained nothing") || !strings.Contains(log.String(), c.reason) ||
				strings.Contains(log.String(), "training step") {
				t.Fatalf("log: %s", log.String())
			}
			if !strings.Contains(steps.String(), `"trained":false`) || !strings.Contains(steps.String(), c.reason) {
				t.Fatalf("step record: %s", steps.String())
			}
			if got := testutil.ToFloat64(tr.sink.skipped.WithLabelValues(c.reason)); got != 1 {
				t.Fatalf("skipped batches %v", got)
			}
			if got := testutil.ToFloat64(tr.sink.steps); got != 0 {
				t.Fatalf("steps counted %v for a batch that trained nothing", got)
			}
		})
	}
}

// TestTrainerRevert: after a rollback the trainer continues from the
// incumbent's weights (a checkpoint, or the base for version 0), and
// numbers the next version after the newest.
func TestTrainerRevert(t *testing.T) {
	store := &memStore{}
	add := func(round int) {
		for i, r := range []float64{1, 0, 1, 0} {
			store.add(trajectory("task", fmt.Sprint("r", round, "s", i), []int32{1, 2, 3}, []int32{int32(10 + i), 11}, r, 0))
		}
	}
	dir := t.TempDir()
	opts := testOptions(dir)
	// Sessions of the version reverted to are on-policy again: the third
	// round's, made by the base (v0), train although the next version is v3.
	opts.Staleness.MaxPolicyLag = 1
	tr, err := New(opts, Deps{Policy: testPolicy(t, microConfig(), 1), Sources: []Source{StoreSource{store}}})
	if err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 2; round++ {
		add(round)
		if m, err := tr.Poll(context.Background()); err != nil || m == nil || m.Version != int64(round) {
			t.Fatalf("round %d: %+v %v", round, m, err)
		}
	}
	same := func(want map[string]model.HostTensor) bool {
		got, _, _ := tr.d.Policy.snapshot()
		for n, w := range want {
			if !slices.Equal(got[n].Data, w.Data) {
				return false
			}
		}
		return len(want) > 0
	}
	v1, err := tr.ckpt.Read(1)
	if err != nil {
		t.Fatal(err)
	}
	if same(v1.Tensors) {
		t.Fatal("v2 equals v1: the test would prove nothing")
	}
	tr.Revert(1)
	if err := tr.applyRevert(); err != nil || !same(v1.Tensors) {
		t.Fatalf("revert to v1: %v", err)
	}
	tr.Revert(0)
	if err := tr.applyRevert(); err != nil || !same(tr.initial.Tensors) {
		t.Fatalf("revert to the base: %v", err)
	}
	add(3)
	if m, err := tr.Poll(context.Background()); err != nil || m == nil || m.Version != 3 || !m.Trained || m.Dropped != 0 {
		t.Fatalf("step after the revert: %+v %v", m, err)
	}
}
