// Command soak runs hone serve (a real binary, default configuration) in
// front of a vLLM-format stub engine under mixed agent traffic for a long
// time and reports, every interval, hone's RSS (anonymous and file-backed,
// from /proc), Go heap, goroutines, errors and capture counters; it fails
// when any call or control-plane request fails, when RSS passes -max-rss or
// when it is not flat (the last quarter above the second by more than
// -growth).
//
// The traffic (conversations of 1 to 3 calls, half of them streamed):
// X-Hone-Session sessions with X-Hone-Reward + X-Hone-Commit on the last
// call or on every call, header-less inferred sessions rewarded through
// Trinity's /feedback and /commit, sessions rewarded through /v1/feedback
// and /v1/commit, one-call header-less sessions left to the idle timeout,
// and a trainer that reads /v1/experiences and acknowledges them.
//
//	make soak                   # 30 minutes at 500 calls/s
//	make soak SOAK=2m           # shorter
//	go run ./bench/soak -duration 5m -rate 200 -hone bin/hone
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"
)

func main() {
	def := 30 * time.Minute
	if v := os.Getenv("SOAK"); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			def = d
		}
	}
	var (
		duration = flag.Duration("duration", def, "how long the load runs (env SOAK)")
		interval = flag.Duration("interval", 30*time.Second, "report interval")
		rate     = flag.Int("rate", 500, "chat calls per second")
		agents   = flag.Int("agents", 256, "concurrent agents")
		bin      = flag.String("hone", "", "hone binary (built from this tree when empty)")
		data     = flag.String("data", "", "data folder (a temporary one, removed after, when empty)")
		maxRSS   = flag.String("max-rss", "512MiB", "fail when hone's RSS passes this")
		growth   = flag.Float64("growth", 0.15, "fail when RSS in the last quarter exceeds the second quarter's by more than this fraction")
	)
	flag.Parse()
	limit, err := humanize.ParseBytes(*maxRSS)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak: -max-rss:", err)
		os.Exit(2)
	}
	if *bin == "" {
		dir, err := os.MkdirTemp("", "hone-soak-bin-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "soak:", err)
			os.Exit(1)
		}
		defer os.RemoveAll(dir)
		if *bin, err = buildHone(dir); err != nil {
			fmt.Fprintln(os.Stderr, "soak:", err)
			os.Exit(1)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, config{Duration: *duration, Interval: *interval, Rate: *rate, Agents: *agents, Bin: *bin, Data: *data, Out: os.Stdout})
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
	fmt.Printf("soak: %d chat calls (%.1f/s), %d control-plane requests, %d errors, max RSS %.1f MiB\n",
		res.Calls, float64(res.Calls)/duration.Seconds(), res.Feedback, res.Errors, mib(res.MaxRSS))
	if err := res.check(int64(limit), *growth); err != nil {
		fmt.Fprintln(os.Stderr, "soak: FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("soak: PASS")
}
