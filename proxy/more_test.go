package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
)

// TestTokenizeFallback: an engine that ignores return_token_ids (vLLM <
// 0.10.2) still yields token-exact records: completion ids from
// "token_id:N" logprob strings, prompt ids from POST /tokenize.
func TestTokenizeFallback(t *testing.T) {
	stub := newStub(t)
	var tokenizeBody []byte
	stub.answer = func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/tokenize" {
			tokenizeBody = append([]byte(nil), ctx.PostBody()...)
			ctx.SetBodyString(`{"count":3,"max_model_len":40960,"tokens":[151644,872,198],"token_strs":null}`)
			return
		}
		if !gjson.GetBytes(ctx.PostBody(), "return_tokens_as_token_ids").Bool() {
			t.Errorf("tokenize mode did not ask for return_tokens_as_token_ids: %s", ctx.PostBody())
		}
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"id":"chatcmpl-old","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,` +
			`"message":{"role":"assistant","content":"Hi!"},"logprobs":{"content":[{"token":"token_id:13048","logprob":-0.25,` +
			`"bytes":[],"top_logprobs":[]},{"token":"token_id:0","logprob":-0.5,"bytes":[],"top_logprobs":[]}]},` +
			`"finish_reason":"stop","stop_reason":null}],"usage":{"prompt_tokens":3,"total_tokens":5,"completion_tokens":2}}`)
	}
	h := startHone(t, func(o *Options) { o.Upstream.TokenIDs = "tokenize" }, stub)
	req := `{"model":"m","messages":[{"role":"user","content":"Hello!"}],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}]}`
	r := post(t, h.url, "/v1/chat/completions", []byte(req), nil)
	if r.status != 200 || gjson.GetBytes(r.body, "choices.0.logprobs").Type != gjson.Null {
		t.Fatalf("status %d body %s", r.status, r.body)
	}
	c := waitCalls(t, h.rec, 1)[0]
	if fmt.Sprint(c.PromptIDs) != "[151644 872 198]" || fmt.Sprint(c.Choices[0].TokenIDs) != "[13048 0]" ||
		fmt.Sprint(c.Choices[0].Logprobs) != "[-0.25 -0.5]" {
		t.Fatalf("recorded prompt %v completion %v logprobs %v", c.PromptIDs, c.Choices[0].TokenIDs, c.Choices[0].Logprobs)
	}
	g := gjson.ParseBytes(tokenizeBody)
	if g.Get("messages.0.content").String() != "Hello!" || !g.Get("tools").IsArray() || !g.Get("add_generation_prompt").Bool() {
		t.Fatalf("tokenize request %s", tokenizeBody)
	}
}

// TestSessionAffinity: calls of one session stick to one engine; calls
// without a session spread over both.
func TestSessionAffinity(t *testing.T) {
	a, b := newStub(t), newStub(t)
	a.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
	b.answer = a.answer
	// no health probes during the test: one timing out on a loaded machine
	// (make test runs packages in parallel) took an engine out of the spread
	h := startHone(t, func(o *Options) { o.Upstream.Health.Interval = time.Hour }, a, b)
	for i := 0; i < 8; i++ {
		post(t, h.url, "/v1/chat/completions", chatReq(false), map[string]string{"X-Hone-Session": "sticky"})
	}
	if na, nb := a.served.Load(), b.served.Load(); na != 0 && nb != 0 {
		t.Fatalf("one session went to both engines: %d and %d", na, nb)
	}
	a.served.Store(0)
	b.served.Store(0)
	// each call without a session header gets a new session id (the memory
	// recorder's), placed by its hash: all 40 on one engine has odds 2^-39
	// (8 calls failed one run in 128)
	for i := 0; i < 40; i++ {
		post(t, h.url, "/v1/chat/completions", chatReq(false), nil)
	}
	if a.served.Load() == 0 || b.served.Load() == 0 {
		t.Fatalf("calls without session not spread: %d and %d", a.served.Load(), b.served.Load())
	}
}

