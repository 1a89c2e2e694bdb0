package trainer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/model"
	"github.com/hone-rl/hone/trainer/checkpoint"
)

// Publisher makes a written adapter the live version of an alias
// (*publish.Publisher implements it).
type Publisher interface {
	PublishAdapter(ctx context.Context, alias string, version int64, dir string) error
}

// WeightsPublisher publishes full-weight versions (*publish.Publisher
// implements it).
type WeightsPublisher interface {
	PublishWeights(ctx context.Context, alias, target string, version int64, dir, prevDir string) error
}

// Sleeper is implemented by publishers that can free the engines'
// accelerator memory during a step.
type Sleeper interface {
	Sleep(ctx context.Context) error
	Wake(ctx context.Context) error
}

// MemoryChecker refuses a step when accelerator memory is short
// (*gpu.Monitor implements it).
type MemoryChecker interface {
	CheckFree(need uint64, devices ...int) error
}

// Deps are the trainer's collaborators; only Policy and Sources are needed.
type Deps struct {
	Policy    *Policy
	Sources   []Source
	Publisher Publisher     // nil: versions are written, not published
	GPU       MemoryChecker // nil: no memory check
	Metrics   io.Writer     // JSONL step log, nil for none
	Registry  prometheus.Registerer
	BaseModel string // base_model_name_or_path written into adapter configs
	ModelDir  string // base model folder; full checkpoints copy its tokenizer files
	Log       *slog.Logger
}

// pulled is an experience waiting for a step, with where it came from.
type pulled struct {
	exp capture.Experience
	src int
}

// Trainer runs the loop: pull experiences, compute advantages and losses,
// step the adapter, write and publish a new version, acknowledge. It is not
// safe for concurrent use: call Poll, Run and Version from one goroutine.
type Trainer struct {
	opts    Options
	d       Deps
	adv     Advantager
	ckpt    checkpoint.Dir
	sink    *metricsSink
	cursors []uint64 // last fetched cursor per source
	pending []pulled
	version int64
	step    int64
	started bool // cursors moved to the sources' watermarks

	initial *checkpoint.Version // the policy before any step (version 0), for a revert to the base
	revert  atomic.Int64        // a version to go back to before the next step, +1 (0: none)
	line    lineage             // which version's weights each version started from (samples' lag)
}

