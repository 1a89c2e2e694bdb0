package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
)

// The attacks of the trust model (README, "Security"): each test is one
// hole, tried the way an agent on the data plane would.

// request sends one raw request (any method, any path spelling) on a fresh
// connection and reads the answer.
func request(t *testing.T, base, method, path string, body []byte, hdr map[string]string) *rawResponse {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var b bytes.Buffer
	host, ct := strings.TrimPrefix(base, "http://"), "application/json" // hdr may set others
	if v, ok := hdr["Host"]; ok {
		host = v
	}
	if v, ok := hdr["Content-Type"]; ok {
		ct = v
	}
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n", method, path, host, ct, len(body))
	for k, v := range hdr {
		if k != "Host" && k != "Content-Type" {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	b.WriteString("Connection: close\r\n\r\n")
	b.Write(body)
	if _, err := c.Write(b.Bytes()); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	return readRaw(t, bufio.NewReader(c))
}

// engineAdmin are the administration routes of vLLM and SGLang an agent
// might try, with spellings that a prefix or string match would miss.
var engineAdmin = []string{
	"/v1/load_lora_adapter", "/v1/unload_lora_adapter", "/v1//load_lora_adapter", "/v1/./load_lora_adapter",
	"/v1/chat/../load_lora_adapter", "/v1/chat/completions/../../load_lora_adapter", "/v1/%6coad_lora_adapter",
	"/v1/load_lora_adapter/", "/v1/load_lora_adapter?lora_name=x", "/%761/load_lora_adapter",
	"/sleep", "/wake_up", "/is_sleeping", "/reset_prefix_cache", "/collective_rpc", "/start_profile",
	"/stop_profile", "/pause", "/resume", "/scale_elastic_ep", "/server_info", "/invocations",
	"/load_lora_adapter", "/update_weights_from_disk", "/flush_cache", "/release_memory_occupation",
	"/v1/sleep", "/v1/reset_prefix_cache", "/v1/update_weights_from_disk", "/v1/anything/else",
}

// No engine administration route reaches an engine from the data plane,
// with or without client keys, in any spelling or method; the answer is
// hone's own 404 naming the allow-list's key.
func TestEngineAdminNotForwarded(t *testing.T) {
	for _, keys := range [][]string{nil, {"sk-a"}} {
		stub := newStub(t)
		h := startHone(t, func(o *Options) { o.ClientKeys = keys; o.Upstream.APIKey = "engine-key" }, stub)
		for _, path := range engineAdmin {
			for _, method := range []string{"POST", "GET", "PUT", "DELETE"} {
				before := stub.served.Load()
				r := request(t, h.url, method, path, []byte(`{"lora_name":"evil","lora_path":"/tmp/evil"}`),
					map[string]string{"Authorization": "Bearer sk-a"})
				if got := stub.served.Load(); got != before {
					t.Fatalf("keys %v: %s %s reached the engine", keys, method, path)
				}
				wantOpenAIError(t, r, 404)
				if msg := gjson.GetBytes(r.body, "error.message").String(); !strings.Contains(msg, "proxy.inference_routes") {
					t.Fatalf("%s %s: 404 does not name proxy.inference_routes: %s", method, path, msg)
				}
			}
		}
	}
}

// The inference routes of proxy.inference_routes are forwarded as they
// are; a route of hone's own with another method is 405, not forwarded.
func TestInferenceRoutesForwarded(t *testing.T) {
	stub := newStub(t)
	h := startHone(t, nil, stub)
	for _, path := range []string{"/v1/embeddings", "/tokenize", "/v1/rerank", "/v1/embeddings?x=1"} {
		before := stub.served.Load()
		r := request(t, h.url, "POST", path, []byte(`{"model":"Qwen/Qwen3-0.6B","input":"hi"}`), nil)
		if r.status != 200 || stub.served.Load() != before+1 {
			t.Fatalf("%s: status %d, served %d -> %d", path, r.status, before, stub.served.Load())
		}
	}
	for _, c := range []struct{ method, path, allow string }{
		{"GET", "/v1/chat/completions", "POST"}, {"DELETE", "/v1/responses", "POST"}, {"POST", "/v1/models", "GET"},
	} {
		before := stub.served.Load()
		r := request(t, h.url, c.method, c.path, nil, nil)
		wantOpenAIError(t, r, 405)
		if r.header.Get("Allow") != c.allow || stub.served.Load() != before {
			t.Fatalf("%s %s: Allow %q, forwarded %v", c.method, c.path, r.header.Get("Allow"), stub.served.Load() != before)
		}
	}
	// nothing forwarded without the list
	h = startHone(t, func(o *Options) { o.InferenceRoutes = nil }, stub)
	wantOpenAIError(t, request(t, h.url, "POST", "/v1/embeddings", []byte(`{}`), nil), 404)
}

func TestInferenceRoutesConfig(t *testing.T) {
	for _, c := range []struct {
		routes []string
		want   string
	}{
		{[]string{"/v1/embeddings", "/v1/custom"}, ""},
		{[]string{"/v1/load_lora_adapter"}, "engine administration"},
		{[]string{"/sleep"}, "engine administration"},
		{[]string{"/v1/chat/completions"}, "served by hone"},
		{[]string{"v1/embeddings"}, "not a plain absolute path"},
		{[]string{"/v1/../sleep"}, "not a plain absolute path"},
		{[]string{"/v1/*"}, "not a plain absolute path"},
	} {
		o := DefaultOptions()
		o.InferenceRoutes = c.routes
		err := o.Validate()
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: %v, want %q", c.routes, err, c.want)
		}
	}
}

// A data plane reachable beyond loopback without client keys lets every
// agent act on every session: refused unless the operator says agents
// trust each other.
func TestKeylessListenRefused(t *testing.T) {
	for _, c := range []struct {
		listen string
		keys   []string
		trust  bool
		ok     bool
	}{
		{"127.0.0.1:8080", nil, false, true},
		{"[::1]:8080", nil, false, true},
		{"localhost:8080", nil, false, true},
		{"0.0.0.0:8080", nil, false, false},
		{":8080", nil, false, false},
		{"10.0.0.5:8080", nil, false, false},
		{"0.0.0.0:8080", []string{"k"}, false, true},
		{"0.0.0.0:8080", nil, true, true},
	} {
		o := DefaultOptions()
		o.Listen, o.ClientKeys, o.AgentsTrustEachOther = c.listen, c.keys, c.trust
		err := o.Validate()
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), "proxy.agents_trust_each_other")) {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

// A client key no agent could present as written, or an empty one (which
// would match a request that presents an empty key), is refused at start;
// an empty key presented is no key.
func TestClientKeysConfig(t *testing.T) {
	for _, keys := range [][]string{{"sk-a", ""}, {" sk-a"}, {"sk-a "}, {"sk-\na"}, {"sk-\ta"}} {
		o := DefaultOptions()
		o.ClientKeys = keys
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "proxy.client_keys") {
			t.Errorf("client_keys %q: %v, want refused", keys, err)
		}
	}
	h, _ := startTrustHone(t, capture.DefaultOptions())
	for _, hdr := range []map[string]string{{"X-Api-Key": ""}, {"Authorization": "Bearer  "}, {"Api-Key": " "}} {
		if r := post(t, h.url, "/v1/chat/completions", chatReq(false), hdr); r.status != 401 {
			t.Errorf("an empty key in %v: status %d, want 401", hdr, r.status)
		}
	}
}

