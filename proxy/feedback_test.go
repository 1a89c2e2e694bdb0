package proxy

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hone-rl/hone/capture"
)

// startFeedbackHone serves the data plane on addr with a mounted /feedback
// that answers with the owner it was called for.
func startFeedbackHone(t *testing.T, addr string, mutate func(*Options)) string {
	t.Helper()
	o := DefaultOptions()
	o.Upstream.Engines = []EngineOptions{{URL: "http://127.0.0.1:1"}}
	mutate(&o)
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	s, err := New(o, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Mount("/feedback", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("owner=" + capture.OwnerFrom(r.Context()) + " path=" + r.URL.EscapedPath()))
	}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	go s.Serve(ln) //nolint:errcheck
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String()
}

func TestDataPlaneFeedbackModes(t *testing.T) {
	keys := func(o *Options) { o.ClientKeys = []string{"tenant-a", "tenant-b"} }
	cases := []struct {
		name   string
		addr   string
		mutate func(*Options)
		hdr    map[string]string
		status int
		owner  string // "" no owner; "key" an owner derived from a key
	}{
		{"off by default", "127.0.0.1:0", func(*Options) {}, nil, 404, ""},
		{"off even with a key", "127.0.0.1:0", keys, map[string]string{"Authorization": "Bearer tenant-a"}, 404, ""},
		{"loopback from loopback", "127.0.0.1:0", func(o *Options) { o.DataPlaneFeedback = FeedbackLoopback }, nil, 200, ""},
		{"loopback with keys needs one", "127.0.0.1:0", func(o *Options) { keys(o); o.DataPlaneFeedback = FeedbackLoopback },
			nil, 401, ""},
		{"loopback with a key acts for it", "127.0.0.1:0", func(o *Options) { keys(o); o.DataPlaneFeedback = FeedbackLoopback },
			map[string]string{"authorization": "Bearer tenant-a"}, 200, "key"},
		{"keys without a key", "127.0.0.1:0", func(o *Options) { keys(o); o.DataPlaneFeedback = FeedbackKeys }, nil, 401, ""},
		{"keys with a wrong key", "127.0.0.1:0", func(o *Options) { keys(o); o.DataPlaneFeedback = FeedbackKeys },
			map[string]string{"Authorization": "Bearer nobody"}, 401, ""},
		{"keys with a key", "127.0.0.1:0", func(o *Options) { keys(o); o.DataPlaneFeedback = FeedbackKeys },
			map[string]string{"x-api-key": "tenant-b"}, 200, "key"},
		{"loopback refuses others", "192.0.2.2:0", func(o *Options) { o.DataPlaneFeedback = FeedbackLoopback }, nil, 403, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := startFeedbackHone(t, tc.addr, tc.mutate)
			r := post(t, url, "/feedback", []byte(`{"msg_ids":["x"],"reward":1}`), tc.hdr)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if tc.status != 200 {
				wantOpenAIError(t, r, tc.status)
				return
			}
			owner := strings.TrimPrefix(string(r.body), "owner=")
			if (tc.owner == "key") != strings.HasPrefix(owner, "key:") || strings.Contains(owner, "tenant") {
				t.Fatalf("handler acted for owner %q", owner)
			}
		})
	}
	a, b, again := ownerOf("tenant-a"), ownerOf("tenant-b"), ownerOf("tenant-a")
	if a == b || a != again || ownerOf("") != "" {
		t.Fatal("owners are not one per key")
	}
	bad := DefaultOptions()
	bad.DataPlaneFeedback = FeedbackKeys
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "client_keys") {
		t.Fatalf("keys mode without client keys: %v", err)
	}
}

// TestMountedRouteSeesItsOwnPath: a mounted handler routes on the path hone
// matched, not on the raw request target, so a target that fasthttp cleans
// into a mounted path cannot reach another route of the handler's router.
func TestMountedRouteSeesItsOwnPath(t *testing.T) {
	base := startFeedbackHone(t, "127.0.0.1:0", func(o *Options) { o.DataPlaneFeedback = FeedbackLoopback })
	for _, target := range []string{"/feedback", "/v1/sessions/abc/../../feedback", "/v1/sessions%2F..%2F..%2Ffeedback/../../feedback",
		"//feedback?x=1"} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = conn.Write([]byte("POST " + target + " HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"))
		b, _ := io.ReadAll(conn)
		conn.Close()
		if !strings.HasPrefix(string(b), "HTTP/1.1 200") {
			if strings.HasPrefix(string(b), "HTTP/1.1 404") {
				continue // not mounted: hone's own 404, the handler never ran
			}
			t.Fatalf("%s: %q", target, b)
		}
		if !strings.HasSuffix(string(b), " path=/feedback") {
			t.Errorf("%s: the handler saw %q, want path=/feedback", target, b[bytes.LastIndexByte(b, '\n')+1:])
		}
	}
}
