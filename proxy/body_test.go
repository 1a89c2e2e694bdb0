package proxy

import (
	"bufio"
	"strings"
	"testing"

	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"
)

// TestReadBody reads answers streamed from an engine over TCP, as the data
// plane's clients do, into pooled buffers that arrive empty or with room:
// with a Content-Length the buffer grows once, to the body's size (rounded
// up to an allocation size class), instead of doubling from 64 bytes and
// copying the body at each step; chunked bodies still read whole.
func TestReadBody(t *testing.T) {
	body := strings.Repeat("x", 5898)
	engine := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		switch string(ctx.Path()) {
		case "/chunked":
			ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
				_, _ = w.WriteString("hello")
				_ = w.Flush()
				_, _ = w.WriteString(" world")
			})
		case "/empty":
		default:
			ctx.SetBodyString(body)
		}
	}}
	ln := listenLocal(t)
	go engine.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { _ = engine.Shutdown() })
	hc := &fasthttp.HostClient{Addr: ln.Addr().String(), StreamResponseBody: true}

	for _, tc := range []struct {
		name, path, want string
		prefill, maxCap  int
	}{
		{"length", "/", body, 0, 6144}, // Go's size class above 5899; doubling from 64 bytes ends at 8192
		{"length, pooled buffer with room", "/", body, 8192, 8192},
		{"empty", "/empty", "", 0, 64},
		{"chunked", "/chunked", "hello world", 0, 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			req.SetRequestURI("http://" + hc.Addr + tc.path)
			if err := hc.Do(req, resp); err != nil {
				t.Fatal(err)
			}
			buf := &bytebufferpool.ByteBuffer{B: make([]byte, 0, tc.prefill)}
			err := readBody(buf, resp)
			fasthttp.ReleaseResponse(resp)
			if err != nil {
				t.Fatal(err)
			}
			if string(buf.B) != tc.want {
				t.Fatalf("read %d bytes %.20q, want %d bytes %.20q", len(buf.B), buf.B, len(tc.want), tc.want)
			}
			if cap(buf.B) > tc.maxCap {
				t.Fatalf("buffer capacity %d after a %d-byte body, want at most %d", cap(buf.B), len(buf.B), tc.maxCap)
			}
		})
	}
}
