package proxy

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// proxy.cors_origins lets a web page of a listed origin call the data plane
// from a browser: its preflight is answered by hone (never the engine), its
// answers, errors and streams included, carry its origin and the hone
// headers it may read; a page of another origin gets no CORS headers and,
// without client keys, 403. With "*" any origin is allowed, and client keys
// still decide.
func TestCORS(t *testing.T) {
	stub := newStub(t)
	chat, stream := replay(t, fixture(t, "chat", "upstream.json"), 0), replay(t, fixture(t, "chat_stream", "upstream.sse"), 0)
	stub.answer = chat
	h := startHone(t, func(o *Options) { o.CORSOrigins = []string{"http://localhost:3000", "https://app.example.com"} }, stub)
	const page = "https://app.example.com"
	r := request(t, h.url, "OPTIONS", "/v1/chat/completions", nil, map[string]string{"Origin": page,
		"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type, authorization, x-hone-session"})
	if r.status != 204 || r.header.Get("Access-Control-Allow-Origin") != page ||
		r.header.Get("Access-Control-Allow-Headers") != "content-type, authorization, x-hone-session" ||
		!strings.Contains(r.header.Get("Access-Control-Allow-Methods"), "POST") || r.header.Get("Vary") != "Origin" {
		t.Errorf("preflight: %d %v", r.status, r.header)
	}
	lower := request(t, h.url, "OPTIONS", "/v1/chat/completions", nil, map[string]string{"origin": page,
		"access-control-request-method": "POST", "access-control-request-headers": "content-type"})
	if lower.status != 204 || lower.header.Get("Access-Control-Allow-Origin") != page ||
		lower.header.Get("Access-Control-Allow-Headers") != "content-type" {
		t.Errorf("preflight in lowercase (an HTTP/2 hop): %d %v", lower.status, lower.header)
	}
	if n := stub.served.Load(); n != 0 {
		t.Errorf("the preflight reached the engine (%d)", n)
	}
	for _, tc := range []struct {
		name   string
		body   []byte
		status int
	}{
		{"whole", chatReq(false), 200},
		{"stream", chatReq(true), 200},
		{"error", []byte(`{"model":`), 400},
	} {
		if tc.name == "stream" {
			stub.answer = stream
		} else {
			stub.answer = chat
		}
		r = request(t, h.url, "POST", "/v1/chat/completions", tc.body, map[string]string{"Origin": page, "Sec-Fetch-Site": "cross-site",
			"X-Hone-Session": "cors-" + tc.name})
		if r.status != tc.status || r.header.Get("Access-Control-Allow-Origin") != page ||
			!strings.Contains(r.header.Get("Access-Control-Expose-Headers"), "X-Hone-Session") {
			t.Errorf("%s from an allowed origin: %d %v %s", tc.name, r.status, r.header, r.body)
		}
	}
	c, err := net.Dial("tcp", strings.TrimPrefix(h.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nOrigin: %s\r\nContent-Type: application/json\r\n"+
		"Content-Length: %d\r\n\r\n", page, 64<<20)
	if big := readRaw(t, bufio.NewReader(c)); big.status != 413 || big.header.Get("Access-Control-Allow-Origin") != page {
		t.Errorf("an oversized body from an allowed origin: %d %v", big.status, big.header)
	}
	r = request(t, h.url, "POST", "/v1/chat/completions", chatReq(false), map[string]string{"Origin": "http://evil.example"})
	if r.status != 403 || r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("another origin: %d %v", r.status, r.header)
	}
	r = request(t, h.url, "OPTIONS", "/v1/chat/completions", nil, map[string]string{"Origin": "http://evil.example",
		"Access-Control-Request-Method": "POST"})
	if r.status == 204 || r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("another origin's preflight: %d %v", r.status, r.header)
	}

	keyed := startHone(t, func(o *Options) { o.CORSOrigins, o.ClientKeys = []string{"*"}, []string{"sk-a"} }, stub)
	for key, want := range map[string]int{"Bearer sk-a": 200, "": 401} {
		hdr := map[string]string{"Origin": "http://any.example"}
		if key != "" {
			hdr["Authorization"] = key
		}
		r = request(t, keyed.url, "POST", "/v1/chat/completions", chatReq(false), hdr)
		if r.status != want || r.header.Get("Access-Control-Allow-Origin") != "http://any.example" {
			t.Errorf("* with keys, key %q: %d %v", key, r.status, r.header)
		}
	}
}

// The engine's own CORS answer (vLLM's default is Access-Control-Allow-Origin:
// *) never reaches the agent, nor does the page's Origin reach the engine:
// only the origins hone lets in get CORS headers, with one Vary: Origin.
func TestEngineCORSHeadersDropped(t *testing.T) {
	stub := newStub(t)
	chat := replay(t, fixture(t, "chat", "upstream.json"), 0)
	stub.answer = func(ctx *fasthttp.RequestCtx) {
		chat(ctx)
		ctx.Response.Header.Set("Access-Control-Allow-Origin", "*")
		ctx.Response.Header.Set("access-control-allow-credentials", "true")
		ctx.Response.Header.Set("Vary", "Origin")
	}
	h := startHone(t, func(o *Options) {
		o.CORSOrigins, o.ClientKeys = []string{"http://localhost:3000"}, []string{"sk-a"}
		o.Headers.Session = "X-Agent-Session"
	}, stub)
	for origin, want := range map[string]string{"http://evil.example": "", "http://localhost:3000": "http://localhost:3000"} {
		r := request(t, h.url, "POST", "/v1/chat/completions", chatReq(false), map[string]string{"Origin": origin, "Authorization": "Bearer sk-a"})
		if r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != want || r.header.Get("Access-Control-Allow-Credentials") != "" {
			t.Errorf("origin %s: %d %v; want Access-Control-Allow-Origin %q", origin, r.status, r.header, want)
		}
		if want != "" && (len(r.header.Values("Vary")) != 1 || !strings.Contains(r.header.Get("Access-Control-Expose-Headers"), "X-Agent-Session")) {
			t.Errorf("origin %s: Vary %q, exposed %q", origin, r.header.Values("Vary"), r.header.Get("Access-Control-Expose-Headers"))
		}
		if _, hdr := stub.lastRequest(); hdr["Origin"] != "" || hdr["origin"] != "" {
			t.Errorf("origin %s reached the engine", origin)
		}
	}
}

func TestCheckCORSOrigins(t *testing.T) {
	for o, ok := range map[string]bool{"*": true, "http://localhost:3000": true, "https://app.example.com": true,
		"https://[::1]:8443": true, "localhost:3000": false, "http://x.example/path": false, "ftp://x.example": false,
		"http://": false, "http://u:p@x.example": false, "https://x.example?q=1": false} {
		if err := checkCORSOrigins([]string{o}); (err == nil) != ok {
			t.Errorf("%q: %v, want ok %v", o, err, ok)
		}
	}
}
