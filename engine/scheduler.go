package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hone-rl/hone/kernels"
	"github.com/hone-rl/hone/model/tokenizer"
)

// errClosed is reported to sequences still queued when the engine closes.
var errClosed = errors.New("engine closed")

// scheduler runs continuous batching: between decode steps it admits waiting
// sequences (their prompts prefill in the same forward as the running
// sequences' next token), so every step is one batched Forward over all
// running sequences.
type scheduler struct {
	lmMu           sync.RWMutex // guards lm against readers outside the loop
	lm             lm
	tok            tokenizer.Tokenizer
	maxSeqs        int
	maxBatchTokens int
	metrics        *metrics
	prefixes       *prefixPool  // nil: prefix caching off
	kvBudget       int          // KV positions of running sequences; 0 = unbounded
	deviceDraws    atomic.Int64 // steps whose tokens were drawn on the device

	submitCh chan *seq
	clearCh  chan struct{} // asks the loop to drop cached prefixes
	swapCh   chan *swapReq
	swap     *swapReq // pending: admission pauses until running drains
	waiting  []*seq
	running  []*seq
	nRunning atomic.Int64
	nWaiting atomic.Int64
	closed   atomic.Bool

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// schedConfig are the scheduler's limits.
type schedConfig struct {
	maxSeqs        int // sequences per step
	maxBatchTokens int // prefill tokens per step (the first waiting sequence always fits)
	prefixTokens   int // prefix cache size in tokens; 0 = off
	kvTokens       int // KV cache positions of running sequences; 0 = unbounded
}

func newScheduler(m lm, tok tokenizer.Tokenizer, cfg schedConfig, met *metrics) *scheduler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &scheduler{lm: m, tok: tok, maxSeqs: cfg.maxSeqs, maxBatchTokens: cfg.maxBatchTokens, kvBudget: cfg.kvTokens,
		metrics: met, submitCh: make(chan *seq, 1024), clearCh: make(chan struct{}, 1), swapCh: make(chan *swapReq),
		cancel: cancel}
	if cfg.prefixTokens > 0 {
		s.prefixes = &prefixPool{maxTokens: cfg.prefixTokens}
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.loop(ctx)
	}()
	return s
}

