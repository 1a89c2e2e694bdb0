package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/proxy/internal/sse"
	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
)

func TestGarbageFromEngineNotTrained(t *testing.T) {
	cases := []struct {
		name   string
		stream bool
		answer func(ctx *fasthttp.RequestCtx)
	}{
		{"truncated json", false, func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentType("application/json")
			ctx.SetBodyString(`{"id":"chatcmpl-1","choices":[{"index":0,"message":{"content":"hi`)
		}},
		{"not json", false, func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("<html>proxy error</html>") }},
		{"json without choices", false, func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentType("application/json")
			ctx.SetBodyString(`{"hello":"world"}`)
		}},
		{"stream of garbage", true, func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentType("text/event-stream")
			ctx.SetBodyString("data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\ndata: {broken\n\ndata: [DONE]\n\n")
		}},
		{"stream without completion events", true, func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentType("text/event-stream")
			ctx.SetBodyString("data: [DONE]\n\n")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stub := newStub(t)
			stub.answer = tc.answer
			h := startHone(t, nil, stub)
			r := post(t, h.url, "/v1/chat/completions", chatReq(tc.stream), nil)
			if r.status != 200 || len(r.body) == 0 {
				t.Fatalf("the agent should get what the engine sent: %d %q", r.status, r.body)
			}
			c := waitCalls(t, h.rec, 1)[0]
			if c.Status != capture.StatusUpstreamInvalid {
				t.Fatalf("recorded status %q, want %q", c.Status, capture.StatusUpstreamInvalid)
			}
		})
	}
}

// rawExchange writes raw bytes on a new connection and returns what comes
// back until the server closes it or timeout passes.
func rawExchange(t *testing.T, url string, req []byte, timeout time.Duration) ([]byte, time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	out, _ := io.ReadAll(c)
	return out, time.Since(start)
}

func TestLimits(t *testing.T) {
	stub := newStub(t)
	stub.answer = replay(t, fixture(t, "chat_stream", "upstream.sse"), 150*time.Millisecond)
	var logs lockedBuffer // the server logs while the test reads
	h := startHoneLog(t, NewMemRecorder(), func(o *Options) { o.MaxHeaderBytes, o.ReadTimeout = 8<<10, 300*time.Millisecond },
		slog.New(slog.NewTextHandler(&logs, nil)), stub)

	t.Run("large headers within the limit", func(t *testing.T) {
		r := post(t, h.url, "/v1/chat/completions", chatReq(false), map[string]string{"Cookie": strings.Repeat("c", 6<<10)})
		if r.status != 200 {
			t.Fatalf("status %d with 6 KB of headers", r.status)
		}
	})
	t.Run("over the limit: 431 without echo", func(t *testing.T) {
		secret := "sk-secret-" + strings.Repeat("x", 20)
		req := "POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer " + secret + "\r\nX-Big: " +
			strings.Repeat("b", 10<<10) + "\r\nContent-Length: 2\r\n\r\n{}"
		out, _ := rawExchange(t, h.url, []byte(req), 5*time.Second)
		if !bytes.HasPrefix(out, []byte("HTTP/1.1 431")) {
			t.Fatalf("answer %.200q, want 431", out)
		}
		if bytes.Contains(out, []byte(secret)) || bytes.Contains(out, []byte("bbbbbbbb")) {
			t.Fatalf("the error echoes the request: %.300q", out)
		}
	})
	t.Run("slow head is cut at read_timeout", func(t *testing.T) {
		out, took := rawExchange(t, h.url, []byte("POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer sk-cut-off\r\n"), 5*time.Second)
		if took > 3*time.Second {
			t.Fatalf("a connection that never finished its head was held %s", took)
		}
		if bytes.Contains(out, []byte("sk-cut-off")) {
			t.Fatalf("answer echoes the head: %q", out)
		}
	})
	t.Run("nesting deeper than any parser's stack: 400, still serving", func(t *testing.T) {
		// its own hone: 10 MB bodies need more than the 300 ms read
		// timeout above on a slow machine under -race
		h := startHone(t, nil, stub)
		deep := func(prefix string) []byte { return []byte(prefix + strings.Repeat("[", 10_000_000)) }
		for path, body := range map[string][]byte{
			"/v1/chat/completions":       deep(`{"model":"m","messages":`),
			"/v1/completions":            deep(`{"model":"m","prompt":`),
			"/v1/responses":              deep(`{"model":"m","input":`),
			"/v1/messages":               deep(`{"model":"m","max_tokens":1,"messages":`),
			"/v1/messages/count_tokens":  deep(`{"model":"m","messages":`),
			"/v1/chat/completions?deep=": []byte(strings.Repeat(`{"a":`, 3_000_000)),
		} {
			if r := post(t, h.url, path, body, nil); r.status != 400 {
				t.Fatalf("%s with %d bytes nested: status %d %.200s", path, len(body), r.status, r.body)
			}
		}
		if r := post(t, h.url, "/v1/chat/completions", chatReq(false), nil); r.status != 200 {
			t.Fatalf("after deeply nested bodies: status %d", r.status)
		}
	})
	t.Run("streams outlive read_timeout", func(t *testing.T) {
		r := post(t, h.url, "/v1/chat/completions", chatReq(true), nil)
		if r.status != 200 || r.readErr != nil || !bytes.Contains(r.body, []byte("[DONE]")) {
			t.Fatalf("stream cut: status %d err %v body %q", r.status, r.readErr, r.body)
		}
	})
	if out := logs.take(); strings.Contains(out, "sk-") {
		t.Fatalf("a credential reached the log: %s", out)
	}
}

