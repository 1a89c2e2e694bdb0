package proxy

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
)

func chatReq(stream bool) []byte {
	if stream {
		return []byte(`{"model":"Qwen/Qwen3-0.6B","messages":[{"role":"user","content":"Hello!"}],"stream":true}`)
	}
	return []byte(`{"model":"Qwen/Qwen3-0.6B","messages":[{"role":"user","content":"Hello!"}]}`)
}

func wantOpenAIError(t *testing.T, r *rawResponse, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d (body %s)", r.status, status, r.body)
	}
	e := gjson.GetBytes(r.body, "error")
	if !e.Get("message").Exists() || !e.Get("type").Exists() || !e.Get("code").Exists() || !e.Get("param").Exists() {
		t.Fatalf("not an OpenAI-style error: %s", r.body)
	}
}

func deadURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + ln.Addr().String()
	ln.Close()
	return u
}

func TestBadRequests(t *testing.T) {
	stub := newStub(t)
	stub.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
	h := startHone(t, func(o *Options) { o.MaxBodyBytes = 1 << 10 }, stub)
	wantOpenAIError(t, post(t, h.url, "/v1/chat/completions", []byte(`{"model":`), nil), 400)
	wantOpenAIError(t, post(t, h.url, "/v1/chat/completions", []byte(`[1,2]`), nil), 400)
	big := []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("a", 2<<10) + `"}]}`)
	wantOpenAIError(t, post(t, h.url, "/v1/chat/completions", big, nil), 413)
	if stub.served.Load() != 0 {
		t.Fatalf("bad requests reached the engine")
	}
	// hone keeps serving
	if r := post(t, h.url, "/v1/chat/completions", chatReq(false), nil); r.status != 200 {
		t.Fatalf("status %d after bad requests", r.status)
	}
}

func TestClientKeys(t *testing.T) {
	stub := newStub(t)
	stub.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
	h := startHone(t, func(o *Options) { o.ClientKeys = []string{"k1"} }, stub)
	wantOpenAIError(t, post(t, h.url, "/v1/chat/completions", chatReq(false), nil), 401)
	wantOpenAIError(t, post(t, h.url, "/v1/chat/completions", chatReq(false), map[string]string{"Authorization": "Bearer no"}), 401)
	if r := post(t, h.url, "/v1/chat/completions", chatReq(false), map[string]string{"Authorization": "Bearer k1"}); r.status != 200 {
		t.Fatalf("status %d with a valid key", r.status)
	}
}

func TestEngineKeyReplacesAuthorization(t *testing.T) {
	stub := newStub(t)
	stub.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
	h := startHone(t, func(o *Options) { o.Upstream.APIKey = "engine-key" }, stub)
	post(t, h.url, "/v1/chat/completions", chatReq(false), map[string]string{"Authorization": "Bearer agent"})
	if _, hdr := stub.lastRequest(); hdr["Authorization"] != "Bearer engine-key" {
		t.Fatalf("Authorization upstream = %q", hdr["Authorization"])
	}
}

