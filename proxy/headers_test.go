package proxy

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
)

// spellings of a header name as clients send them: canonical (Go, Python),
// lowercase (fetch, HTTP/2 hops), uppercase and mixed.
func spellings(name string) map[string]string {
	mixed := []byte(strings.ToLower(name))
	for i := 0; i < len(mixed); i += 2 {
		mixed[i] = strings.ToUpper(string(mixed[i]))[0]
	}
	return map[string]string{"canonical": name, "lower": strings.ToLower(name), "upper": strings.ToUpper(name),
		"mixed": string(mixed)}
}

func TestHoneHeadersAnyCase(t *testing.T) {
	stub := newStub(t)
	stub.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
	h := startHone(t, nil, stub)
	n := DefaultOptions().Headers
	for form := range spellings("x") {
		t.Run(form, func(t *testing.T) {
			sp := func(name string) string { return spellings(name)[form] }
			hdr := map[string]string{
				sp(n.Session): "sess-" + form, sp(n.Task): "task-" + form, sp(n.Train): "1", sp(n.Tags): "a,b",
				sp(n.Reward): "0.5", sp(n.Commit): "1", sp("X-Custom"): "kept",
			}
			before := len(h.rec.Calls())
			r := post(t, h.url, "/v1/chat/completions", chatReq(false), hdr)
			if r.status != 200 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if got := r.header.Get("X-Hone-Session"); got != "sess-"+form {
				t.Fatalf("X-Hone-Session answered %q", got)
			}
			calls := waitCalls(t, h.rec, before+1)
			c := calls[len(calls)-1]
			hh := c.Hone
			if c.Session != "sess-"+form || hh.Task != "task-"+form || hh.Train != 1 || !hh.Commit ||
				hh.Reward == nil || *hh.Reward != 0.5 || strings.Join(hh.Tags, ",") != "a,b" {
				t.Fatalf("read %+v (session %q)", hh, c.Session)
			}
			_, up := stub.lastRequest()
			for k, v := range up {
				if strings.HasPrefix(strings.ToLower(k), "x-hone-") {
					t.Fatalf("%s: %s reached the engine", k, v)
				}
			}
			if up[sp("X-Custom")] != "kept" {
				t.Fatalf("a header of the agent did not reach the engine as sent: %v", up)
			}
		})
	}
}

func TestCredentialsNeverReachEngine(t *testing.T) {
	stub := newStub(t)
	stub.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
	h := startHone(t, func(o *Options) { o.Upstream.APIKey = "engine-key" }, stub)
	hdr := map[string]string{"Authorization": "Bearer agent-1", "authorization": "Bearer agent-2",
		"x-api-key": "agent-3", "API-KEY": "agent-4", "proxy-authorization": "Basic agent-5",
		"accept-encoding": "gzip", "Accept-Encoding": "br"}
	for _, path := range []string{"/v1/chat/completions", "/v1/embeddings"} {
		post(t, h.url, path, chatReq(false), hdr)
		_, up := stub.lastRequest()
		var creds []string
		for k, v := range up {
			lk := strings.ToLower(k)
			if strings.Contains(lk, "auth") || strings.Contains(lk, "key") || lk == "accept-encoding" {
				creds = append(creds, k+": "+v)
			}
		}
		if len(creds) != 1 || creds[0] != "Authorization: Bearer engine-key" {
			t.Fatalf("%s: the engine got %v, want only hone's key", path, creds)
		}
	}
}

func TestClientKeysAnySpelling(t *testing.T) {
	stub := newStub(t)
	stub.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
	h := startHone(t, func(o *Options) { o.ClientKeys = []string{"k1"} }, stub)
	for _, hdr := range []map[string]string{
		{"authorization": "Bearer k1"}, {"AUTHORIZATION": "bearer k1"}, {"Authorization": "BEARER k1"},
		{"x-api-key": "k1"}, {"Api-Key": "k1"}, {"authorization": "Bearer wrong", "x-api-key": "k1"},
	} {
		if r := post(t, h.url, "/v1/chat/completions", chatReq(false), hdr); r.status != 200 {
			t.Fatalf("%v: status %d", hdr, r.status)
		}
		_, up := stub.lastRequest() // a key hone checked is not the engine's (no engine.api_key here)
		for k, v := range up {
			if lk := strings.ToLower(k); strings.Contains(lk, "auth") || strings.Contains(lk, "key") {
				t.Fatalf("%v: the engine got %s: %s", hdr, k, v)
			}
		}
	}
	for _, hdr := range []map[string]string{{"authorization": "k1"}, {"authorization": "Bearer k2"}, {"x-api-key": "k2"}} {
		wantOpenAIError(t, post(t, h.url, "/v1/chat/completions", chatReq(false), hdr), 401)
	}
}

func TestHeaderSpellingsTogether(t *testing.T) {
	stub := newStub(t)
	stub.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
	h := startHone(t, nil, stub)
	cases := []struct {
		name   string
		hdr    map[string]string
		status int
	}{
		{"same session twice", map[string]string{"X-Hone-Session": "s1", "x-hone-session": "s1"}, 200},
		{"conflicting session", map[string]string{"X-Hone-Session": "s1", "x-hone-session": "s2"}, 400},
		{"conflicting reward", map[string]string{"X-Hone-Reward": "1", "x-hone-reward": "0"}, 400},
		{"conflicting task", map[string]string{"X-Hone-Task": "a", "x-hone-task": "b"}, 400},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := post(t, h.url, "/v1/chat/completions", chatReq(false), tc.hdr)
			if tc.status != 200 {
				wantOpenAIError(t, r, tc.status)
				if msg := gjson.GetBytes(r.body, "error.message").String(); !strings.Contains(strings.ToLower(msg), "x-hone-") {
					t.Fatalf("error does not name the header: %s", msg)
				}
				return
			}
			if r.status != 200 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
		})
	}
}