// submit queues sequences; their outputs report progress.
func (s *scheduler) submit(ctx context.Context, seqs []*seq) error {
	for _, q := range seqs {
		if s.closed.Load() {
			return errClosed
		}
		select {
		case s.submitCh <- q:
			s.nWaiting.Add(1)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// close stops the loop and fails every unfinished sequence.
func (s *scheduler) close() {
	s.closed.Store(true)
	s.cancel()
	s.wg.Wait()
}

func (s *scheduler) loop(ctx context.Context) {
	defer s.drainAll()
	for {
		if len(s.running) == 0 && len(s.waiting) == 0 && s.swap == nil {
			select {
			case q := <-s.submitCh:
				s.waiting = append(s.waiting, q)
			case <-s.clearCh:
				s.clearPrefixes()
				continue
			case r := <-s.swapCh:
				s.swap = r
			case <-ctx.Done():
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
		s.collect()
		s.dropCancelled()
		if s.swap != nil {
			s.trySwap()
		} else {
			s.admit()
		}
		s.preemptOverBudget()
		if len(s.running) > 0 {
			s.step(ctx)
		}
		s.nRunning.Store(int64(len(s.running)))
	}
}

// swapReq replaces the model between steps once no sequence runs on it.
type swapReq struct {
	lm    lm
	after func() // runs on the loop right after the swap
	done  chan struct{}
}

// currentLM returns the model in use.
func (s *scheduler) currentLM() lm {
	s.lmMu.RLock()
	defer s.lmMu.RUnlock()
	return s.lm
}

// replaceLM swaps in a new model once the running sequences (which hold KV
// caches of the old one) have finished; waiting requests start on the new
// one. It returns when the swap is done or ctx ends.
func (s *scheduler) replaceLM(ctx context.Context, m lm, after func()) error {
	r := &swapReq{lm: m, after: after, done: make(chan struct{})}
	select {
	case s.swapCh <- r:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *scheduler) trySwap() {
	if len(s.running) > 0 {
		return
	}
	s.clearPrefixes()
	s.lmMu.Lock()
	old := s.lm
	s.lm = s.swap.lm
	s.lmMu.Unlock()
	s.swap.after()
	if f, ok := old.(interface{ Free() }); ok && old != s.lm {
		f.Free() // no sequence holds its caches: the prefixes were cleared above
	}
	close(s.swap.done)
	s.swap = nil
}

// dropPrefixes asks the loop to free the prefix cache (engine sleep).
func (s *scheduler) dropPrefixes() {
	select {
	case s.clearCh <- struct{}{}:
	default:
	}
}

func (s *scheduler) clearPrefixes() {
	if s.prefixes != nil {
		s.prefixes.clear()
	}
}

// collect moves newly submitted sequences into the waiting queue.
func (s *scheduler) collect() {
	for {
		select {
		case q := <-s.submitCh:
			s.waiting = append(s.waiting, q)
		case <-s.clearCh:
			s.clearPrefixes()
		case r := <-s.swapCh:
			s.swap = r
		default:
			return
		}
	}
}

// dropCancelled frees sequences whose client went away.
func (s *scheduler) dropCancelled() {
	keep := s.waiting[:0]
	for _, q := range s.waiting {
		if q.ctx.Err() != nil {
			s.finish(q, "abort", q.ctx.Err())
			continue
		}
		keep = append(keep, q)
	}
	s.waiting = keep
	run := s.running[:0]
	for _, q := range s.running {
		if q.ctx.Err() != nil {
			s.finish(q, "abort", q.ctx.Err())
			continue
		}
		run = append(run, q)
	}
	s.running = run
}

// admit starts waiting sequences in order while there are free slots and
// KV budget (the first one starts whenever a slot is free and nothing runs).
func (s *scheduler) admit() {
	n := 0
	for n < len(s.waiting) && len(s.running) < s.maxSeqs {
		q := s.waiting[n]
		if len(s.running) > 0 && !s.fits(q) {
			break
		}
		s.startSeq(q)
		s.running = append(s.running, q)
		n++
	}
	s.waiting = append(s.waiting[:0], s.waiting[n:]...)
	s.nWaiting.Store(int64(len(s.waiting)) + int64(len(s.submitCh)))
}

// startSeq gives a sequence its cache, reusing a cached prefix if any.
func (s *scheduler) startSeq(q *seq) {
	if s.prefixes != nil {
		toks := q.pending // the prompt, or prompt and output of a preempted sequence
		if c, n := s.prefixes.take(toks, q.spec.Adapter, q.spec.CacheSalt); c != nil {
			q.cache, q.fed, q.pending = c, append([]int32(nil), toks[:n]...), toks[n:]
			s.metrics.prefixHit(n)
		}
		s.metrics.prefixQuery(len(toks))
	}
	if q.cache == nil {
		q.cache = s.lm.NewCache()
	}
}

// plan picks each running sequence's tokens for the next step (chunked
// prefill): every decoding sequence its one token, then prompt chunks in
// start order within the step's token budget; the first prefilling sequence
// always gets at least one token. Zero means the sequence sits this step out.
func (s *scheduler) plan() []int {
	chunks := make([]int, len(s.running))
	budget := s.maxBatchTokens
	for i, q := range s.running {
		if len(q.pending) == 1 {
			chunks[i] = 1
			budget--
		}
	}
	first := true
	for i, q := range s.running {
		if len(q.pending) == 1 {
			continue
		}
		n := min(len(q.pending), budget)
		if first {
			n = max(n, 1)
			first = false
		}
		if n > 0 {
			chunks[i] = n
			budget -= n
		}
	}
	return chunks
}

// step runs one batched forward over the planned tokens and samples the next
// token of every sequence whose prompt is fully in its cache.
func (s *scheduler) step(ctx context.Context) {
	chunks := s.plan()
	var steps []lmStep
	rows := make([]int, len(s.running)) // row of each sequence in the batch, -1 if none
	for i, q := range s.running {
		rows[i] = -1
		if chunks[i] == 0 {
			continue
		}
		var a lmAdapter
		if q.spec.Adapter != nil {
			a = q.spec.Adapter.lm
		}
		rows[i] = len(steps)
		steps = append(steps, lmStep{Tokens: q.pending[:chunks[i]], Cache: q.cache, Adapter: a})
	}
	var logits [][]float32
	var drawn *kernels.SampleOut
	var topN int
	params, ok := s.deviceParams(rows, chunks)
	var err error
	if ok {
		var out kernels.SampleOut
		topN = maxTopLogprobs(s.running, rows)
		out, err = s.lm.(deviceSampler).ForwardSample(ctx, steps, params, topN)
		drawn = &out
		s.deviceDraws.Add(1)
		if err == nil && len(out.Tokens) != len(steps) {
			err = fmt.Errorf("forward sample returned %d rows for %d steps", len(out.Tokens), len(steps))
		}
	} else {
		logits, err = s.lm.Forward(ctx, steps)
		if err == nil && len(logits) != len(steps) {
			err = fmt.Errorf("forward returned %d rows for %d steps", len(logits), len(steps))
		}
	}
	if err != nil {
		slog.Error("engine forward", "err", err, "batch", len(steps))
		for _, q := range s.running {
			s.finish(q, "abort", fmt.Errorf("forward: %w", err))
		}
		s.running = s.running[:0]
		return
	}
	s.metrics.step(len(steps))
	run := s.running[:0]
	for i, q := range s.running {
		if rows[i] >= 0 {
			q.fed = append(q.fed, q.pending[:chunks[i]]...)
			q.pending = q.pending[chunks[i]:]
		}
		if rows[i] < 0 || len(q.pending) > 0 { // waiting for tokens, or still prefilling
			run = append(run, q)
			continue
		}
		var done bool
		if drawn != nil {
			done = s.record(q, drawnToken(drawn, rows[i], topN, q.spec.Params))
		} else {
			done = s.sampleNext(q, logits[rows[i]])
		}
		if done {
			s.keep(q)
			continue
		}
		run = append(run, q)
	}
	s.running = run
}

// sampleNext samples and records q's next token; it reports whether q
// finished.
func (s *scheduler) sampleNext(q *seq, logits []float32) bool {
	return s.record(q, sampled(sample(logits, q.processed(logits), q.spec.Params, q.rng)))
}

// sampled packs sample's results.
func sampled(id int32, lp float32, top []tokenProb) tokenEvent {
	return tokenEvent{ID: id, Logprob: lp, Top: top}
}

// record accepts q's next token; it reports whether q finished.
func (s *scheduler) record(q *seq, ev tokenEvent) bool {
	s.metrics.generated(1)
	if q.ngen == 0 {
		s.metrics.ttft.Observe(time.Since(q.start).Seconds())
	}
	return q.accept(s.tok, ev.ID, ev.Logprob, ev.Top)
}

// deviceParams returns the step's kernels.Sampling rows when every
// sequence that samples in it can draw on the device: the lm samples on a
// device, and no logits processor, grammar, min_p, min_tokens or top_k
// over kernels.MaxSampleCandidates (the device caps it) applies (those run
// on the host, over downloaded logits). A row's seed is drawn
// from its sequence's generator (and unmixed from the row index the kernel
// mixes in), so a seeded request draws the same tokens whatever its row.
func (s *scheduler) deviceParams(rows, chunks []int) ([]kernels.Sampling, bool) {
	ds, ok := s.lm.(deviceSampler)
	if !ok || !ds.DeviceSampling() {
		return nil, false
	}
	n := 0
	for _, r := range rows {
		n = max(n, r+1)
	}
	params := make([]kernels.Sampling, n)
	for i, q := range s.running {
		r := rows[i]
		if r < 0 || len(q.pending) > chunks[i] { // not sampling in this step
			continue
		}
		p := q.spec.Params
		if p.Guide != nil || q.counts != nil || p.MinP > 0 || p.TopLogprobs > kernels.MaxSampleCandidates ||
			p.TopK > kernels.MaxSampleCandidates ||
			(q.ngen < q.spec.MinTokens && len(q.spec.StopIDs) > 0) {
			return nil, false
		}
		params[r] = kernels.Sampling{TopP: float32(p.TopP), TopK: int32(p.TopK),
			Seed: q.rng.Uint64() ^ kernels.SplitMix64(uint64(r))}
		if p.Temperature >= samplingEps {
			params[r].Temperature = float32(p.Temperature)
		}
	}
	return params, true
}

// maxTopLogprobs is the most top log-probabilities a sampling row asks for.
func maxTopLogprobs(running []*seq, rows []int) int {
	n := 0
	for i, q := range running {
		if rows[i] >= 0 {
			n = max(n, q.spec.Params.TopLogprobs)
		}
	}
	return n
}

// drawnToken is row r's token from a device draw, with its log-probability
// and top alternatives when p asks for them.
func drawnToken(out *kernels.SampleOut, r, topN int, p samplingParams) tokenEvent {
	ev := tokenEvent{ID: out.Tokens[r]}
	if p.Logprobs || p.TopLogprobs > 0 {
		ev.Logprob = out.Logp[r]
	}
	for c := 0; c < p.TopLogprobs; c++ {
		ev.Top = append(ev.Top, tokenProb{ID: out.TopIDs[r*topN+c], Logprob: out.TopLogp[r*topN+c]})
	}
	return ev
}

// finish ends a sequence that did not complete normally.
func (s *scheduler) finish(q *seq, reason string, err error) {
	q.out.end(reason, nil, err)
	s.release(q)
}

// keep releases a finished sequence, storing its cache for prefix reuse.
func (s *scheduler) keep(q *seq) {
	if s.prefixes != nil && q.cache != nil {
		s.prefixes.put(q.cache, q.fed, q.spec.Adapter, q.spec.CacheSalt)
		q.cache = nil
	}
	s.release(q)
}

func (s *scheduler) release(q *seq) {
	if q.cache != nil {
		q.cache.Free()
		q.cache = nil
	}
	if q.spec.Adapter != nil {
		q.spec.Adapter.release()
	}
}

func (s *scheduler) drainAll() {
	s.collect()
	for _, q := range append(s.waiting, s.running...) {
		s.finish(q, "abort", errClosed)
	}
	s.waiting, s.running = nil, nil
	s.clearPrefixes()
}
