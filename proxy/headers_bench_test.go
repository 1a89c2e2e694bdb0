package proxy

import (
	"testing"

	"github.com/valyala/fasthttp"
)

// BenchmarkUpstreamHeaders is the header work of one call: the agent's
// request headers as the openai Python SDK sends them copied to the
// engine's request (less hop-by-hop, hone's and Accept-Encoding, plus
// X-Request-Id), and vLLM's response headers copied to the agent's.
func BenchmarkUpstreamHeaders(b *testing.B) {
	s := &Server{opts: DefaultOptions()}
	s.dropUp = upstreamDrops(&s.opts)
	s.ownDown = []string{s.opts.Headers.Session, s.opts.Headers.Call, s.opts.Headers.Policy, warningHeader}
	var in fasthttp.Request
	in.Header.DisableNormalizing()
	for _, kv := range [][2]string{
		{"Host", "127.0.0.1:8080"}, {"Accept-Encoding", "gzip, deflate"}, {"Connection", "keep-alive"},
		{"Accept", "application/json"}, {"Content-Type", "application/json"}, {"User-Agent", "OpenAI/Python 2.8.1"},
		{"X-Stainless-Lang", "python"}, {"X-Stainless-Package-Version", "2.8.1"}, {"X-Stainless-OS", "Linux"},
		{"X-Stainless-Arch", "x64"}, {"X-Stainless-Runtime", "CPython"}, {"X-Stainless-Runtime-Version", "3.12.3"},
		{"Authorization", "Bearer sk-test"}, {"X-Stainless-Async", "false"}, {"x-stainless-retry-count", "0"},
		{"x-stainless-read-timeout", "600"}, {"X-Hone-Task", "t1"}, {"Content-Length", "120"},
	} {
		in.Header.Set(kv[0], kv[1])
	}
	var up fasthttp.Response
	for _, kv := range [][2]string{{"date", "Fri, 27 Nov 2026 22:00:00 GMT"}, {"server", "uvicorn"},
		{"content-length", "5770"}, {"content-type", "application/json"}} {
		up.Header.Set(kv[0], kv[1])
	}
	e := &engine{url: "http://127.0.0.1:8000", host: "127.0.0.1:8000"}
	body := []byte(`{}`)
	uri := []byte("/v1/chat/completions")
	var out fasthttp.ResponseHeader
	b.ReportAllocs()
	for b.Loop() {
		req := fasthttp.AcquireRequest()
		s.buildUpstreamRequest(req, &in, e, "call-01a21f19-7312-7500-8e81-21256172d0a2", body, uri)
		fasthttp.ReleaseRequest(req)
		out.Reset()
		copyResponseHeaders(&out, &up.Header, s.ownDown)
	}
}