// New checks opts and prepares a trainer; with opts.Resume it restores the
// latest checkpoint under opts.CheckpointDir/opts.Name.
func New(opts Options, d Deps) (*Trainer, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if d.Policy == nil || len(d.Sources) == 0 {
		return nil, errors.New("trainer: a policy and at least one experience source are required")
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	adv, err := NewAdvantager(opts.Advantage)
	if err != nil {
		return nil, err
	}
	sink, err := newMetricsSink(d.Metrics, d.Registry)
	if err != nil {
		return nil, err
	}
	t := &Trainer{opts: opts, d: d, adv: adv, sink: sink, cursors: make([]uint64, len(d.Sources)),
		ckpt: checkpoint.Dir{Root: joinPath(opts.CheckpointDir, opts.Name)}}
	if opts.Resume {
		if err := t.resume(); err != nil {
			return nil, err
		}
	}
	if t.version == 0 && d.Policy.Adapter != nil {
		tensors, m, v := d.Policy.snapshot()
		t.initial = &checkpoint.Version{Tensors: tensors, M: m, V: v}
	}
	return t, nil
}

// Revert makes the trainer continue from version's weights (and optimizer
// moments) before its next step: a guarded rollout rolled back the versions
// trained after it. Version numbers keep moving forward; the experiences
// already read stay (their behaviour logprobs correct for the version that
// produced them). Safe to call from any goroutine.
func (t *Trainer) Revert(version int64) { t.revert.Store(version + 1) }

// applyRevert restores the version a Revert asked for.
func (t *Trainer) applyRevert() error {
	to := t.revert.Swap(0) - 1
	if to < 0 {
		return nil
	}
	ck := t.initial
	if to > 0 {
		c, err := t.ckpt.Read(to)
		if err != nil {
			return fmt.Errorf("revert to v%d: %w", to, err)
		}
		ck = &c
	}
	if ck == nil {
		return fmt.Errorf("revert to v%d: the trainer did not start from the base and has no checkpoint of it", to)
	}
	steps := t.d.Policy.steps
	if err := t.d.Policy.restore(*ck); err != nil {
		return fmt.Errorf("revert to v%d: %w", to, err)
	}
	t.d.Policy.steps = max(steps, t.d.Policy.steps) // the optimizer's bias correction keeps counting
	t.line.reverted(to)
	t.d.Log.Warn("trainer reverted after a rollback", "to_version", to, "next_version", t.version+1)
	return nil
}

func joinPath(dir, name string) string {
	if dir == "" {
		dir = "checkpoints"
	}
	return filepath.Join(dir, name)
}

// Version is the latest policy version written.
func (t *Trainer) Version() int64 { return t.version }

// resume restores adapter, moments, version and source cursors.
func (t *Trainer) resume() error {
	n, ok, err := t.ckpt.Latest()
	if err != nil || !ok {
		return err
	}
	ck, err := t.ckpt.Read(n)
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if err := t.d.Policy.restore(ck); err != nil {
		return fmt.Errorf("resume v%d: %w", n, err)
	}
	t.version, t.step = n, ck.State.OptimizerStep
	for i, s := range t.d.Sources {
		t.cursors[i] = ck.State.Cursors[s.Name()]
	}
	if e, ok := t.adv.(*emaBaseline); ok && ck.State.Baseline != nil {
		e.baseline, e.init = *ck.State.Baseline, true
	}
	t.d.Log.Info("trainer resumed", "version", n, "optimizer_step", t.step)
	return nil
}

// starter is a source that knows where a fresh reader should begin (the
// local store's ack watermark).
type starter interface {
	Start(ctx context.Context) (uint64, error)
}

// liver reports the version an alias serves (*publish.Publisher).
type liver interface {
	Live(alias string) (int64, bool)
}

// start moves each source's cursor to its ack watermark, unless a resumed
// checkpoint already holds a later one, and numbers new versions after
// both the newest checkpoint and the live version: versions only move
// forward, even for a fresh adapter.
func (t *Trainer) start(ctx context.Context) error {
	if n, ok, err := t.ckpt.Latest(); err == nil && ok {
		t.version = max(t.version, n)
	}
	if l, ok := t.d.Publisher.(liver); ok {
		if v, ok := l.Live(t.opts.Name); ok {
			t.version = max(t.version, v)
		}
	}
	for i, s := range t.d.Sources {
		if st, ok := s.(starter); ok {
			c, err := st.Start(ctx)
			if err != nil {
				return fmt.Errorf("start reading %s: %w", s.Name(), err)
			}
			t.cursors[i] = max(t.cursors[i], c)
		}
	}
	if t.line.parent == nil { // the weights held at start carry the version they are numbered after
		t.line.cur = t.version
	}
	t.started = true
	return nil
}

// Run polls the sources and trains whenever a batch is ready, until ctx
// ends. Step failures are logged and retried on the next poll.
func (t *Trainer) Run(ctx context.Context) error {
	tick := time.NewTicker(max(t.opts.PollInterval, 10*time.Millisecond))
	defer tick.Stop()
	for {
		if _, err := t.Poll(ctx); err != nil && ctx.Err() == nil {
			t.d.Log.Warn("training step failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Poll fetches new experiences and runs one step if a batch is ready. It
// returns the step's metrics, or nil when no step ran.
func (t *Trainer) Poll(ctx context.Context) (*StepMetrics, error) {
	if err := t.applyRevert(); err != nil {
		return nil, err
	}
	if err := t.fetch(ctx); err != nil {
		return nil, err
	}
	batch := t.takeBatch()
	if batch == nil {
		return nil, nil
	}
	stepped := t.step
	m, err := t.runStep(ctx, batch)
	if err != nil {
		if t.step == stepped { // nothing trained yet: retry with the same data
			t.pending = append(batch, t.pending...)
		}
		return nil, err
	}
	return m, nil
}

func (t *Trainer) fetch(ctx context.Context) error {
	if !t.started {
		if err := t.start(ctx); err != nil {
			return err
		}
	}
	var errs []error
	for i, s := range t.d.Sources {
		exps, err := s.Fetch(ctx, t.cursors[i], t.opts.FetchLimit)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range exps {
			if CheckExperience(&e) != nil || e.Cursor <= t.cursors[i] {
				continue
			}
			t.cursors[i] = e.Cursor
			t.pending = append(t.pending, pulled{exp: e, src: i})
		}
	}
	return errors.Join(errs...)
}

// takeBatch removes the experiences of the first BatchSessions sessions
// from the queue, or returns nil when fewer are waiting.
func (t *Trainer) takeBatch() []pulled {
	seen := map[string]bool{}
	n := 0
	for n < len(t.pending) {
		key := fmt.Sprint(t.pending[n].src, "/", t.pending[n].exp.Session)
		if !seen[key] && len(seen) == t.opts.BatchSessions {
			break
		}
		seen[key] = true
		n++
	}
	if len(seen) < t.opts.BatchSessions {
		return nil
	}
	batch := append([]pulled(nil), t.pending[:n]...)
	t.pending = t.pending[n:]
	return batch
}

// runStep trains on one batch: advantages, staleness, loss and backward per
// micro-batch, AdamW, then writes, publishes and acknowledges version N+1.
func (t *Trainer) runStep(ctx context.Context, batch []pulled) (*StepMetrics, error) {
	start := time.Now()
	m := &StepMetrics{Step: t.step + 1, Time: start}
	samples, reason := t.samples(batch, m)
	if len(samples) == 0 {
		m.Step, m.Version = t.step, t.version
		m.SkipReason, m.Why = reason, t.why(reason, batch, m)
		return m, t.finish(ctx, batch, m, "")
	}
	err := t.withEngines(ctx, func() error {
		if err := t.checkMemory(); err != nil {
			return err
		}
		return t.train(ctx, samples, m)
	})
	if errors.Is(err, errNonFinite) {
		// retrying would fail the same way: drop the batch, keep the version
		m.Step, m.Version, m.Dropped, m.Samples = t.step, t.version, m.Dropped+m.Samples, 0
		m.SkipReason, m.Why = skipNonFinite, err.Error()
		return m, t.finish(ctx, batch, m, "")
	}
	if err != nil {
		return nil, err
	}
	t.step++
	t.version++
	t.line.stepped(t.version)
	m.Version, m.Trained = t.version, true
	dir, err := t.write()
	if err != nil {
		return nil, err
	}
	m.StepSeconds = time.Since(start).Seconds()
	return m, t.finish(ctx, batch, m, dir)
}

// checkMemory refuses a step while a GPU has less than MinFreeGPUBytes
// free (after the engines went to sleep, when they do).
func (t *Trainer) checkMemory() error {
	if t.d.GPU == nil || t.opts.MinFreeGPUBytes == 0 {
		return nil
	}
	if err := t.d.GPU.CheckFree(t.opts.MinFreeGPUBytes); err != nil {
		return fmt.Errorf("training step refused: %w", err)
	}
	return nil
}

// samples turns a batch into weighted samples with advantages. With none
// left, reason says which stage removed the last ones.
func (t *Trainer) samples(batch []pulled, m *StepMetrics) (_ []Sample, reason string) {
	exps := make([]*capture.Experience, 0, len(batch))
	for i := range batch {
		if t.fits(&batch[i].exp) {
			exps = append(exps, &batch[i].exp)
		} else {
			m.Dropped++
		}
	}
	if len(exps) == 0 {
		return nil, skipUnfit
	}
	var samples []Sample
	reason = skipNoVariance
	if t.opts.Loss.Kind == LossSFT {
		reason = skipMinReward
		for _, e := range exps {
			if e.Reward >= t.opts.SFTMinReward {
				samples = append(samples, newSample(e, 0))
			}
		}
		m.Skipped = len(exps) - len(samples)
		m.RewardMean, m.RewardStd = meanStd(rewards(exps, nil))
	} else {
		var st AdvantageStats
		samples, st = t.adv.Compute(exps)
		m.Skipped, m.RewardMean, m.RewardStd = st.Skipped, st.RewardMean, st.RewardStd
		m.AdvMean, m.AdvStd, m.AdvMin, m.AdvMax = st.AdvMean, st.AdvStd, st.AdvMin, st.AdvMax
	}
	if len(samples) == 0 {
		return nil, reason
	}
	samples, stale := t.opts.Staleness.ApplyStaleness(samples, t.line.lag)
	m.Dropped += stale
	var lag float64
	for _, s := range samples {
		lag += float64(s.Lag)
	}
	if len(samples) > 0 {
		m.MeanLag = lag / float64(len(samples))
	}
	m.Samples = len(samples)
	return samples, skipStale
}

// fits reports whether the model can train on e: at least two tokens,
// within its context, every token in its vocabulary. Experiences that do
// not fit are dropped rather than failing the step forever.
func (t *Trainer) fits(e *capture.Experience) bool {
	cfg := t.d.Policy.Model.Config()
	if len(e.Tokens) < 2 || len(e.Tokens) > cfg.MaxPositions {
		return false
	}
	for _, id := range e.Tokens {
		if id < 0 || int(id) >= cfg.VocabSize {
			return false
		}
	}
	return true
}

// withEngines runs fn with the engines asleep when configured.
func (t *Trainer) withEngines(ctx context.Context, fn func() error) error {
	sl, ok := t.d.Publisher.(Sleeper)
	if !t.opts.SleepEngines || !ok {
		return fn()
	}
	if err := sl.Sleep(ctx); err != nil {
		return fmt.Errorf("sleep engines before a step: %w", err)
	}
	err := fn()
	if werr := sl.Wake(ctx); werr != nil {
		return errors.Join(err, fmt.Errorf("wake engines after a step: %w", werr))
	}
	return err
}

// accum gathers a step's loss statistics across micro-batches.
type accum struct {
	loss, pg, kl, ratio float64
	tokens, clipped     int
	allTokens           int
}

// train accumulates gradients over micro-batches and steps the optimizer.
func (t *Trainer) train(ctx context.Context, samples []Sample, m *StepMetrics) error {
	masks := make([][]uint8, len(samples))
	lengths := make([]int, len(samples))
	for i, s := range samples {
		masks[i], lengths[i] = s.Exp.Mask, len(s.Exp.Tokens)
	}
	scales := AggregationScales(t.opts.Loss.Aggregation, masks)
	var acc accum
	for _, mb := range PackMicroBatches(lengths, t.opts.MicroBatchTokens) {
		if err := t.microBatch(ctx, samples, scales, mb, &acc); err != nil {
			return err
		}
	}
	lr := t.opts.Schedule.At(int(t.step))
	norm, err := t.d.Policy.optimize(lr, t.opts.MaxGradNorm, t.opts.AdamW)
	if err != nil {
		return err
	}
	m.Loss, m.PGLoss, m.GradNorm, m.LR, m.Tokens = acc.loss, acc.pg, norm, lr, acc.tokens
	if acc.tokens > 0 {
		m.KL = acc.kl / float64(acc.tokens)
		m.ClipFrac = float64(acc.clipped) / float64(acc.tokens)
		m.RatioMean = acc.ratio / float64(acc.tokens)
	}
	if secs := time.Since(m.Time).Seconds(); secs > 0 {
		m.TokensPerSec = float64(acc.allTokens) / secs
	}
	return nil
}

// microBatch runs forward, loss and backward for the samples at idx.
func (t *Trainer) microBatch(ctx context.Context, samples []Sample, scales []float64, idx []int, acc *accum) error {
	seqs := make([][]int32, 0, len(idx))
	var use []int
	for _, i := range idx {
		if len(samples[i].Exp.Tokens) >= 2 && scales[i] > 0 {
			seqs = append(seqs, samples[i].Exp.Tokens)
			use = append(use, i)
		}
	}
	if len(seqs) == 0 {
		return nil
	}
	act, lps, err := t.d.Policy.forward(ctx, seqs)
	if err != nil {
		return fmt.Errorf("training forward: %w", err)
	}
	defer act.Free()
	var refs [][]float32
	if t.opts.Loss.KLCoef > 0 {
		if refs, err = t.d.Policy.reference(ctx, seqs); err != nil {
			return err
		}
	}
	dlogp := make([][]float32, len(seqs))
	for k, i := range use {
		s := samples[i]
		in := SeqInput{Logprobs: lps[k], Behaviour: s.Exp.Logprobs, Advantages: s.Advantages, Mask: s.Exp.Mask,
			Weight: s.Weight, Scale: scales[i]}
		if refs != nil {
			in.Ref = refs[k]
		}
		out, err := t.opts.Loss.Seq(in)
		if err != nil {
			return fmt.Errorf("loss of session %s: %w", s.Exp.Session, err)
		}
		dlogp[k] = out.Grad
		acc.loss += out.Loss
		acc.pg += out.PG
		acc.kl += out.KLSum
		acc.ratio += out.RatioSum
		acc.tokens += out.Tokens
		acc.clipped += out.Clipped
		acc.allTokens += len(seqs[k])
	}
	if err := t.d.Policy.backward(ctx, act, dlogp); err != nil {
		return fmt.Errorf("training backward: %w", err)
	}
	return nil
}

// write stores the current adapter (or full model) as version t.version.
func (t *Trainer) write() (string, error) {
	tensors, mom, vel := t.d.Policy.snapshot()
	v := checkpoint.Version{Tensors: tensors, M: mom, V: vel, State: t.state()}
	if a := t.d.Policy.Adapter; a != nil {
		v.Config = checkpoint.LoRAConfig{BaseModel: t.d.BaseModel, R: a.Rank, Alpha: a.Alpha}
		for _, mod := range a.Targets {
			v.Config.TargetModules = append(v.Config.TargetModules, mod.String())
		}
	} else {
		v.Base, v.CopyFrom = t.d.Policy.Model.Config(), t.d.ModelDir
	}
	return t.ckpt.Write(v)
}

// state is the resume state of the current version.
func (t *Trainer) state() checkpoint.State {
	st := checkpoint.State{Version: t.version, OptimizerStep: t.d.Policy.steps, Cursors: map[string]uint64{}}
	for i, s := range t.d.Sources {
		st.Cursors[s.Name()] = t.cursors[i]
	}
	if e, ok := t.adv.(*emaBaseline); ok && e.init {
		b := e.baseline
		st.Baseline = &b
	}
	return st
}

// publish makes version dir live on the engines.
func (t *Trainer) publish(ctx context.Context, dir string) error {
	if t.d.Policy.Adapter != nil {
		return t.d.Publisher.PublishAdapter(ctx, t.opts.Name, t.version, dir)
	}
	wp, ok := t.d.Publisher.(WeightsPublisher)
	if !ok || t.opts.ServedModel == "" {
		return errors.New("full weights need a publisher that reloads weights and trainer.served_model")
	}
	prev := t.d.ModelDir
	if t.version > 1 {
		prev = t.ckpt.Path(t.version - 1)
	}
	return wp.PublishWeights(ctx, t.opts.Name, t.opts.ServedModel, t.version, dir, prev)
}

// finish publishes dir (if any), acknowledges the batch and records m.
func (t *Trainer) finish(ctx context.Context, batch []pulled, m *StepMetrics, dir string) error {
	if dir != "" && t.d.Publisher != nil {
		if err := t.publish(ctx, dir); err != nil {
			t.d.Log.Warn("publish failed; the previous version keeps serving", "version", t.version, "err", err)
		}
	}
	if dir != "" {
		if _, err := t.ckpt.Prune(t.opts.KeepVersions); err != nil {
			t.d.Log.Warn("prune checkpoints", "err", err)
		}
	}
	ack := make([]uint64, len(t.d.Sources))
	for _, p := range batch {
		ack[p.src] = max(ack[p.src], p.exp.Cursor)
	}
	var errs []error
	for i, c := range ack {
		if c > 0 {
			errs = append(errs, t.d.Sources[i].Ack(ctx, c))
		}
	}
	if err := t.sink.record(m); err != nil {
		errs = append(errs, err)
	}
	if !m.Trained {
		t.d.Log.Warn("batch trained nothing", "reason", m.SkipReason, "why", m.Why, "sessions", countSessions(batch),
			"skipped", m.Skipped, "dropped", m.Dropped, "version", m.Version)
		return errors.Join(errs...)
	}
	t.d.Log.Info("training step", "step", m.Step, "version", m.Version, "samples", m.Samples,
		"reward_mean", m.RewardMean, "loss", m.Loss, "grad_norm", m.GradNorm, "tokens_per_sec", m.TokensPerSec)
	return errors.Join(errs...)
}

// why says in words why a batch left no sample to train on.
func (t *Trainer) why(reason string, batch []pulled, m *StepMetrics) string {
	n := countSessions(batch)
	switch reason {
	case skipUnfit:
		return fmt.Sprintf("all %d experiences were too long for the model's context or held tokens outside its "+
			"vocabulary", len(batch))
	case skipStale:
		return fmt.Sprintf("every sample was more policy versions behind than trainer.staleness allows (%d dropped)",
			m.Dropped)
	case skipMinReward:
		return fmt.Sprintf("no session of %d reached trainer.sft_min_reward %g", n, t.opts.SFTMinReward)
	}
	return fmt.Sprintf("the rewards of the %d sessions were equal within every task (X-Hone-Task), so every "+
		"advantage is zero: a step needs sessions of one task whose rewards differ", n)
}

// countSessions counts the distinct sessions of a batch.
func countSessions(batch []pulled) int {
	seen := map[string]bool{}
	for _, p := range batch {
		seen[fmt.Sprint(p.src, "/", p.exp.Session)] = true
	}
	return len(seen)
}

// NewAdapterFor creates the adapter opts.LoRA describes on m.
func NewAdapterFor(m *model.Model, opts Options) (*model.Adapter, error) {
	var targets []model.Module
	for _, name := range opts.LoRA.Targets {
		mod, ok := model.ParseModule(name)
		if !ok {
			return nil, fmt.Errorf("lora target %q: want one of q_proj..down_proj", name)
		}
		targets = append(targets, mod)
	}
	return model.NewAdapter(m, opts.Name, model.AdapterConfig{Rank: opts.LoRA.Rank, Alpha: opts.LoRA.Alpha, Targets: targets}, opts.LoRA.Seed)
}