// Without a valid client key a request may bring only a small body: a
// head declaring 32 MiB is answered 401 at once, before fasthttp reserves
// (and waits for) the body; a keyed request keeps proxy.max_body_bytes.
func TestKeylessBodyBounded(t *testing.T) {
	h, _ := startTrustHone(t, capture.DefaultOptions())
	for _, path := range []string{"/v1/chat/completions", "/feedback"} { // the data-plane feedback routes too
		for _, auth := range []string{"", "Authorization: Bearer sk-wrong\r\n", "X-Api-Key: \r\n"} {
			head := "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth +
				"Content-Type: application/json\r\nContent-Length: 33554432\r\n\r\n{"
			out, took := rawExchange(t, h.url, []byte(head), 3*time.Second)
			if !bytes.HasPrefix(out, []byte("HTTP/1.1 401")) || took > 2*time.Second {
				t.Fatalf("%s, %q and a 32 MiB Content-Length: %.120q after %s, want 401 at once", path, auth, out, took)
			}
		}
	}
	big := chatReqPadded(t, 1<<20)
	r := post(t, h.url, "/v1/chat/completions", big, map[string]string{"Authorization": "Bearer sk-a"})
	if r.status != 200 {
		t.Fatalf("a keyed 1 MiB request: status %d %.200s", r.status, r.body)
	}
	r = post(t, h.url, "/v1/chat/completions", big, nil)
	if r.status != 401 {
		t.Fatalf("a keyless 1 MiB request: status %d, want 401", r.status)
	}
}

