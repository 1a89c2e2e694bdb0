package engine

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/hone-rl/hone/model/tokenizer"
)

// Engine is a running embedded engine.
type Engine struct {
	opts        Options
	vocab       int // logits per step; a weight reload must keep it
	tok         tokenizer.Tokenizer
	maxModelLen int
	eos         map[int32]bool
	defaults    genDefaults
	sched       *scheduler
	adapters    *adapters
	metrics     *metrics
	guides      guideCache // constrained decoding (constrain.go)

	sleep    sleepState
	inflight atomic.Int64
	mux      *http.ServeMux
}

// genDefaults are sampling defaults from generation_config.json, as vLLM
// applies them when a request leaves a field unset.
type genDefaults struct {
	Temperature float64
	TopP        float64
	TopK        int
}

// modelParts is what New loads from a model folder.
type modelParts struct {
	lm          lm
	tok         tokenizer.Tokenizer
	maxModelLen int
	eos         []int32
	defaults    genDefaults
}

// New loads the model in opts.ModelDir and starts the scheduler.
func New(ctx context.Context, opts Options) (*Engine, error) {
	opts = opts.withDefaults()
	if err := opts.check(); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	parts, err := loadModel(ctx, opts.ModelDir, opts.Threads, opts.Device, opts.WeightDType, opts.Autocast)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	return newEngine(opts, parts), nil
}

func newEngine(opts Options, p modelParts) *Engine {
	opts = opts.withDefaults()
	e := &Engine{opts: opts, vocab: p.lm.VocabSize(), tok: p.tok, defaults: p.defaults,
		maxModelLen: p.maxModelLen, eos: map[int32]bool{}, adapters: newAdapters()}
	if opts.MaxModelLen > 0 && (e.maxModelLen == 0 || opts.MaxModelLen < e.maxModelLen) {
		e.maxModelLen = opts.MaxModelLen
	}
	for _, id := range p.eos {
		e.eos[id] = true
	}
	e.metrics = newMetrics(opts.ServedModelName,
		func() float64 { return float64(e.sched.nRunning.Load()) },
		func() float64 { return float64(e.sched.nWaiting.Load()) })
	cfg := schedConfig{maxSeqs: opts.MaxNumSeqs, maxBatchTokens: opts.MaxNumBatchedTokens}
	perToken := max(1, p.lm.KVBytesPerToken())
	if opts.PrefixCacheMiB > 0 {
		cfg.prefixTokens = opts.PrefixCacheMiB << 20 / perToken
	}
	if opts.KVCacheMiB > 0 {
		cfg.kvTokens = max(1, opts.KVCacheMiB<<20/perToken)
	}
	e.sched = newScheduler(p.lm, p.tok, cfg, e.metrics)
	e.mux = e.routes()
	return e
}

// maxBody bounds request bodies.
const maxBody = 32 << 20

// model is the language model currently served.
func (e *Engine) model() lm { return e.sched.currentLM() }

// Handler returns the engine's HTTP API.
func (e *Engine) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !e.authorized(r) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"Unauthorized"}`)) // vLLM's answer to a missing or wrong key
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		e.mux.ServeHTTP(w, r)
	})
}

// authorized checks Options.APIKey: health probes need none.
func (e *Engine) authorized(r *http.Request) bool {
	if e.opts.APIKey == "" || r.URL.Path == "/health" || r.URL.Path == "/ping" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(e.opts.APIKey)) == 1
}

// ModelName is the served base model name.
func (e *Engine) ModelName() string { return e.opts.ServedModelName }

// Close stops the scheduler; unfinished requests end with an error.
func (e *Engine) Close() {
	e.sched.close()
	for _, a := range e.adapters.list() {
		e.adapters.remove(a.name)
	}
}