func TestRedact(t *testing.T) {
	for in, bad := range map[string]string{
		`error when reading request headers: small read buffer. Buffer size=4096, contents: "POST / HTTP/1.1\r\nAuthorization: Bearer sk-1"`: "sk-1",
		`cannot parse "Authorization: Bearer sk-2"`:                               "sk-2",
		`x-api-key: sk-3 while reading`:                                           "sk-3",
		`unexpected "GET /v1/models?key=sk-4 HTTP/1.1 aaaaaaaaaaaaaaaaaaaaaaaaa"`: "sk-4",
	} {
		if out := redact(in); strings.Contains(out, bad) {
			t.Errorf("redact(%q) = %q keeps %s", in, out, bad)
		}
	}
}

// TestTokenizeFallbackBounded: with /tokenize hanging, the fallbacks in
// flight stay bounded (the rest are recorded at once without prompt ids),
// and Shutdown returns within its grace.
func TestTokenizeFallbackBounded(t *testing.T) {
	stub := newStub(t)
	release := make(chan struct{})
	stub.answer = func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/tokenize" {
			<-release
			ctx.SetBodyString(`{"count":1,"tokens":[1]}`)
			return
		}
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant",` +
			`"content":"x"},"logprobs":{"content":[{"token":"token_id:5","logprob":-0.5}]},"finish_reason":"stop"}]}`)
	}
	h := startHone(t, func(o *Options) { o.Upstream.TokenIDs = "tokenize" }, stub)
	const calls = maxTokenizing + 6
	for i := 0; i < calls; i++ {
		if r := post(t, h.url, "/v1/chat/completions", chatReq(false), nil); r.status != 200 {
			t.Fatalf("status %d", r.status)
		}
	}
	got := waitCalls(t, h.rec, calls-maxTokenizing)
	for _, c := range got {
		if len(c.PromptIDs) != 0 {
			t.Fatalf("a call past the bound waited for /tokenize")
		}
	}
	if n := len(h.s.tokenizing); n != maxTokenizing {
		t.Fatalf("%d tokenize fallbacks in flight, want the bound %d", n, maxTokenizing)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_ = h.s.Shutdown(ctx)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Shutdown took %s with hanging fallbacks", took)
	}
	close(release)
	waitCalls(t, h.rec, calls)
}

