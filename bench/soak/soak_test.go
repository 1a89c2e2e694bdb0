package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestSoakShort is the short form of make soak that make test runs: 20 s of
// the mixed traffic at 500 calls/s (HONE_SOAK_SHORT sets another length)
// against a freshly built hone serve. It fails on any error, on RSS over
// 512 MiB, or when hone does not build or start.
func TestSoakShort(t *testing.T) {
	d := 20 * time.Second
	if v, err := time.ParseDuration(os.Getenv("HONE_SOAK_SHORT")); err == nil {
		d = v
	}
	if testing.Short() {
		d = 5 * time.Second
	}
	bin, err := buildHone(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	res, err := run(context.Background(), config{Duration: d, Interval: d / 4, Rate: 500, Agents: 256, Bin: bin, Out: &out})
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if err := res.check(512<<20, 0); err != nil {
		t.Fatal(err)
	}
	if res.Feedback == 0 {
		t.Fatal("no control-plane request succeeded")
	}
}
