package proxy

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestControlBodyBounded: an engine that answers a control request (health,
// /v1/models, /tokenize) with more than maxControlBody, announced or
// chunked without end, gets an error, not a read that takes hone's memory.
func TestControlBodyBounded(t *testing.T) {
	for _, tc := range []struct {
		name  string
		serve func(w *bufio.Writer)
	}{
		{"announced", func(w *bufio.Writer) {
			w.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
				strconv.Itoa(maxControlBody+1) + "\r\n\r\n{")
		}},
		{"chunked", func(w *bufio.Writer) {
			w.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
			chunk := make([]byte, 1<<20)
			for i := 0; i <= maxControlBody>>20; i++ {
				w.WriteString(strconv.FormatInt(int64(len(chunk)), 16) + "\r\n")
				w.Write(chunk)
				w.WriteString("\r\n")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					l, err := r.ReadString('\n')
					if err != nil || l == "\r\n" {
						break
					}
				}
				w := bufio.NewWriter(c)
				tc.serve(w)
				w.Flush()
			}()
			o := &Options{}
			o.Upstream.Health.Timeout = 10 * time.Second
			o.Upstream.Engines = []EngineOptions{{URL: "http://" + ln.Addr().String()}}
			p, err := newPool(o, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			_, body, err := p.get(context.Background(), p.engines[0], "/v1/models")
			if !errors.Is(err, fasthttp.ErrBodyTooLarge) {
				t.Fatalf("got %d bytes and error %v, want ErrBodyTooLarge", len(body), err)
			}
		})
	}
}