// TestEarlyErrorsInTheAPIsShape: errors answered before routing (a missing
// key, a body over the limit) come in the shape of the API the path names.
func TestEarlyErrorsInTheAPIsShape(t *testing.T) {
	stub := newStub(t)
	h := startHone(t, func(o *Options) { o.ClientKeys, o.MaxBodyBytes = []string{"k"}, 1<<10 }, stub)
	msg := []byte(`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`)
	r := post(t, h.url, "/v1/messages", msg, nil)
	if r.status != 401 || gjson.GetBytes(r.body, "type").String() != "error" ||
		gjson.GetBytes(r.body, "error.type").String() != "authentication_error" {
		t.Fatalf("401 on /v1/messages: %d %s", r.status, r.body)
	}
	big := []byte(`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"` + strings.Repeat("a", 2<<10) + `"}]}`)
	r = post(t, h.url, "/v1/messages", big, map[string]string{"x-api-key": "k"})
	if r.status != 413 || gjson.GetBytes(r.body, "type").String() != "error" {
		t.Fatalf("413 on /v1/messages: %d %s", r.status, r.body)
	}
	wantOpenAIError(t, post(t, h.url, "/v1/responses", []byte(`{}`), nil), 401)
	bad := appendErrorJSON(nil, &apiError{400, "invalid_request_error", "x", "item type '\xff' unknown", ""})
	if !json.Valid(bad) {
		t.Fatalf("error JSON with invalid UTF-8 is not JSON: %q", bad)
	}
}

// TestTranslatedStreamBreaks: when the engine's stream breaks, a translated
// API's client gets the API's error event before the connection is cut.
func TestTranslatedStreamBreaks(t *testing.T) {
	stub := newStub(t)
	data, _ := os.ReadFile(fixture(t, "chat_stream", "upstream.sse"))
	events := splitEvents(data)
	stub.answer = func(ctx *fasthttp.RequestCtx) {
		ctx.HijackSetNoResponse(true)
		ctx.Hijack(func(c net.Conn) {
			w := bufio.NewWriter(c)
			w.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
			for _, ev := range events[:3] {
				w.WriteString(strconvHex(len(ev)) + "\r\n")
				w.Write(ev)
				w.WriteString("\r\n")
			}
			w.Flush()
			c.Close()
		})
	}
	h := startHone(t, nil, stub)
	for path, body := range map[string]string{
		"/v1/responses": `{"model":"m","input":"hi","stream":true}`,
		"/v1/messages":  `{"model":"m","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
	} {
		r := post(t, h.url, path, []byte(body), nil)
		evs := splitEvents(r.body)
		if r.status != 200 || r.readErr == nil || len(evs) == 0 || !bytes.HasPrefix(evs[len(evs)-1], []byte("event: error\n")) {
			t.Fatalf("%s: status %d err %v, last event %q: want an error event, then a broken stream", path, r.status,
				r.readErr, evs[len(evs)-1])
		}
	}
}

// TestFinalChunkKeepsUsageFields: vLLM moves system_fingerprint from the
// final chunk onto the usage chunk when usage is asked for; an agent that
// did not ask (hone did) gets every final chunk as vLLM would have sent it,
// also from an engine that ends its events with CRLF (sse-starlette's
// default, as llama-cpp-python's server sends them) and with two choices'
// final chunks held together, and a keep-alive comment between the final
// chunks and the usage chunk stays behind them. An agent that asks for logprobs and token ids
// itself gets the engine's events unchanged but for the fingerprint.
func TestFinalChunkKeepsUsageFields(t *testing.T) {
	own := []byte(`{"model":"Qwen/Qwen3-0.6B","messages":[{"role":"user","content":"Hello!"}],"stream":true,"logprobs":true,"return_token_ids":true}`)
	for _, tc := range []struct {
		sep string
		req []byte
	}{{"\n\n", chatReq(true)}, {"\r\n\r\n", chatReq(true)}, {"\n\n", own}, {"\r\n\r\n", own}} {
		sep := tc.sep
		stub := newStub(t)
		stub.answer = func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentType("text/event-stream")
			ctx.SetBodyString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"logprobs":null,"finish_reason":null,"token_ids":[5]}]}` + sep +
				`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop","stop_reason":null,"token_ids":[]}]}` + sep +
				`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":1,"delta":{"content":""},"logprobs":null,"finish_reason":"length","stop_reason":null,"token_ids":[]}]}` + sep +
				": ping" + sep +
				`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":3,"total_tokens":4,"completion_tokens":1},"system_fingerprint":"vllm-0.32.0-abc"}` + sep +
				"data: [DONE]" + sep)
		}
		h := startHone(t, nil, stub)
		r := post(t, h.url, "/v1/chat/completions", tc.req, nil)
		evs := splitEvents(r.body)
		if len(evs) != 5 || !strings.HasPrefix(string(evs[3]), ": ping") {
			t.Fatalf("%q: %d events, want the three chunks, the ping and [DONE]: %q", sep, len(evs), r.body)
		}
		for i, ev := range evs[1:3] {
			final, _ := sse.Data(ev)
			if gjson.GetBytes(final, "system_fingerprint").String() != "vllm-0.32.0-abc" || gjson.GetBytes(final, "usage").Exists() ||
				gjson.GetBytes(final, "choices.0.index").Int() != int64(i) {
				t.Fatalf("%q: final chunk %d: %q", sep, i, ev)
			}
		}
		if c := waitCalls(t, h.rec, 1)[0]; c.Usage.CompletionTokens != 1 || c.Status != capture.StatusOK {
			t.Fatalf("%q: recorded usage %+v status %s", sep, c.Usage, c.Status)
		}
	}
}