func TestInvalidHoneHeadersIgnored(t *testing.T) {
	stub := newStub(t)
	stub.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
	h := startHone(t, nil, stub)
	for _, v := range []string{"NaN", "Inf", "0x1p-2", "1_0", "lots", "1e999"} {
		before := len(h.rec.Calls())
		r := post(t, h.url, "/v1/chat/completions", chatReq(false), map[string]string{"x-hone-reward": v, "X-Hone-Train": "maybe"})
		if r.status != 200 {
			t.Fatalf("reward %q: status %d: %s", v, r.status, r.body)
		}
		if w := r.header.Values("X-Hone-Warning"); len(w) != 2 {
			t.Fatalf("reward %q: warnings %q", v, w)
		}
		calls := waitCalls(t, h.rec, before+1)
		if c := calls[len(calls)-1]; c.Hone.Reward != nil || c.Hone.Train != -1 {
			t.Fatalf("reward %q stored as %v, train %d", v, c.Hone.Reward, c.Hone.Train)
		}
	}
	strict := startHone(t, func(o *Options) { o.StrictHeaders = true }, stub)
	wantOpenAIError(t, post(t, strict.url, "/v1/chat/completions", chatReq(false), map[string]string{"X-Hone-Reward": "NaN"}), 400)
}

// TestRequestIDToEngine: a call reaches the engine with its hone call id as
// X-Request-Id, which vLLM names its answer after; an X-Request-Id the agent
// sent, in any spelling, goes as sent and alone.
func TestRequestIDToEngine(t *testing.T) {
	stub := newStub(t)
	stub.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
	h := startHone(t, nil, stub)
	r := post(t, h.url, "/v1/chat/completions", chatReq(false), nil)
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	calls := waitCalls(t, h.rec, 1)
	_, up := stub.lastRequest()
	if got := up[requestIDHeader]; got != calls[0].ID || !strings.HasPrefix(got, "call-") {
		t.Fatalf("X-Request-Id %q reached the engine, want the call's id %q", got, calls[0].ID)
	}
	for form, name := range spellings(requestIDHeader) {
		post(t, h.url, "/v1/chat/completions", chatReq(false), map[string]string{name: "agent-" + form})
		_, up := stub.lastRequest()
		var got []string
		for k, v := range up {
			if strings.EqualFold(k, requestIDHeader) {
				got = append(got, k+": "+v)
			}
		}
		if len(got) != 1 || got[0] != name+": agent-"+form {
			t.Fatalf("%s: the engine got %q, want only the agent's %s: agent-%s", form, got, name, form)
		}
	}
}

// TestHopHeadersNeverReachEngine: hop-by-hop headers (and Accept-Encoding)
// stay between the agent and hone in every spelling; the agent's other
// headers go on as sent.
func TestHopHeadersNeverReachEngine(t *testing.T) {
	stub := newStub(t)
	stub.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
	h := startHone(t, nil, stub)
	hop := map[string]string{"Keep-Alive": "timeout=5", "Proxy-Connection": "keep-alive", "Te": "trailers",
		"Trailer": "X-Checksum", "Upgrade": "h2c", "Accept-Encoding": "gzip", "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"}
	for form := range spellings("x") {
		hdr := map[string]string{spellings("X-Custom")[form]: "kept"}
		for name, v := range hop {
			hdr[spellings(name)[form]] = v
		}
		if r := post(t, h.url, "/v1/chat/completions", chatReq(false), hdr); r.status != 200 {
			t.Fatalf("%s: status %d: %s", form, r.status, r.body)
		}
		_, up := stub.lastRequest()
		for k, v := range up {
			for name := range hop {
				if strings.EqualFold(k, name) {
					t.Errorf("%s: %s: %s reached the engine", form, k, v)
				}
			}
		}
		if up[spellings("X-Custom")[form]] != "kept" {
			t.Errorf("%s: the agent's own header did not reach the engine as sent: %v", form, up)
		}
	}
	// a header the Connection header names is hop-by-hop too
	hdr := map[string]string{"Connection": "keep-alive, " + spellings("X-Hop-Only")["lower"], "X-Hop-Only": "1", "X-Custom": "kept"}
	if r := post(t, h.url, "/v1/chat/completions", chatReq(false), hdr); r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	if _, up := stub.lastRequest(); up["X-Hop-Only"] != "" || up["X-Custom"] != "kept" {
		t.Errorf("a header Connection names reached the engine (or the agent's own did not): %v", up)
	}
}

// An empty credential header presents no key.
func TestEmptyKeyPresentsNone(t *testing.T) {
	presented := func(h *fasthttp.RequestHeader) []string {
		var keys []string
		for k, v := range h.All() {
			if key := presentedKey(k, v); len(key) > 0 {
				keys = append(keys, string(key))
			}
		}
		return keys
	}
	var h fasthttp.RequestHeader
	for k, v := range map[string]string{"X-Api-Key": "", "Authorization": "Bearer  ", "Api-Key": " "} {
		h.Set(k, v)
	}
	if keys := presented(&h); len(keys) != 0 {
		t.Fatalf("empty credential headers present keys %q", keys)
	}
	h.Set("X-Api-Key", " k ")
	if keys := presented(&h); len(keys) != 1 || keys[0] != "k" {
		t.Fatalf("X-Api-Key: \" k \" presents %q, want [k]", keys)
	}
}
