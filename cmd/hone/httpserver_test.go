package main

import (
	"net/http"
	"testing"
)

// The control plane's and the engines' servers cut off idle connections and
// slow heads, and put no deadline on a whole exchange (whose expiry would
// cancel a long experience read or an engine stream).
func TestHTTPServerTimeouts(t *testing.T) {
	s := newHTTPServer(http.NotFoundHandler(), 0)
	if s.IdleTimeout <= 0 || s.ReadHeaderTimeout <= 0 || s.MaxHeaderBytes <= 0 {
		t.Fatalf("idle %s, head %s, max head %d: an idle or slow client keeps its socket", s.IdleTimeout,
			s.ReadHeaderTimeout, s.MaxHeaderBytes)
	}
	if big := newHTTPServer(http.NotFoundHandler(), 1<<20); big.MaxHeaderBytes != 1<<20 {
		t.Fatalf("an engine behind hone with max_header_bytes 1 MiB takes heads of %d bytes", big.MaxHeaderBytes)
	}
	if s.ReadTimeout != 0 || s.WriteTimeout != 0 {
		t.Fatalf("read %s, write %s: would cut long answers", s.ReadTimeout, s.WriteTimeout)
	}
}
