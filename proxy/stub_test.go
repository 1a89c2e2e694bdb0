package proxy

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hone-rl/hone/proxy/internal/sse"

	"github.com/valyala/fasthttp"
)

// stubEngine is a fasthttp server that replays vLLM-format fixtures.
type stubEngine struct {
	t        *testing.T
	ln       net.Listener
	srv      *fasthttp.Server
	mu       sync.Mutex
	requests [][]byte // bodies received on completion routes
	headers  []map[string]string
	answer   func(ctx *fasthttp.RequestCtx) // set per test
	health   atomic.Int32                   // status of GET /health (0 means 200)
	served   atomic.Int64
	models   atomic.Pointer[string] // GET /v1/models body; nil: one Qwen3-0.6B
}

// setModels sets the stub's GET /v1/models body.
func (s *stubEngine) setModels(body string) { s.models.Store(&body) }

func newStub(t *testing.T) *stubEngine {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &stubEngine{t: t, ln: ln}
	// names as they arrive on the wire, so tests see what hone forwarded
	s.srv = &fasthttp.Server{Handler: s.handle, DisableHeaderNamesNormalizing: true, ReadBufferSize: 64 << 10}
	go s.srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { _ = s.srv.Shutdown() })
	return s
}

func (s *stubEngine) url() string { return "http://" + s.ln.Addr().String() }

func (s *stubEngine) handle(ctx *fasthttp.RequestCtx) {
	switch string(ctx.Path()) {
	case "/health":
		if st := s.health.Load(); st != 0 {
			ctx.SetStatusCode(int(st))
		}
		return
	case "/v1/models":
		ctx.SetContentType("application/json")
		if m := s.models.Load(); m != nil {
			ctx.SetBodyString(*m)
			return
		}
		ctx.SetBodyString(`{"object":"list","data":[{"id":"Qwen/Qwen3-0.6B","object":"model","created":1763780000,` +
			`"owned_by":"vllm","root":"Qwen/Qwen3-0.6B","parent":null,"max_model_len":40960,"permission":[]}]}`)
		return
	}
	h := map[string]string{}
	for k, v := range ctx.Request.Header.All() {
		h[string(k)] = string(v)
	}
	s.mu.Lock()
	s.requests = append(s.requests, append([]byte(nil), ctx.PostBody()...))
	s.headers = append(s.headers, h)
	s.mu.Unlock()
	s.served.Add(1)
	if s.answer != nil {
		s.answer(ctx)
	}
}

func (s *stubEngine) lastRequest() ([]byte, map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == 0 {
		return nil, nil
	}
	return s.requests[len(s.requests)-1], s.headers[len(s.headers)-1]
}

// replay answers with a fixture file: JSON as is, SSE one event at a time
// with a pause between events, each flushed.
func replay(t *testing.T, path string, pause time.Duration) func(ctx *fasthttp.RequestCtx) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(path, ".sse") {
		return func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentType("application/json")
			ctx.SetBody(data)
		}
	}
	events := splitEvents(data)
	return func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("text/event-stream; charset=utf-8")
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			for _, ev := range events {
				w.Write(ev) //nolint:errcheck
				if w.Flush() != nil {
					return
				}
				time.Sleep(pause)
			}
		})
	}
}

func splitEvents(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		var ev []byte
		ev, data = sse.Cut(data)
		out = append(out, ev)
	}
	return out
}

func fixture(t testing.TB, name, file string) string {
	return filepath.Join("testdata", "cases", name, file)
}
