package proxy

import (
	"os"
	"testing"

	"github.com/hone-rl/hone/capture"
)

// BenchmarkAccumulateBody is the per-call hot-path work on a non-stream
// response: one walk that aggregates ids/logprobs and notes injected spans,
// then the strip.
func BenchmarkAccumulateBody(b *testing.B) {
	body, err := os.ReadFile(fixture(&testing.T{}, "chat", "upstream.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		a := accumulator{route: capture.RouteChat}
		a.addBody(body)
		_ = strip(body, a.injected, asked{})
	}
}