func TestEngineDown(t *testing.T) {
	t.Run("unreachable", func(t *testing.T) {
		h := startHoneURLs(t, deadURL(t))
		r := post(t, h.url, "/v1/chat/completions", chatReq(false), nil)
		if r.status != 502 && r.status != 503 {
			t.Fatalf("status %d, want 502 or 503", r.status)
		}
		wantOpenAIError(t, r, r.status)
		// the captured call is handed back: the store unpins its new session's claim
		if got := h.rec.Abandoned(); len(got) != 1 || len(h.rec.Calls()) != 0 {
			t.Fatalf("abandoned %v, recorded %d: want the one call abandoned", got, len(h.rec.Calls()))
		}
	})
	t.Run("unhealthy but answering: panic mode", func(t *testing.T) {
		stub := newStub(t)
		stub.health.Store(500)
		stub.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
		h := startHone(t, nil, stub)
		for deadline := time.Now().Add(5 * time.Second); h.s.Ready(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("engine failing its health check counts as ready")
			}
		}
		if r := post(t, h.url, "/v1/chat/completions", chatReq(false), nil); r.status != 200 {
			t.Fatalf("status %d: the only engine is unhealthy but answers; want it tried (panic mode)", r.status)
		}
		if v := metricValue(t, h, "hone_upstream_panic_total"); v < 1 {
			t.Fatalf("hone_upstream_panic_total = %v", v)
		}
	})
	t.Run("unhealthy and failing", func(t *testing.T) {
		stub := newStub(t)
		stub.health.Store(500)
		stub.answer = func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(503) }
		h := startHone(t, nil, stub)
		if r := post(t, h.url, "/v1/chat/completions", chatReq(false), nil); r.status != 503 {
			t.Fatalf("status %d, want the engine's 503", r.status)
		}
	})
	t.Run("failover", func(t *testing.T) {
		good := newStub(t)
		good.answer = replay(t, fixture(t, "chat_stream", "upstream.sse"), 0)
		h := startHoneURLs(t, deadURL(t), good.url())
		for i := 0; i < 4; i++ {
			r := post(t, h.url, "/v1/chat/completions", chatReq(true), map[string]string{"X-Hone-Session": "s" + string(rune('a'+i))})
			want, _ := os.ReadFile(fixture(t, "chat_stream", "client.sse"))
			if r.status != 200 || !bytes.Equal(r.body, want) {
				t.Fatalf("call %d: status %d body %s", i, r.status, r.body)
			}
		}
	})
	t.Run("5xx retried elsewhere", func(t *testing.T) {
		bad, good := newStub(t), newStub(t)
		bad.answer = func(ctx *fasthttp.RequestCtx) {
			ctx.SetStatusCode(500)
			ctx.SetBodyString(`{"error":{"message":"boom","type":"InternalServerError","param":null,"code":500}}`)
		}
		good.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
		h := startHone(t, nil, bad, good)
		for i := 0; i < 6; i++ {
			if r := post(t, h.url, "/v1/chat/completions", chatReq(false), nil); r.status != 200 {
				t.Fatalf("call %d: status %d", i, r.status)
			}
		}
	})
}

func startHoneURLs(t *testing.T, urls ...string) *testHone {
	return startHone(t, func(o *Options) {
		for _, u := range urls {
			o.Upstream.Engines = append(o.Upstream.Engines, EngineOptions{URL: u})
		}
	})
}

func TestUpstreamErrorPassedThrough(t *testing.T) {
	stub := newStub(t)
	const body = `{"error":{"message":"The model ` + "`x`" + ` does not exist.","type":"NotFoundError","param":"model","code":404}}`
	stub.answer = func(ctx *fasthttp.RequestCtx) {
		ctx.SetStatusCode(404)
		ctx.SetContentType("application/json")
		ctx.SetBodyString(body)
	}
	h := startHone(t, nil, stub)
	r := post(t, h.url, "/v1/chat/completions", chatReq(false), nil)
	if r.status != 404 || string(r.body) != body {
		t.Fatalf("got %d %s", r.status, r.body)
	}
	calls := waitCalls(t, h.rec, 1)
	if calls[0].Status != capture.StatusUpstreamError || calls[0].HTTPStatus != 404 {
		t.Fatalf("recorded %s/%d", calls[0].Status, calls[0].HTTPStatus)
	}
}