// chatReqPadded is a chat request of at least n bytes (a long user message).
func chatReqPadded(t *testing.T, n int) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"model": "Qwen/Qwen3-0.6B", "messages": []map[string]string{
		{"role": "user", "content": strings.Repeat("pad ", n/4)}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startTrustHone is hone with client keys sk-a and sk-b in front of a stub
// answering one chat completion, capturing into a store.
func startTrustHone(t *testing.T, co capture.Options) (*testHone, *capture.Store) {
	t.Helper()
	store, err := capture.Open(t.TempDir(), co, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	stub := newStub(t)
	stub.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
	return startHoneWith(t, store, func(o *Options) { o.ClientKeys = []string{"sk-a", "sk-b"} }, stub), store
}

// With client keys a session id belongs to the client that used it first:
// another client naming it is refused with 409 (it was stored under a
// suffixed id while being told the plain one, and the plain id's feedback
// went to the first client's session).
func TestSessionSquatRefused(t *testing.T) {
	h, store := startTrustHone(t, capture.DefaultOptions())
	as := func(key string) map[string]string {
		return map[string]string{"Authorization": "Bearer " + key, "X-Hone-Session": "task-42"}
	}
	if r := post(t, h.url, "/v1/chat/completions", chatReq(false), as("sk-b")); r.status != 200 || r.header.Get("X-Hone-Session") != "task-42" {
		t.Fatalf("owner's call: %d %q", r.status, r.header.Get("X-Hone-Session"))
	}
	hdr := as("sk-a")
	hdr["x-hone-reward"], hdr["x-hone-commit"] = "-5", "1"
	r := post(t, h.url, "/v1/chat/completions", chatReq(false), hdr)
	wantOpenAIError(t, r, 409)
	if gjson.GetBytes(r.body, "error.code").String() != "session_conflict" || r.header.Get("X-Hone-Session") != "" {
		t.Fatalf("squatter told %q: %s", r.header.Get("X-Hone-Session"), r.body)
	}
	// the owner keeps using it
	if r := post(t, h.url, "/v1/chat/completions", chatReq(false), as("sk-b")); r.status != 200 {
		t.Fatalf("owner's second call: %d %s", r.status, r.body)
	}
	time.Sleep(50 * time.Millisecond)
	ctx := context.Background()
	rec, calls, err := store.GetSession(ctx, "task-42")
	if err != nil || len(calls) != 2 || len(rec.Rewards) != 0 || rec.State != capture.StateOpen {
		t.Fatalf("owner's session after the squat: %+v calls %d err %v", rec, len(calls), err)
	}
	n := 0
	if err := store.Sessions(ctx, capture.ExportFilter{}, func(*capture.Session) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("%d sessions stored (%v), want the owner's only", n, err)
	}
}

// Without client keys, on loopback, agents are one party: a session may be
// continued and rewarded by any call (the trust model's sidecar row).
func TestKeylessLoopbackSharesSessions(t *testing.T) {
	store, err := capture.Open(t.TempDir(), capture.DefaultOptions(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	stub := newStub(t)
	stub.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
	h := startHoneWith(t, store, nil, stub)
	for i, hdr := range []map[string]string{{"X-Hone-Session": "shared"}, {"x-hone-session": "shared", "x-hone-reward": "1"}} {
		if r := post(t, h.url, "/v1/chat/completions", chatReq(false), hdr); r.status != 200 {
			t.Fatalf("call %d: %d", i, r.status)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if rec, calls, err := store.GetSession(context.Background(), "shared"); err != nil || len(calls) != 2 || len(rec.Rewards) != 1 {
		t.Fatalf("shared session: %+v %d %v", rec, len(calls), err)
	}
}

// A Responses API conversation is its client's: another client's
// previous_response_id is unknown to it, as OpenAI answers.
func TestResponsesConversationPerClient(t *testing.T) {
	h, _ := startTrustHone(t, capture.DefaultOptions())
	key := func(k string) map[string]string { return map[string]string{"Authorization": "Bearer " + k} }
	r := post(t, h.url, "/v1/responses", []byte(`{"model":"Qwen/Qwen3-0.6B","input":"Hello!"}`), key("sk-a"))
	id := gjson.GetBytes(r.body, "id").String()
	if r.status != 200 || id == "" {
		t.Fatalf("first response: %d %s", r.status, r.body)
	}
	follow := []byte(`{"model":"Qwen/Qwen3-0.6B","input":"And then?","previous_response_id":"` + id + `"}`)
	wantOpenAIError(t, post(t, h.url, "/v1/responses", follow, key("sk-b")), 404)
	if r := post(t, h.url, "/v1/responses", follow, key("sk-a")); r.status != 200 {
		t.Fatalf("owner's follow-up: %d %s", r.status, r.body)
	}
}

// A header reward whose combination would overflow (reward.combine: sum)
// is refused at that call: the call and its commit are stored, the agent
// is told in X-Hone-Warning, and later feedback still works.
func TestRewardOverflowRefused(t *testing.T) {
	co := capture.DefaultOptions()
	co.Reward.Combine = "sum"
	store, err := capture.Open(t.TempDir(), co, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	stub := newStub(t)
	stub.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
	h := startHoneWith(t, store, nil, stub)
	hdr := map[string]string{"X-Hone-Session": "big", "X-Hone-Reward": "1e308"}
	if r := post(t, h.url, "/v1/chat/completions", chatReq(false), hdr); r.status != 200 || len(r.header.Values("X-Hone-Warning")) != 0 {
		t.Fatalf("first reward: %d %v", r.status, r.header.Values("X-Hone-Warning"))
	}
	hdr["X-Hone-Commit"] = "1"
	r := post(t, h.url, "/v1/chat/completions", chatReq(false), hdr)
	if w := strings.Join(r.header.Values("X-Hone-Warning"), "; "); r.status != 200 || !strings.Contains(w, "reward refused") {
		t.Fatalf("overflowing reward: %d, warning %q", r.status, w)
	}
	ctx := context.Background()
	rec, calls, err := store.GetSession(ctx, "big")
	if err != nil || len(calls) != 2 || len(rec.Rewards) != 1 || rec.State == capture.StateOpen {
		t.Fatalf("after the refused reward: %+v, %d calls, %v", rec, len(calls), err)
	}
	if _, err := store.Feedback(ctx, capture.FeedbackReq{Session: "big", Reward: ptrF(1e308)}); err == nil {
		t.Fatal("overflowing feedback accepted")
	}
	if rec, err := store.Feedback(ctx, capture.FeedbackReq{Session: "big", Reward: ptrF(-1)}); err != nil || len(rec.Rewards) != 2 {
		t.Fatalf("feedback after the refusal: %+v %v", rec, err)
	}
}

func ptrF(v float64) *float64 { return &v }

// With engine.api_key the agent's credentials, cookies included, never
// reach the engine.
func TestCookieNotForwardedWithEngineKey(t *testing.T) {
	stub := newStub(t)
	stub.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
	h := startHone(t, func(o *Options) { o.Upstream.APIKey = "engine-key" }, stub)
	for _, spelling := range []string{"Cookie", "cookie", "COOKIE"} {
		if r := post(t, h.url, "/v1/chat/completions", chatReq(false), map[string]string{spelling: "sid=sk-secret-cookie"}); r.status != 200 {
			t.Fatalf("%s: %d", spelling, r.status)
		}
		_, got := stub.lastRequest()
		for k, v := range got {
			if strings.Contains(v, "sk-secret-cookie") {
				t.Fatalf("%s reached the engine as %s: %s", spelling, k, v)
			}
		}
	}
}

// /readyz without a healthy engine is a 503 typed as the service's state,
// not as the caller's error.
func TestReadyzUnavailableType(t *testing.T) {
	h := startHoneURLs(t, deadURL(t))
	ctl := httptest.NewServer(NewControl(h.s, "", h.reg))
	defer ctl.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get(ctl.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 503 {
			if typ := gjson.GetBytes(b, "error.type").String(); typ != "service_unavailable" {
				t.Fatalf("/readyz 503 typed %q: %s", typ, b)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz %d with a dead engine", resp.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestEngineURLCredentialsRefused: an engine URL with user:password@ would
// put the password in metrics labels, logs, /readyz and stored calls; it is
// refused, and the error does not repeat the password.
func TestEngineURLCredentialsRefused(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"http://hone:s3cretpw@127.0.0.1:8000", "engine.api_key"},
		{"https://token@engine.example:443/v1", "engine.api_key"},
		{"http://hone:s3cretpw@127.0.0.1:8000/%zz", "not an http(s) URL"},
		{"http://127.0.0.1:8000", ""},
	} {
		o := DefaultOptions()
		o.Upstream.Engines = []EngineOptions{{URL: c.url}}
		err := o.Validate()
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.url, err, c.want)
		}
		if err != nil && (strings.Contains(err.Error(), "s3cretpw") || strings.Contains(err.Error(), "token@")) {
			t.Errorf("%s: the error repeats the credentials: %v", c.url, err)
		}
	}
}

// A web page in a browser on hone's machine may not use a plane that has no
// credentials: a cross-site request (Origin of another site, Sec-Fetch-Site:
// cross-site), even a "simple" text/plain POST that needs no CORS
// preflight, and a page whose DNS name was rebound to 127.0.0.1 (Host not a
// loopback name) are refused 403 before anything runs. Agents' SDKs (no
// Origin) and pages served from localhost pass; with client keys or a
// control token the credentials decide.
func TestBrowserCannotUseUncredentialedPlanes(t *testing.T) {
	stub := newStub(t)
	stub.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
	trusting := startHone(t, func(o *Options) { o.AgentsTrustEachOther = true }, stub)
	if r := request(t, trusting.url, "POST", "/v1/chat/completions", chatReq(false), map[string]string{"Host": "api.example.com"}); r.status != 200 {
		t.Errorf("agents_trust_each_other, a Host a reverse proxy passed on: %d %s", r.status, r.body)
	}
	if r := request(t, trusting.url, "POST", "/v1/chat/completions", chatReq(false), map[string]string{"Origin": "http://evil.example"}); r.status != 403 {
		t.Errorf("agents_trust_each_other, a page of another site: %d %s", r.status, r.body)
	}
	for _, keyed := range []bool{false, true} {
		h := startHone(t, func(o *Options) {
			if keyed {
				o.ClientKeys = []string{"sk-a"}
			}
		}, stub)
		token := ""
		if keyed {
			token = "secret"
		}
		ctl := httptest.NewServer(NewControl(h.s, token, h.reg))
		defer ctl.Close()
		for _, tc := range []struct {
			name    string
			hdr     map[string]string
			refused bool
		}{
			{"an SDK", nil, false},
			{"a page of another site, simple POST", map[string]string{"Origin": "http://evil.example", "Content-Type": "text/plain"}, true},
			{"a sandboxed page", map[string]string{"Origin": "null"}, true},
			{"a cross-site fetch", map[string]string{"Sec-Fetch-Site": "cross-site"}, true},
			{"a page of another site, through an HTTP/2 hop (lowercase)", map[string]string{"origin": "http://evil.example"}, true},
			{"a cross-site fetch, lowercase", map[string]string{"sec-fetch-site": "cross-site"}, true},
			{"DNS rebinding", map[string]string{"Host": "rebind.evil.example:8080"}, true},
			{"a page on localhost", map[string]string{"Origin": "http://localhost:3000", "Sec-Fetch-Site": "same-site"}, false},
			{"a page on 127.0.0.1", map[string]string{"Origin": "http://127.0.0.1:5173", "Host": "localhost:8080"}, false},
			{"IPv6 loopback", map[string]string{"Origin": "http://[::1]:3000", "Host": "[::1]:8080"}, false},
		} {
			hdr := map[string]string{}
			for k, v := range tc.hdr {
				hdr[k] = v
			}
			if keyed {
				hdr["Authorization"] = "Bearer sk-a"
			}
			before := stub.served.Load()
			r := request(t, h.url, "POST", "/v1/chat/completions", chatReq(false), hdr)
			want := 200
			if tc.refused && !keyed {
				want = 403
			}
			if r.status != want || want == 403 && (stub.served.Load() != before || !strings.Contains(string(r.body), "cross_site_request")) {
				t.Errorf("keys %v, data plane, %s: %d %s; want %d", keyed, tc.name, r.status, r.body, want)
			}
			hdr = map[string]string{}
			for k, v := range tc.hdr {
				hdr[k] = v
			}
			if keyed {
				hdr["Authorization"] = "Bearer secret"
			}
			r = request(t, ctl.URL, "PUT", "/admin/policies", []byte(`{"alias":"agent","target":"agent-v9","version":9}`), hdr)
			if r.status != want {
				t.Errorf("token %v, control plane, %s: %d %s; want %d", keyed, tc.name, r.status, r.body, want)
			}
		}
	}
}

// TestCacheSaltPerKey: with client keys every call reaches the engine with
// its key's cache_salt, on every API, so no two keys share prefix-cache
// blocks (one agent cannot time another's prompts); an agent's own salt
// partitions its key's cache without naming another key's salt; without
// keys, or with proxy.cache_salt off, the agent's body keeps its own.
func TestCacheSaltPerKey(t *testing.T) {
	stub := newStub(t)
	stub.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
	salted := func(h *testHone, key, path string, body []byte) gjson.Result {
		t.Helper()
		var hdr map[string]string
		if key != "" {
			hdr = map[string]string{"Authorization": "Bearer " + key}
		}
		if r := post(t, h.url, path, body, hdr); r.status != 200 {
			t.Fatalf("%s %s: status %d: %s", key, path, r.status, r.body)
		}
		up, _ := stub.lastRequest()
		return gjson.GetBytes(up, "cache_salt")
	}
	h := startHone(t, func(o *Options) { o.ClientKeys = []string{"k1", "k2"} }, stub)
	s1, s2 := salted(h, "k1", "/v1/chat/completions", chatReq(false)), salted(h, "k2", "/v1/chat/completions", chatReq(false))
	if s1.Type != gjson.String || s2.Type != gjson.String || s1.Str == s2.Str || len(s1.Str) > 128 ||
		strings.ContainsAny(s1.Str, "@/\\\x00") || strings.Contains(s1.Str, "k1") {
		t.Fatalf("salts of two keys: %s and %s", s1.Raw, s2.Raw)
	}
	for _, c := range []struct{ path, body string }{
		{"/v1/responses", `{"model":"Qwen/Qwen3-0.6B","input":"Hello!"}`},
		{"/v1/messages", `{"model":"Qwen/Qwen3-0.6B","max_tokens":64,"messages":[{"role":"user","content":"Hello!"}]}`},
		{"/v1/chat/completions", `{"model":"Qwen/Qwen3-0.6B","messages":[{"role":"user","content":"Hello!"}],"stream":true}`},
	} {
		if got := salted(h, "k1", c.path, []byte(c.body)); got.Str != s1.Str {
			t.Errorf("%s: cache_salt %s, want the key's %s", c.path, got.Raw, s1.Raw)
		}
	}
	withSalt := func(salt string) []byte {
		return []byte(`{"model":"Qwen/Qwen3-0.6B","cache_salt":` + salt + `,"messages":[{"role":"user","content":"Hello!"}]}`)
	}
	own := salted(h, "k1", "/v1/chat/completions", withSalt(`"mine"`))
	if own.Str == s1.Str || own.Str == s2.Str || own.Str == "mine" || !strings.HasPrefix(own.Str, "hone-") {
		t.Errorf("k1 with its own salt: %s", own.Raw)
	}
	if again := salted(h, "k1", "/v1/chat/completions", withSalt(`"mine"`)); again.Str != own.Str {
		t.Errorf("the same own salt gave %s, then %s", own.Raw, again.Raw)
	}
	if stolen := salted(h, "k2", "/v1/chat/completions", withSalt(strconv.Quote(s1.Str))); stolen.Str == s1.Str {
		t.Errorf("k2 naming k1's salt got it: %s", stolen.Raw)
	}
	// the forwarded pooling routes (vLLM's prefix cache serves them too) take
	// the key's salt, an agent's own hashed with it, duplicates normalised;
	// tokenization is forwarded unsalted
	const embed = `{"model":"Qwen/Qwen3-0.6B","input":"Hello!"}`
	for _, path := range []string{"/v1/embeddings", "/v1/rerank", "/pooling", "/classify"} {
		if got := salted(h, "k1", path, []byte(embed)); got.Str != s1.Str {
			t.Errorf("%s: cache_salt %s, want the key's %s", path, got.Raw, s1.Raw)
		}
	}
	dup := `{"model":"Qwen/Qwen3-0.6B","cache_salt":"mine","input":"Hello!","cache_salt":` + strconv.Quote(s1.Str) + `}`
	if got := salted(h, "k2", "/v1/embeddings", []byte(dup)); got.Str == s1.Str || got.Str == s2.Str || !strings.HasPrefix(got.Str, "hone-") {
		t.Errorf("k2 naming k1's salt twice on /v1/embeddings: %s", got.Raw)
	}
	if up, _ := stub.lastRequest(); bytes.Count(up, []byte(`"cache_salt"`)) != 1 {
		t.Errorf("the engine's body: %s", up)
	}
	if got := salted(h, "k1", "/tokenize", []byte(`{"model":"Qwen/Qwen3-0.6B","prompt":"Hello!"}`)); got.Exists() {
		t.Errorf("/tokenize got cache_salt %s", got.Raw)
	}
	// a body hone cannot salt (Python's json reads NaN, gjson does not) is refused, not sent unsalted
	nan := []byte(`{"model":"Qwen/Qwen3-0.6B","input":"Hello!","dimensions":NaN}`)
	wantOpenAIError(t, post(t, h.url, "/v1/embeddings", nan, map[string]string{"Authorization": "Bearer k1"}), 400)
	for name, h := range map[string]*testHone{
		"no keys": startHone(t, nil, stub),
		"off":     startHone(t, func(o *Options) { o.ClientKeys, o.CacheSalt = []string{"k1"}, CacheSaltOff }, stub),
	} {
		key := map[string]string{"no keys": "", "off": "k1"}[name]
		if got := salted(h, key, "/v1/chat/completions", chatReq(false)); got.Exists() {
			t.Errorf("%s: the engine got cache_salt %s", name, got.Raw)
		}
		if got := salted(h, key, "/v1/embeddings", []byte(embed)); got.Exists() {
			t.Errorf("%s: the engine got cache_salt %s on /v1/embeddings", name, got.Raw)
		}
		if got := salted(h, key, "/v1/chat/completions", withSalt(`"mine"`)); got.Str != "mine" {
			t.Errorf("%s: the agent's cache_salt reached the engine as %s", name, got.Raw)
		}
	}
	o := DefaultOptions()
	o.CacheSalt = "tenant"
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "proxy.cache_salt") {
		t.Errorf("proxy.cache_salt: tenant: %v", err)
	}
}

// A request is forwarded with the path hone routed on (decoded, dot
// segments resolved, re-quoted), never the spelling the agent sent: an
// engine, or a proxy in front of it, that resolves a spelling differently
// cannot be steered to a route hone did not allow.
func TestForwardedPathIsRoutedPath(t *testing.T) {
	stub := newStub(t)
	var mu sync.Mutex
	var got []string
	answer := replay(t, fixture(t, "chat", "upstream.json"), 0)
	stub.answer = func(ctx *fasthttp.RequestCtx) {
		mu.Lock()
		got = append(got, string(ctx.Request.Header.RequestURI()))
		mu.Unlock()
		answer(ctx)
	}
	h := startHone(t, nil, stub)
	for _, c := range []struct{ sent, want string }{
		{"/v1/load_lora_adapter/..%2Fembeddings", "/v1/embeddings"},
		{"/v1/load_lora_adapter/../embeddings?x=1", "/v1/embeddings?x=1"},
		{"/v1//embeddings", "/v1/embeddings"},
		{"/v1/%65mbeddings", "/v1/embeddings"},
		{"/v1/sleep/%2e%2e/chat/completions", "/v1/chat/completions"},
		{"/v1/chat/./completions", "/v1/chat/completions"},
	} {
		mu.Lock()
		got = nil
		mu.Unlock()
		r := request(t, h.url, "POST", c.sent, []byte(`{"model":"Qwen/Qwen3-0.6B","input":"hi","messages":[{"role":"user","content":"hi"}]}`), nil)
		mu.Lock()
		fwd := got
		mu.Unlock()
		if r.status != 200 || len(fwd) != 1 || fwd[0] != c.want {
			t.Fatalf("%s: status %d, forwarded as %q, want %q", c.sent, r.status, fwd, c.want)
		}
	}
}

// A chain of previous_response_id calls cannot grow what hone holds and
// sends past proxy.max_body_bytes: each call brings the whole conversation
// again, so a key sending calls under the limit made the engine's request
// (and hone's copies of it) grow by one input a call.
func TestResponsesChainBounded(t *testing.T) {
	stub := newStub(t)
	stub.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
	h := startHone(t, func(o *Options) { o.ClientKeys = []string{"sk-a"}; o.MaxBodyBytes = 256 << 10 }, stub)
	auth := map[string]string{"Authorization": "Bearer sk-a"}
	call := func(input, prev string) *rawResponse {
		body := `{"model":"Qwen/Qwen3-0.6B","input":"` + input + `"`
		if prev != "" {
			body += `,"previous_response_id":"` + prev + `"`
		}
		return post(t, h.url, "/v1/responses", []byte(body+`}`), auth)
	}
	big := strings.Repeat("A", 200<<10) // under the limit alone
	r := call(big, "")
	if r.status != 200 {
		t.Fatalf("first call: %d %s", r.status, r.body)
	}
	prev := gjson.GetBytes(r.body, "id").String()
	served := stub.served.Load()
	r = call(big, prev)
	if r.status != 413 || gjson.GetBytes(r.body, "error.param").String() != "previous_response_id" || stub.served.Load() != served {
		t.Fatalf("a second 200 KiB input on a 200 KiB conversation: %d %s, forwarded %v", r.status, r.body, stub.served.Load() != served)
	}
	if r = call("and now?", prev); r.status != 200 {
		t.Fatalf("a small input on the same conversation: %d %s", r.status, r.body)
	}
	if req, _ := stub.lastRequest(); len(req) > 256<<10 {
		t.Fatalf("the engine got %d bytes", len(req))
	}
}
