package proxy

import (
	"os"
	"testing"

	"github.com/hone-rl/hone/capture"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

// benchChat measures a non-streaming chat call through hone to a stub, from
// parallel clients, with the given recorder.
func benchChat(b *testing.B, rec func(b *testing.B) Recorder) {
	body, _ := os.ReadFile(fixture(b, "chat", "request.json"))
	benchPost(b, rec, "/v1/chat/completions", body)
}

// benchPost measures calls of path with body through hone to a stub
// answering every call with the chat fixture.
func benchPost(b *testing.B, rec func(b *testing.B) Recorder, path string, body []byte) {
	t := &testing.T{}
	stub := newStub(t)
	stub.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
	h := startHoneRec(b, stub, rec(b))
	c := &fasthttp.Client{MaxConnsPerHost: 256}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		for pb.Next() {
			req.SetRequestURI(h + path)
			req.Header.SetMethod("POST")
			req.SetBody(body)
			if err := c.Do(req, resp); err != nil || resp.StatusCode() != 200 {
				b.Errorf("call: %v %d", err, resp.StatusCode())
				return
			}
		}
	})
}

func startHoneRec(b *testing.B, stub *stubEngine, rec Recorder) string {
	verify := verifyEncoded // a test's check (chatjson.go), not what hone does: not timed
	verifyEncoded = false
	b.Cleanup(func() { verifyEncoded = verify })
	o := DefaultOptions()
	o.Upstream.Engines = []EngineOptions{{URL: stub.url()}}
	s, err := New(o, rec, prometheus.NewRegistry(), nil)
	if err != nil {
		b.Fatal(err)
	}
	ln := listenLocal(b)
	go s.Serve(ln) //nolint:errcheck
	b.Cleanup(func() { _ = s.srv.Shutdown() })
	return "http://" + ln.Addr().String()
}

func BenchmarkChatNoCapture(b *testing.B) {
	benchChat(b, func(*testing.B) Recorder { return nil })
}

func BenchmarkChatCaptureStore(b *testing.B) { benchChat(b, openStore) }

// BenchmarkChatToolHistory is BenchmarkChatCaptureStore for a coding
// agent's 41st call: 40 earlier edit_file calls and their results.
func BenchmarkChatToolHistory(b *testing.B) {
	body, err := os.ReadFile("../testdata/requests/tool-history-40.json")
	if err != nil {
		b.Fatal(err)
	}
	benchPost(b, openStore, "/v1/chat/completions", body)
}

// BenchmarkMessagesCodingAgent: a Claude Code-shaped /v1/messages call
// (a 15 KB system prompt, 20 tools, 40 turns of tool_use and a file's
// lines as tool_result: testdata/requests) through hone with a store.
func BenchmarkMessagesCodingAgent(b *testing.B) {
	body, err := os.ReadFile("../testdata/requests/messages-coding-40.json")
	if err != nil {
		b.Fatal(err)
	}
	benchPost(b, openStore, "/v1/messages", body)
}

func openStore(b *testing.B) Recorder {
	s, err := capture.Open(b.TempDir(), capture.DefaultOptions(), prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// BenchmarkChatDirect is the baseline: the same client straight to the stub.
func BenchmarkChatDirect(b *testing.B) {
	t := &testing.T{}
	stub := newStub(t)
	stub.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
	body, _ := os.ReadFile(fixture(t, "chat", "request.json"))
	c := &fasthttp.Client{MaxConnsPerHost: 256}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		for pb.Next() {
			req.SetRequestURI(stub.url() + "/v1/chat/completions")
			req.Header.SetMethod("POST")
			req.SetBody(body)
			if err := c.Do(req, resp); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkChatMemRecorder(b *testing.B) {
	benchChat(b, func(*testing.B) Recorder { return NewMemRecorder() })
}

// BenchmarkResponsesCodingAgent: a Codex CLI-shaped /v1/responses call (14
// KB of instructions, 4 tools, 40 turns of a reasoning summary, a shell
// call and its output; store false, so the whole input every call:
// testdata/requests) through hone with a store.
func BenchmarkResponsesCodingAgent(b *testing.B) {
	body, err := os.ReadFile("../testdata/requests/responses-coding-40.json")
	if err != nil {
		b.Fatal(err)
	}
	benchPost(b, openStore, "/v1/responses", body)
}