// TestEngineClosesMidStream: the agent gets the events sent so far, the
// call is recorded as broken, and hone keeps serving.
func TestEngineClosesMidStream(t *testing.T) {
	stub := newStub(t)
	data, _ := os.ReadFile(fixture(t, "chat_stream", "upstream.sse"))
	events := splitEvents(data)
	stub.answer = func(ctx *fasthttp.RequestCtx) {
		if ctx.Request.Header.Peek("X-Break") == nil {
			replay(t, fixture(t, "chat", "upstream.json"), 0)(ctx)
			return
		}
		ctx.HijackSetNoResponse(true)
		ctx.Hijack(func(c net.Conn) {
			w := bufio.NewWriter(c)
			w.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
			for _, ev := range events[:3] {
				w.WriteString(strings.ToUpper(strconvHex(len(ev))) + "\r\n")
				w.Write(ev)
				w.WriteString("\r\n")
			}
			w.Flush()
			c.Close()
		})
	}
	h := startHone(t, nil, stub)
	r := post(t, h.url, "/v1/chat/completions", chatReq(true), map[string]string{"X-Break": "1"})
	if r.status != 200 || len(r.chunks) != 3 || r.readErr == nil {
		t.Fatalf("status %d, %d chunks, err %v: want the 3 events sent, then a broken stream", r.status, len(r.chunks), r.readErr)
	}
	calls := waitCalls(t, h.rec, 1)
	if calls[0].Status != capture.StatusUpstreamBroken || len(calls[0].Choices[0].TokenIDs) != 2 {
		t.Fatalf("recorded status %s, %d tokens", calls[0].Status, len(calls[0].Choices[0].TokenIDs))
	}
	if r := post(t, h.url, "/v1/chat/completions", chatReq(false), nil); r.status != 200 {
		t.Fatalf("hone stopped serving: %d", r.status)
	}
}

// strconvHex is n in hexadecimal (a chunk size; n > 0).
func strconvHex(n int) string { return strconv.FormatInt(int64(n), 16) }

// TestClientDisconnect: the agent goes away mid-stream; the engine sees its
// connection closed and the partial call is recorded.
func TestClientDisconnect(t *testing.T) {
	stub := newStub(t)
	cancelled := make(chan struct{})
	stub.answer = func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("text/event-stream")
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			w.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"prompt_token_ids":[1,2,3]}` + "\n\n")
			for i := 0; ; i++ {
				w.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"x"},"logprobs":{"content":[{"token":"x","logprob":-0.5,"bytes":[120],"top_logprobs":[]}]},"finish_reason":null,"token_ids":[87]}]}` + "\n\n")
				if err := w.Flush(); err != nil {
					close(cancelled)
					return
				}
				time.Sleep(10 * time.Millisecond)
				if i > 2000 {
					return
				}
			}
		})
	}
	h := startHone(t, nil, stub)
	c, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	body := chatReq(true)
	c.Write([]byte("POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n" + string(body)))
	buf := make([]byte, 4096)
	if _, err := c.Read(buf); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	c.Close()
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("engine did not see the upstream request cancelled")
	}
	calls := waitCalls(t, h.rec, 1)
	if calls[0].Status != capture.StatusClientDisconnected || len(calls[0].Choices[0].TokenIDs) == 0 {
		t.Fatalf("recorded status %s with %d tokens", calls[0].Status, len(calls[0].Choices))
	}
}

func TestTimeouts(t *testing.T) {
	stub := newStub(t)
	stub.answer = func(ctx *fasthttp.RequestCtx) {
		if ctx.Request.Header.Peek("X-Slow-First") != nil {
			time.Sleep(400 * time.Millisecond)
			replay(t, fixture(t, "chat", "upstream.json"), 0)(ctx)
			return
		}
		replay(t, fixture(t, "chat_stream", "upstream.sse"), 300*time.Millisecond)(ctx)
	}
	h := startHone(t, func(o *Options) {
		o.Upstream.Timeouts.FirstByte = 150 * time.Millisecond
		o.Upstream.Timeouts.Idle = 100 * time.Millisecond
	}, stub)
	wantOpenAIError(t, post(t, h.url, "/v1/chat/completions", chatReq(false), map[string]string{"X-Slow-First": "1"}), 504)
	r := post(t, h.url, "/v1/chat/completions", chatReq(true), nil)
	if r.status != 200 || r.readErr == nil || len(r.chunks) != 1 {
		t.Fatalf("idle timeout: status %d chunks %d err %v", r.status, len(r.chunks), r.readErr)
	}
	calls := waitCalls(t, h.rec, 1)
	if calls[len(calls)-1].Status != capture.StatusTimeout {
		t.Fatalf("recorded %s, want timeout", calls[len(calls)-1].Status)
	}
}