func TestControlPlane(t *testing.T) {
	stub := newStub(t)
	stub.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
	h := startHone(t, func(o *Options) {
		o.Aliases = []AliasConfig{{Name: "agent", Target: "Qwen/Qwen3-0.6B"}}
	}, stub)
	ctl := httptest.NewServer(NewControl(h.s, "secret", h.reg))
	defer ctl.Close()
	do := func(method, path, token, body string) (int, string) {
		req, _ := http.NewRequest(method, ctl.URL+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, _ := do("GET", "/healthz", "", ""); st != 200 {
		t.Errorf("healthz %d", st)
	}
	if st, _ := do("GET", "/readyz", "", ""); st != 200 {
		t.Errorf("readyz %d", st)
	}
	if st, _ := do("GET", "/admin/policies", "", ""); st != 401 {
		t.Errorf("admin without token: %d", st)
	}
	if st, b := do("PUT", "/admin/policies", "secret", `{"alias":"agent","target":"agent-v1","version":1}`); st != 200 {
		t.Fatalf("swap: %d %s", st, b)
	}
	if st, _ := do("PUT", "/admin/policies", "secret", `{"alias":"agent"}`); st != 400 {
		t.Errorf("swap without target: %d", st)
	}
	// a body that does not decode is named in the caller's words, never Go's types
	for _, tc := range []struct{ body, msg, param string }{
		{`{"alias":"agent","target":"t","version":"2"}`, "bad policy: version must be an integer, not a JSON string", "version"},
		{`{"alias":"agent","target":"t","verison":2}`, `bad policy: unknown field "verison"`, "verison"},
		{`{"alias":"agent",`, "bad policy: the body is not valid JSON (it ends early)", ""},
		{`{"alias":}`, "bad policy: the body is not valid JSON (at byte 10)", ""},
		{``, "bad policy: the body is empty", ""},
	} {
		st, b := do("PUT", "/admin/policies", "secret", tc.body)
		if st != 400 || gjson.Get(b, "error.message").String() != tc.msg || gjson.Get(b, "error.param").String() != tc.param ||
			strings.Contains(b, "Go struct") || strings.Contains(b, "int64") {
			t.Errorf("%s: %d %s; want 400 %q param %q", tc.body, st, b, tc.msg, tc.param)
		}
	}
	_, b := do("GET", "/admin/policies", "secret", "")
	if gjson.Get(b, "policies.0.version").Int() != 1 || gjson.Get(b, "policies.0.history.#").Int() != 2 {
		t.Errorf("policies %s", b)
	}
	r := post(t, h.url, "/v1/chat/completions", []byte(`{"model":"agent","messages":[]}`), nil)
	body, _ := stub.lastRequest()
	if r.header.Get("X-Hone-Policy") != "1" || gjson.GetBytes(body, "model").String() != "agent-v1" {
		t.Errorf("alias not applied: policy %q, upstream model %s", r.header.Get("X-Hone-Policy"), gjson.GetBytes(body, "model"))
	}
	st, m := do("GET", "/metrics", "secret", "")
	if st != 200 || !strings.Contains(m, "hone_requests_total") {
		t.Errorf("metrics %d", st)
	}
	// /v1/models lists the engines' models and the alias, not the adapter
	// of a trained version (the engine lists it; agents call the alias)
	stub.setModels(`{"object":"list","data":[{"id":"Qwen/Qwen3-0.6B","object":"model","parent":null},` +
		`{"id":"agent-v1","object":"model","parent":"Qwen/Qwen3-0.6B"}]}`)
	resp, err := http.Get(h.url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	ids := gjson.GetBytes(mb, "data.#.id").String()
	if !strings.Contains(ids, "Qwen/Qwen3-0.6B") || !strings.Contains(ids, `"agent"`) || strings.Contains(ids, "agent-v1") {
		t.Errorf("models %s", mb)
	}
}

// TestGracefulShutdown: a stream in flight when shutdown starts completes.
func TestGracefulShutdown(t *testing.T) {
	stub := newStub(t)
	stub.answer = replay(t, fixture(t, "chat_stream", "upstream.sse"), 40*time.Millisecond)
	h := startHone(t, nil, stub)
	done := make(chan *rawResponse)
	go func() { done <- post(t, h.url, "/v1/chat/completions", chatReq(true), nil) }()
	time.Sleep(60 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go h.s.Shutdown(ctx) //nolint:errcheck
	r := <-done
	if r.status != 200 || r.readErr != nil || !strings.HasSuffix(string(r.body), "data: [DONE]\n\n") {
		t.Fatalf("stream cut by shutdown: %d %v %q", r.status, r.readErr, r.body)
	}
	waitCalls(t, h.rec, 1)
}

// With no policy, /admin/policies lists none as an empty array, not null.
func TestNoPoliciesListed(t *testing.T) {
	h := startHone(t, nil, newStub(t))
	ctl := httptest.NewServer(NewControl(h.s, "", h.reg))
	defer ctl.Close()
	resp, err := http.Get(ctl.URL + "/admin/policies")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || strings.TrimSpace(string(b)) != `{"policies":[]}` {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
}