// TestEngineHoneHeadersNotCopied: hone headers in an engine's answer (an
// engine that sends them, or another hone in front of it), in any
// spelling, never reach the agent beside hone's own.
func TestEngineHoneHeadersNotCopied(t *testing.T) {
	for _, stream := range []bool{false, true} {
		stub := newStub(t)
		name, file := "chat", "upstream.json"
		if stream {
			name, file = "chat_stream", "upstream.sse"
		}
		answer := replay(t, fixture(t, name, file), 0)
		stub.answer = func(ctx *fasthttp.RequestCtx) {
			ctx.Response.Header.DisableNormalizing()
			ctx.Response.Header.Set("X-Hone-Session", "attacker-session")
			ctx.Response.Header.Set("x-hone-call", "call-evil")
			ctx.Response.Header.Set("X-HONE-POLICY", "99")
			ctx.Response.Header.Set("X-Hone-Warning", "from the engine")
			ctx.Response.Header.Set("X-Engine-Own", "kept")
			answer(ctx)
		}
		h := startHone(t, nil, stub)
		r := post(t, h.url, "/v1/chat/completions", chatReq(stream), map[string]string{"X-Hone-Session": "mine"})
		if r.status != 200 {
			t.Fatalf("stream %v: status %d", stream, r.status)
		}
		for k, want := range map[string]string{"X-Hone-Session": "mine", "X-Hone-Policy": "0", "X-Engine-Own": "kept"} {
			if got := r.header.Values(k); len(got) != 1 || got[0] != want {
				t.Errorf("stream %v: %s %q, want [%s]", stream, k, got, want)
			}
		}
		if got := r.header.Values("X-Hone-Call"); len(got) != 1 || got[0] == "call-evil" {
			t.Errorf("stream %v: X-Hone-Call %q, want hone's one", stream, got)
		}
		if got := r.header.Values("X-Hone-Warning"); len(got) != 0 {
			t.Errorf("stream %v: X-Hone-Warning %q from the engine reached the agent", stream, got)
		}
	}
}

// With log.level debug, hone logs each request it answers with an error of
// its own (why an agent fails), never a credential of it.
func TestRefusedRequestsLogged(t *testing.T) {
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := startHoneLog(t, NewMemRecorder(), func(o *Options) { o.ClientKeys = []string{"sk-right-key-0123456789"} }, log, newStub(t))
	secret := "sk-wrong-key-abcdefghijklmnop"
	post(t, h.url, "/v1/chat/completions", []byte(`{"model":`), map[string]string{"Authorization": "Bearer " + secret})
	post(t, h.url, "/v1/chat/completions", []byte(`{"model":`), map[string]string{"Authorization": "Bearer sk-right-key-0123456789"})
	out := logs.take()
	if !strings.Contains(out, "request answered with an error") || !strings.Contains(out, "status=401") ||
		!strings.Contains(out, "status=400") || !strings.Contains(out, "code=invalid_json") {
		t.Fatalf("log %q, want the 401 and the 400", out)
	}
	assertNoSecret(t, out, secret)
	assertNoSecret(t, out, "sk-right-key-0123456789")
}