// metricValue reads a counter or gauge from hone's registry: the series
// with the given label pairs (name, value, ...), 0 when there is none.
func metricValue(t *testing.T, h *testHone, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					found = found || (lp.GetName() == labels[i] && lp.GetValue() == labels[i+1])
				}
				if !found {
					continue series
				}
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// TestEngineSendsDoneTwice: an engine's second data: [DONE] is dropped; the
// call ends once (recorded once, the engine's in-flight count back to 0),
// and the agent gets the stream it would get from a well-behaved engine.
func TestEngineSendsDoneTwice(t *testing.T) {
	stub := newStub(t)
	data, _ := os.ReadFile(fixture(t, "chat_stream", "upstream.sse"))
	twice := filepath.Join(t.TempDir(), "upstream.sse")
	if err := os.WriteFile(twice, append(data, "data: [DONE]\n\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	stub.answer = replay(t, twice, 0)
	h := startHone(t, nil, stub)
	r := post(t, h.url, "/v1/chat/completions", chatReq(true), map[string]string{"X-Hone-Session": "twice"})
	want, _ := os.ReadFile(fixture(t, "chat_stream", "client.sse"))
	if r.status != 200 || !bytes.Equal(r.body, want) {
		t.Fatalf("status %d body %s", r.status, r.body)
	}
	waitCalls(t, h.rec, 1)
	time.Sleep(50 * time.Millisecond) // a second end would record by now
	if n := len(h.rec.Calls()); n != 1 {
		t.Fatalf("%d calls recorded, want 1", n)
	}
	for _, e := range h.s.pool.engines {
		if n := e.outstanding.Load(); n != 0 {
			t.Fatalf("engine %s outstanding %d after the call, want 0", e.url, n)
		}
	}
}

// TestEngineAnswerTooLarge: a whole answer past maxAnswer, announced or
// chunked, is a 502 upstream_answer_too_large, read no further than the
// bound; the engine's connection is dropped and hone goes on serving.
func TestEngineAnswerTooLarge(t *testing.T) {
	defer func(m int64) { maxAnswer = m }(maxAnswer)
	maxAnswer = 1 << 20
	stub := newStub(t)
	ok := replay(t, fixture(t, "chat", "upstream.json"), 0)
	big := append([]byte(`{"choices":[{"index":0,"message":{"content":"`), bytes.Repeat([]byte("x"), 2<<20)...)
	stub.answer = func(ctx *fasthttp.RequestCtx) {
		switch string(ctx.Request.Header.Peek("X-Size")) {
		case "announced":
			ctx.SetContentType("application/json")
			ctx.SetBody(big)
		case "chunked":
			ctx.SetContentType("application/json")
			ctx.SetBodyStream(bytes.NewReader(big), -1)
		default:
			ok(ctx)
		}
	}
	h := startHone(t, nil, stub)
	for _, size := range []string{"announced", "chunked"} {
		r := post(t, h.url, "/v1/chat/completions", chatReq(false), map[string]string{"X-Size": size})
		if r.status != 502 || !bytes.Contains(r.body, []byte("upstream_answer_too_large")) {
			t.Fatalf("%s: %d %s", size, r.status, r.body)
		}
		if r := post(t, h.url, "/v1/chat/completions", chatReq(false), nil); r.status != 200 {
			t.Fatalf("after the %s answer: %d %s", size, r.status, r.body)
		}
	}
}
