package engine

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"
)

// routes is the engine's API. A path no route serves, or a method a path
// does not take, gets vLLM's JSON error (its HTTPException handler:
// {"error":{"message":"Not Found","type":"Not Found","param":null,"code":404}})
// instead of net/http's plain text.
func (e *Engine) routes() *http.ServeMux {
	m := http.NewServeMux()
	root := http.NewServeMux()
	root.Handle("/", routingErrors(m))
	m.HandleFunc("POST /v1/chat/completions", e.handleChat)
	m.HandleFunc("POST /v1/completions", e.handleCompletions)
	m.HandleFunc("GET /v1/models", e.handleModels)
	m.HandleFunc("POST /tokenize", e.handleTokenize)
	m.HandleFunc("POST /detokenize", e.handleDetokenize)
	m.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	m.HandleFunc("GET /version", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"version": e.opts.Version})
	})
	m.HandleFunc("GET /load", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]int64{"server_load": e.inflight.Load()})
	})
	m.Handle("GET /metrics", e.metrics.handler())
	if !e.opts.DisableRuntimeLoRA {
		m.HandleFunc("POST /v1/load_lora_adapter", e.handleLoadLoRA)
		m.HandleFunc("POST /v1/unload_lora_adapter", e.handleUnloadLoRA)
	}
	if !e.opts.DisableSleepMode {
		m.HandleFunc("POST /sleep", e.handleSleep)
		m.HandleFunc("POST /wake_up", e.handleWakeUp)
		m.HandleFunc("POST /collective_rpc", e.handleCollectiveRPC)
		m.HandleFunc("POST /reset_prefix_cache", func(w http.ResponseWriter, _ *http.Request) {
			e.sched.dropPrefixes()
			w.WriteHeader(http.StatusOK)
		})
		m.HandleFunc("GET /is_sleeping", func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, map[string]bool{"is_sleeping": e.sleep.sleeping()})
		})
	}
	return root
}

// modelName is the name a response reports: the requested one, or the base.
func (e *Engine) modelName(requested string) string {
	if requested == "" {
		return e.opts.ServedModelName
	}
	return requested
}

// checkAwake rejects generation while the engine sleeps.
func (e *Engine) checkAwake() *apiError {
	if e.sleep.sleeping() {
		return unavailable("The engine is sleeping; POST /wake_up before sending requests.")
	}
	return nil
}

// submit hands sequences to the scheduler.
func (e *Engine) submit(r *http.Request, seqs []*seq) error {
	seen := map[*int32]bool{}
	for _, q := range seqs {
		if p := &q.spec.Prompt[0]; !seen[p] {
			seen[p] = true
			e.metrics.prompt(len(q.spec.Prompt))
		}
	}
	if err := e.sched.submit(r.Context(), seqs); err != nil {
		e.releaseSeqs(seqs)
		return err
	}
	return nil
}

// releaseSeqs drops the adapter references of sequences never scheduled.
func (e *Engine) releaseSeqs(seqs []*seq) {
	for _, q := range seqs {
		if q.spec.Adapter != nil {
			q.spec.Adapter.release()
		}
	}
}

// track counts a request as in flight; the returned func records its end.
func (e *Engine) track(seqs []*seq) func() {
	start := time.Now()
	e.inflight.Add(1)
	return func() {
		e.inflight.Add(-1)
		e.metrics.e2e.Observe(time.Since(start).Seconds())
		for _, q := range seqs {
			q.out.mu.Lock()
			fin, failed := q.out.finish, q.out.err != nil
			q.out.mu.Unlock()
			if fin != "" && !failed {
				e.metrics.success.WithLabelValues(fin).Inc()
			}
		}
	}
}

// sse writes server-sent events.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

func (s *sse) send(v any) {
	b, err := marshal(v)
	if err != nil {
		return
	}
	s.raw(b)
}

// marshal encodes v like Python's json module: no HTML escaping of <, >, &.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func (s *sse) raw(b []byte) {
	_, _ = s.w.Write([]byte("data: "))
	_, _ = s.w.Write(b)
	_, _ = s.w.Write([]byte("\n\n"))
	if s.f != nil {
		s.f.Flush()
	}
}

func (s *sse) done() { s.raw([]byte("[DONE]")) }
