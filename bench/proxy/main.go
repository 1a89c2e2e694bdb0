// Command proxy benchmarks hone's data plane beside what a user would deploy
// instead, measured in the same run: the load generator straight to the stub
// engine (direct), nginx and HAProxy (Debian packages, started here with a
// generated configuration; skipped with a message when not installed), a
// bare fasthttp reverse proxy (the floor of a proxy built on hone's HTTP
// library), and hone with capture off, capture on, and the shipped binary
// (hone serve). The stub replays a vLLM-format chat response (and an SSE
// stream whose events carry their send time, for per-event added latency).
// The stub, each proxy and the load generator run in separate processes
// (see roles.go and external.go). Targets are interleaved: each of -count
// rounds measures every target in turn; the tables give medians over the
// rounds and a summary gives hone's figures as ratios of nginx's (issue 25's
// acceptance).
//
//	go run ./bench/proxy [-duration 3s] [-rates 1000,5000] [-count 5] [-targets direct,nginx,haproxy,fasthttp,hone,hone-capture,hone-serve]
//
// More targets for -targets: relay (a TCP relay, the floor of any proxy) and
// httputil (Go's httputil.ReverseProxy).
//
// Experiment knobs, read by the server processes: HONE_BENCH_CPUPROFILE,
// HONE_BENCH_MEMPROFILE and HONE_BENCH_TRACE (file prefixes; the role is
// appended), HONE_BENCH_HONE_GOGC (hone's GC
// percent instead of hone serve's default), HONE_BENCH_BATCH_DELAY (capture
// batch delay) and HONE_BENCH_PROXY_CPUS (taskset CPU list for the proxies,
// nginx and HAProxy included; their worker count follows it). With
// HONE_BENCH_REQUIRE=1 a missing nginx, HAProxy or bin/hone is an error
// instead of a skipped target.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/url"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
)

var (
	duration    = flag.Duration("duration", 3*time.Second, "length of each measurement")
	rates       = flag.String("rates", "1000,5000", "open-loop request rates (req/s)")
	events      = flag.Int("events", 32, "SSE events per streamed response")
	replyTokens = flag.Int("reply-tokens", 7, "completion tokens in the stub's chat reply, each with its logprob entry (7: 1.2 KB; 64: 5.8 KB)")
	workers     = flag.Int("workers", 64, "concurrent clients for the max-throughput run")
	honeBin     = flag.String("hone-bin", "bin/hone", "the hone binary for the hone-serve target (make build)")
	pad         = flag.Int("pad", 0, "bytes of instructions added to every request (long agent prompts)")
	promptIDs   = flag.String("prompt-ids", "fixed", "prompt token ids in the stub's non-streamed answers: fixed (10) or echo (one per 4 bytes of the request, as vLLM returns a long prompt's ids when asked)")
	turns       = flag.Int("turns", 1, "chat turns per conversation (header-less; hone's session inference joins them)")
	sessions    = flag.Bool("sessions", false, "send an X-Hone-Session per request (no session inference in hone)")
	clientKey   = flag.String("client-key", "", "hone requires this client key (proxy.client_keys; so its calls carry an owner and a cache_salt) and every request sends it as a bearer token")
	targetsFlag = flag.String("targets", "direct,nginx,haproxy,fasthttp,hone,hone-capture,hone-serve", "targets to measure, in order (direct first: added latency is against it); also relay, httputil")
	dump        = flag.String("dump", "", "append every open-loop request's scheduled offset and latency to this file")
	count       = flag.Int("count", 1, "open-loop runs per target and rate (medians are reported)")
	sections    = flag.String("sections", "open,closed,stream", "measurements to run")
	inprocess   = flag.Bool("inprocess", false, "run the stub and the proxies in the load generator's process (CPU columns then count the whole process)")
	nginxBin    = flag.String("nginx-bin", "", "the nginx binary (default: nginx on $PATH or /usr/sbin/nginx)")
	haproxyBin  = flag.String("haproxy-bin", "", "the haproxy binary (default: haproxy on $PATH or /usr/sbin/haproxy)")
	// proxyWorkersFlag: nginx's worker_processes and HAProxy's nbthread.
	proxyWorkersFlag = flag.Int("proxy-workers", 0, "nginx workers and HAProxy threads (default: hone's CPU budget, the CPUs of HONE_BENCH_PROXY_CPUS or of the machine)")
	role             = flag.String("role", "", "internal: run as the stub, httputil, hone or hone-capture process")
	upstreamURL      = flag.String("upstream", "", "internal: the stub's URL for a proxy role")
)

var targetNames = map[string]string{
	"direct": "direct", "relay": "TCP relay (floor)", "fasthttp": "bare fasthttp proxy", "httputil": "httputil",
	"hone-serve": "hone serve (the binary)", "hone": "hone capture off", "hone-capture": "hone capture on",
	"nginx": "nginx", "haproxy": "HAProxy",
}

func main() {
	flag.Parse()
	fixedBody = requestBody()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	if *role != "" {
		runRole(*role, *upstreamURL)
		return
	}
	stopOnSignal()
	defer stopAll()
	if *promptIDs != "fixed" && *promptIDs != "echo" {
		fmt.Fprintf(os.Stderr, "-prompt-ids %q: want fixed or echo\n", *promptIDs)
		os.Exit(2)
	}
	stub := spawn("stub", "-events", strconv.Itoa(*events), "-reply-tokens", strconv.Itoa(*replyTokens), "-prompt-ids", *promptIDs)
	var targets []target
	var notes []string // the header's lines about the targets
	require := os.Getenv("HONE_BENCH_REQUIRE") == "1"
	skip := func(msg string) {
		if require {
			fatalf("%s (HONE_BENCH_REQUIRE=1)", msg)
		}
		fmt.Fprintln(os.Stderr, msg)
		notes = append(notes, msg)
	}
	workers := proxyWorkers()
	for _, name := range strings.Split(*targetsFlag, ",") {
		name = strings.TrimSpace(name)
		if _, ok := targetNames[name]; !ok {
			fatalf("unknown target %q", name)
		}
		c := stub
		switch name {
		case "direct":
		case "hone-serve":
			if _, err := os.Stat(*honeBin); err != nil {
				skip(fmt.Sprintf("skipping hone-serve: %v (make build)", err))
				continue
			}
			c = spawnServe(*honeBin, stub.url)
		case "nginx", "haproxy":
			p := externals[name]
			bins := p.bins
			if name == "nginx" && *nginxBin != "" {
				bins = []string{*nginxBin}
			} else if name == "haproxy" && *haproxyBin != "" {
				bins = []string{*haproxyBin}
			}
			bin, err := findBin(bins)
			if err != nil {
				skip(fmt.Sprintf("skipping %s: %v (Debian: sudo apt-get install -y %s, or make bench-deps)", name, err, p.pkg))
				continue
			}
			if c, err = spawnExternal(p, bin, stub.url, workers); err != nil {
				fatalf("%v", err)
			}
			notes = append(notes, fmt.Sprintf("%s: %s (%s): %s", targetNames[name], p.version(bin), bin, p.choices(workers)))
		default:
			c = spawn(name, "-upstream", stub.url, "-client-key", *clientKey)
		}
		targets = append(targets, target{name, targetNames[name], c.url, c.metrics, c})
	}
	if len(targets) == 0 {
		fatalf("no target to measure")
	}
	layout := "separate processes"
	if *inprocess {
		layout = "one process"
	}
	fmt.Printf("# bench/proxy  %s  GOMAXPROCS=%d  NumCPU=%d  duration=%s  count=%d  %s\n", time.Now().UTC().Format(time.RFC3339),
		runtime.GOMAXPROCS(0), runtime.NumCPU(), *duration, *count, layout)
	fmt.Printf("# hone: each hone process runs with Go's default GOMAXPROCS (its CPU budget: %d CPUs); nginx and HAProxy get as many workers\n", workers)
	fmt.Printf("# rounds: each section measures every target in turn, %d times (%s first, the others' order rotated by one each round)\n",
		*count, targets[0].name)
	fmt.Printf("# stub: chat reply of %d bytes (-reply-tokens %d), streams of %d events (-events)\n", len(replyBody(*replyTokens)), *replyTokens, *events)
	if *promptIDs == "echo" {
		fmt.Println("# stub: -prompt-ids echo: each answer carries one prompt token id per 4 bytes of its request in place of the fixed 10")
	}
	for _, n := range notes {
		fmt.Println("# " + n)
	}
	sums := make([]summary, len(targets))
	if has(*sections, "open") {
		reportOpen(targets, sums)
	}
	if has(*sections, "closed") {
		reportClosed(targets, sums)
	}
	if has(*sections, "stream") {
		reportStream(targets, sums)
	}
	reportSummary(targets, sums)
	for _, t := range targets {
		if fams := scrape(t.metrics); counterSum(fams, "hone_capture_calls_stored_total") > 0 {
			fmt.Printf("\n%s stored %.0f calls in %.0f sessions (-turns %d; header-less: session inference joins turns).\n",
				t.name, counterSum(fams, "hone_capture_calls_stored_total"), counterSum(fams, "hone_capture_sessions_total"), *turns)
		}
	}
}

// fatalf stops the servers started so far and exits.
func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench/proxy: "+format+"\n", args...)
	stopAll()
	os.Exit(1)
}

func has(list, s string) bool {
	for _, p := range strings.Split(list, ",") {
		if strings.TrimSpace(p) == s {
			return true
		}
	}
	return false
}

// target is one server under load; its CPU is the proxy's (nginx: master
// and workers), for direct the stub's.
type target struct {
	key, name, url, metrics string
	proc                    *child
}

// cpu is the CPU time the target's processes have used so far.
func (t target) cpu() time.Duration { return t.proc.cpu() }

// openStats is one target's open-loop figures at one rate over -count runs.
type openStats struct {
	rate, p50, p99, p999, sched99, cpu []float64
	loadCPU                            []float64 // the load generator's CPU per request
	in50, in99                         []float64 // time inside hone (its own histogram)
	errors                             int
}

func (o *openStats) add(res result, cpu float64) {
	o.rate = append(o.rate, res.rate)
	o.p50 = append(o.p50, res.p(50))
	o.p99 = append(o.p99, res.p(99))
	o.p999 = append(o.p999, res.p(99.9))
	o.sched99 = append(o.sched99, res.pSched(99))
	o.cpu = append(o.cpu, cpu)
	o.errors += res.errors
}

// roundOrder is the order of the targets in round run: the first (direct,
// the baseline of added latency) first, the others rotated by one each
// round, so no target always follows the same one (hone capture on's
// background writes, for one, would otherwise always land on the next).
func roundOrder(n, run int) []int {
	order := make([]int, 0, n)
	if n == 0 {
		return order
	}
	order = append(order, 0)
	for j := 0; j < n-1; j++ {
		order = append(order, 1+(j+run)%(n-1))
	}
	return order
}

// median of v (runs are few; the median ignores one disturbed run).
func median(v []float64) float64 { return pct(append([]float64(nil), v...), 50) }

// summary is one target's medians for the closing summary.
type summary struct {
	openCPU, openAdd50, openAdd99 map[int]float64 // per open-loop rate
	rate, cpu                     float64         // closed loop
	closed                        bool
	sAdd50, sAdd99, sCPU          float64 // streaming, per event
	sPerWrite                     float64
	streamed                      bool
}

func reportOpen(targets []target, sums []summary) {
	fmt.Println("\n## non-streaming chat: latency at fixed rates (open loop)")
	fmt.Printf("Medians over %d runs (targets interleaved). Latency from the request's send; \"p99 sched\" from its\n", *count)
	fmt.Println("scheduled time (includes the load generator's timer lag). CPU: the target's processes' CPU time per request")
	fmt.Println("(nginx: master and workers; direct: the stub's).")
	fmt.Println("\"inside hone\": hone's own hone_overhead_seconds histogram (request handling + response processing, not the")
	fmt.Println("hops), interpolated within its buckets.")
	fmt.Println("| target | rate req/s | achieved | p50 us | p99 us | p99.9 us | p99 sched us | CPU us/req | load gen CPU us/req | inside hone p50 / p99 us | errors |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	var added []string
	for _, r := range parseRates(*rates) {
		stats := make([]openStats, len(targets))
		addP50 := make([][]float64, len(targets))
		addP99 := make([][]float64, len(targets))
		for run := 0; run < *count; run++ {
			var base result
			for _, i := range roundOrder(len(targets), run) {
				t := targets[i]
				cpu0, self0, in0 := t.cpu(), procCPU(os.Getpid()), scrapeOverhead(t.metrics)
				res := openLoop(t.url, r, *duration)
				if in1 := scrapeOverhead(t.metrics); t.metrics != "" {
					stats[i].in50 = append(stats[i].in50, in1.quantile(in0, 0.5))
					stats[i].in99 = append(stats[i].in99, in1.quantile(in0, 0.99))
				}
				n := float64(len(res.lat) + res.errors)
				stats[i].add(res, (t.cpu()-cpu0).Seconds()*1e6/n)
				stats[i].loadCPU = append(stats[i].loadCPU, (procCPU(os.Getpid())-self0).Seconds()*1e6/n)
				if i == 0 {
					base = res
					continue
				}
				addP50[i] = append(addP50[i], res.p(50)-base.p(50))
				addP99[i] = append(addP99[i], res.p(99)-base.p(99))
			}
		}
		for i, t := range targets {
			st := &stats[i]
			inside := "-"
			if len(st.in50) > 0 {
				inside = fmt.Sprintf("%.0f / %.0f", median(st.in50), median(st.in99))
			}
			fmt.Printf("| %s | %d | %.0f | %.0f | %.0f | %.0f | %.0f | %.1f | %.1f | %s | %d |\n", t.name, r, median(st.rate),
				median(st.p50), median(st.p99), median(st.p999), median(st.sched99), median(st.cpu), median(st.loadCPU), inside, st.errors)
			if sums[i].openCPU == nil {
				sums[i].openCPU, sums[i].openAdd50, sums[i].openAdd99 = map[int]float64{}, map[int]float64{}, map[int]float64{}
			}
			sums[i].openCPU[r] = median(st.cpu)
			if i > 0 {
				sums[i].openAdd50[r], sums[i].openAdd99[r] = median(addP50[i]), median(addP99[i])
				added = append(added, fmt.Sprintf("| %s | %d | %+.0f | %+.0f | %s | %s |", t.name, r, median(addP50[i]),
					median(addP99[i]), spread(addP50[i]), spread(addP99[i])))
			}
		}
	}
	if len(added) > 0 {
		fmt.Printf("\nAdded latency against %s, median of the per-run differences, and every run's figure:\n", targets[0].name)
		fmt.Println("| target | rate req/s | added p50 us | added p99 us | p50 runs | p99 runs |")
		fmt.Println("|---|---|---|---|---|---|")
		for _, a := range added {
			fmt.Println(a)
		}
	}
}

func spread(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%+.0f", x)
	}
	return strings.Join(parts, " ")
}

// reportClosed runs -count rounds of the closed loop, the targets in turn
// within each round, and prints medians over the rounds.
func reportClosed(targets []target, sums []summary) {
	fmt.Println("\n## non-streaming chat: maximum throughput (closed loop)")
	fmt.Printf("Medians over %d rounds (targets interleaved). CPU: the target's processes (nginx: master and workers; direct:\n", *count)
	fmt.Println("the stub), CPU time per request (from each thread's schedstat).")
	fmt.Println("| target | workers | req/s | p50 us | p99 us | CPU us/req | req/s runs | errors |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	rate, p50, p99, cpu := make([][]float64, len(targets)), make([][]float64, len(targets)), make([][]float64, len(targets)), make([][]float64, len(targets))
	errs := make([]int, len(targets))
	for run := 0; run < *count; run++ {
		for _, i := range roundOrder(len(targets), run) {
			t := targets[i]
			cpu0 := t.cpu()
			res := closedLoop(t.url, *workers, *duration)
			cpu[i] = append(cpu[i], (t.cpu()-cpu0).Seconds()*1e6/float64(max(len(res.lat)+res.errors, 1)))
			rate[i] = append(rate[i], res.rate)
			p50[i] = append(p50[i], res.p(50))
			p99[i] = append(p99[i], res.p(99))
			errs[i] += res.errors
		}
	}
	for i, t := range targets {
		sums[i].rate, sums[i].cpu, sums[i].closed = median(rate[i]), median(cpu[i]), true
		fmt.Printf("| %s | %d | %.0f | %.0f | %.0f | %.1f | %s | %d |\n", t.name, *workers, median(rate[i]), median(p50[i]),
			median(p99[i]), median(cpu[i]), runs(rate[i]), errs[i])
	}
}

// runs lists every round's figure.
func runs(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.0f", x)
	}
	return strings.Join(parts, " ")
}

// reportStream runs -count rounds of streams, the targets in turn within
// each round; added latency is against the first target (direct) in the
// same round, CPU is per event received.
func reportStream(targets []target, sums []summary) {
	fmt.Println("\n## streaming chat: per-event latency (engine send → client receive)")
	fmt.Printf("Medians over %d rounds (targets interleaved), 8 concurrent streams of %d events 2 ms apart. \"added\": the\n", *count, *events)
	fmt.Printf("per-event latency minus %s's in the same round. CPU: the target's processes per event received.\n", targets[0].name)
	fmt.Println("\"events per write\": events per HTTP chunk received (1.00: each event passed on by itself).")
	fmt.Println("| target | streams | events | p50 us | p99 us | added p50 us | added p99 us | CPU us/event | events per write | errors |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	n := len(targets)
	p50, p99, add50, add99, cpu, perWrite := make([][]float64, n), make([][]float64, n), make([][]float64, n), make([][]float64, n), make([][]float64, n), make([][]float64, n)
	streams, evs, errs := make([]int, n), make([]int, n), make([]int, n)
	for run := 0; run < *count; run++ {
		var base result
		for _, i := range roundOrder(len(targets), run) {
			t := targets[i]
			if t.key == "fasthttp" {
				continue
			}
			cpu0 := t.cpu()
			res := streamRun(t.url, 8, *duration)
			cpu[i] = append(cpu[i], (t.cpu()-cpu0).Seconds()*1e6/float64(max(res.events, 1)))
			p50[i], p99[i] = append(p50[i], res.p(50)), append(p99[i], res.p(99))
			perWrite[i] = append(perWrite[i], res.perWrite)
			streams[i] += res.streams
			evs[i] += len(res.lat)
			errs[i] += res.errors
			if i == 0 {
				base = res
				continue
			}
			add50[i], add99[i] = append(add50[i], res.p(50)-base.p(50)), append(add99[i], res.p(99)-base.p(99))
		}
	}
	for i, t := range targets {
		if t.key == "fasthttp" {
			fmt.Printf("| %s | - | - | - | - | - | - | - | - (buffers whole responses: no streaming) | - |\n", t.name)
			continue
		}
		a50, a99 := "-", "-"
		if i > 0 {
			a50, a99 = fmt.Sprintf("%+.0f", median(add50[i])), fmt.Sprintf("%+.0f", median(add99[i]))
			sums[i].sAdd50, sums[i].sAdd99 = median(add50[i]), median(add99[i])
		}
		sums[i].sCPU, sums[i].sPerWrite, sums[i].streamed = median(cpu[i]), median(perWrite[i]), true
		fmt.Printf("| %s | %d | %d | %.0f | %.0f | %s | %s | %.2f | %.2f | %d |\n", t.name, streams[i], evs[i], median(p50[i]),
			median(p99[i]), a50, a99, median(cpu[i]), median(perWrite[i]), errs[i])
	}
}

// reportSummary prints hone's figures beside nginx's, as ratios (issue 25:
// with capture on, at least 0.8x nginx's req/s and at most 2x its CPU per
// request; with capture off at least 1.0x its req/s).
func reportSummary(targets []target, sums []summary) {
	ref := -1
	for i, t := range targets {
		if t.key == "nginx" {
			ref = i
		}
	}
	fmt.Println("\n## summary: each target beside nginx (issue 25)")
	if ref < 0 {
		fmt.Println("No nginx target in this run (not installed, or not in -targets): no ratios.")
		return
	}
	ng := sums[ref]
	rates := parseRates(*rates)
	top := 0
	if len(rates) > 0 {
		top = rates[len(rates)-1]
	}
	fmt.Println("\"x nginx\": the target's figure over nginx's from the same run. Issue 25's acceptance: with capture on, req/s >= 0.80x")
	fmt.Println("nginx's and CPU per request <= 2.00x; with capture off, req/s >= 1.00x; streaming per-event overhead reported the")
	fmt.Println("same way. The verdict uses the closed loop's req/s and CPU per request.")
	if ng.closed || ng.openCPU != nil {
		fmt.Printf("\nNon-streaming chat: max req/s and CPU per request from the closed loop (%d workers); CPU per request and\n", *workers)
		fmt.Printf("added latency (against %s) at %d req/s from the open loop.\n", targets[0].name, top)
		fmt.Printf("| target | max req/s | x nginx | CPU us/req | x nginx | CPU us/req at %d req/s | x nginx | added p50 / p99 us at %d req/s | issue 25 |\n", top, top)
		fmt.Println("|---|---|---|---|---|---|---|---|---|")
		for i, t := range targets {
			s := sums[i]
			added := "-"
			if i > 0 && s.openAdd50 != nil {
				added = fmt.Sprintf("%+.0f / %+.0f", s.openAdd50[top], s.openAdd99[top])
			}
			fmt.Printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", t.name,
				num(s.rate, s.closed, 0), ratio(s.rate, ng.rate, s.closed && ng.closed),
				num(s.cpu, s.closed, 1), ratio(s.cpu, ng.cpu, s.closed && ng.closed),
				num(s.openCPU[top], s.openCPU != nil, 1), ratio(s.openCPU[top], ng.openCPU[top], s.openCPU != nil && ng.openCPU != nil),
				added, verdict(t.key, s, ng))
		}
	}
	if ng.streamed {
		fmt.Printf("\nStreaming chat, per event: added latency against %s and CPU of the target's processes.\n", targets[0].name)
		fmt.Println("| target | added p50 us | x nginx | added p99 us | x nginx | CPU us/event | x nginx | events per write |")
		fmt.Println("|---|---|---|---|---|---|---|---|")
		for i, t := range targets {
			s := sums[i]
			if !s.streamed {
				continue
			}
			fmt.Printf("| %s | %s | %s | %s | %s | %.2f | %s | %.2f |\n", t.name,
				signed(s.sAdd50, i > 0), ratio(s.sAdd50, ng.sAdd50, i > 0), signed(s.sAdd99, i > 0), ratio(s.sAdd99, ng.sAdd99, i > 0),
				s.sCPU, ratio(s.sCPU, ng.sCPU, true), s.sPerWrite)
		}
	}
}

// verdict is issue 25's bar for the hone targets: capture on (hone-capture
// and hone serve, which captures) >= 0.8x nginx's req/s and <= 2x its CPU
// per request; capture off >= 1.0x its req/s.
func verdict(key string, s, ng summary) string {
	if !s.closed || !ng.closed || ng.rate <= 0 || ng.cpu <= 0 {
		return "-"
	}
	yes := func(ok bool) string {
		if ok {
			return "met"
		}
		return "NOT met"
	}
	switch key {
	case "hone":
		return fmt.Sprintf("req/s >= 1.00x: %s", yes(s.rate >= ng.rate))
	case "hone-capture", "hone-serve":
		return fmt.Sprintf("req/s >= 0.80x: %s; CPU <= 2.00x: %s", yes(s.rate >= 0.8*ng.rate), yes(s.cpu <= 2*ng.cpu))
	}
	return "-"
}

func num(v float64, ok bool, prec int) string {
	if !ok {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

func signed(v float64, ok bool) string {
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%+.0f", v)
}

// ratio is v/ref to two places; "-" when either is missing or ref is not
// positive (an added latency at or below direct's has no meaningful ratio).
func ratio(v, ref float64, ok bool) string {
	if !ok || ref <= 0 || math.IsNaN(v) || math.IsNaN(ref) {
		return "-"
	}
	return fmt.Sprintf("%.2fx", v/ref)
}

func parseRates(s string) []int {
	var out []int
	for _, p := range strings.Split(s, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(p)); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// ---- load generation ----

type result struct {
	lat      []float64   // microseconds, from the send
	sched    []float64   // microseconds, from the scheduled send time (open loop)
	at       []time.Time // scheduled send times, for -dump
	rate     float64
	errors   int
	streams  int
	events   int // SSE events received (streamRun)
	perWrite float64
}

func (r *result) p(q float64) float64 { return pct(r.lat, q) }

func (r *result) pSched(q float64) float64 { return pct(r.sched, q) }

func pct(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	return v[int(float64(len(v)-1)*q/100)]
}

var sessionSeq atomic.Uint64

// requestBody is the one-message chat every request sends (-turns 1), with
// -pad N after a system message of N bytes (an agent's long instructions).
func requestBody() []byte {
	system := ""
	if *pad > 0 {
		system = `{"role":"system","content":"` + strings.Repeat("You are a careful agent. ", *pad/25+1)[:*pad] + `"},`
	}
	return []byte(`{"model":"Qwen/Qwen3-0.6B","messages":[` + system + `{"role":"user","content":"Hello!"}],"max_tokens":16}`)
}

func newClient() *fasthttp.Client {
	return &fasthttp.Client{MaxConnsPerHost: 512, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
}

// conversation is one client's chat. With -turns N each request continues
// the previous one (its messages, the stub's reply, a new user message) for N
// turns before a new conversation starts, without session headers, so hone's
// session inference joins the turns as it would an agent's; each opening is
// unique. With -turns 1 every request is the same one-message chat.
type conversation struct {
	turn int
	msgs []string
}

var conversationSeq atomic.Uint64

var fixedBody []byte // requestBody(), made once

// stubTurn is the assistant message of the stub's reply (-reply-tokens),
// which each turn of a conversation sends back as an agent would.
var stubTurn = sync.OnceValue(func() string { return replyTurn(*replyTokens) })

// replyTurn is the assistant message of replyBody(n).
func replyTurn(n int) string {
	return `{"role":"assistant","content":` + gjson.Get(replyBody(n), "choices.0.message.content").Raw + `}`
}

func (cv *conversation) next() []byte {
	if *turns <= 1 {
		return fixedBody
	}
	if cv.turn%*turns == 0 {
		cv.msgs = append(cv.msgs[:0], fmt.Sprintf(`{"role":"user","content":"Hello from conversation %d! %s"}`, conversationSeq.Add(1),
			strings.Repeat("x", max(*pad, 0))))
	} else {
		cv.msgs = append(cv.msgs, stubTurn(), fmt.Sprintf(`{"role":"user","content":"And step %d?"}`, cv.turn%*turns))
	}
	cv.turn++
	return []byte(`{"model":"Qwen/Qwen3-0.6B","messages":[` + strings.Join(cv.msgs, ",") + `],"max_tokens":16}`)
}

func doOnce(c *fasthttp.Client, base string, cv *conversation) (time.Duration, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(base + "/v1/chat/completions")
	req.Header.SetMethod("POST")
	req.Header.SetContentType("application/json")
	req.SetBody(cv.next())
	if *clientKey != "" {
		req.Header.Set("Authorization", "Bearer "+*clientKey)
	}
	if *sessions {
		req.Header.Set("X-Hone-Session", "bench-"+strconv.FormatUint(sessionSeq.Add(1), 10))
	}
	t := time.Now()
	err := c.Do(req, resp)
	d := time.Since(t)
	if err == nil && resp.StatusCode() != 200 {
		err = fmt.Errorf("status %d", resp.StatusCode())
	}
	return d, err
}

// openLoop sends at a fixed rate regardless of responses: a fixed pool of
// clients takes scheduled send times from a queue. Latency is kept twice:
// from the actual send (what the target added, free of the load generator's
// timer lag, which is up to a millisecond in Go for sub-millisecond sleeps)
// and from the scheduled time (no coordinated omission: a saturated target
// shows up there as growing latency, not as a lower rate).
func openLoop(base string, rate int, d time.Duration) result {
	c := newClient()
	var mu sync.Mutex
	var res result
	interval := time.Second / time.Duration(rate)
	n := int(d / interval)
	sched := make(chan time.Time, n)
	var wg sync.WaitGroup
	for w := 0; w < 256; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var cv conversation
			for at := range sched {
				if wait := time.Until(at); wait > 0 {
					time.Sleep(wait)
				}
				lat, err := doOnce(c, base, &cv)
				sched := time.Since(at)
				mu.Lock()
				if err != nil {
					noteErr(base, err)
					res.errors++
				} else {
					res.at = append(res.at, at)
					res.lat = append(res.lat, float64(lat.Microseconds()))
					res.sched = append(res.sched, float64(sched.Microseconds()))
				}
				mu.Unlock()
			}
		}()
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		sched <- start.Add(time.Duration(i) * interval)
	}
	close(sched)
	wg.Wait()
	res.rate = float64(len(res.lat)) / time.Since(start).Seconds()
	dumpSeries(base, rate, start, &res)
	return res
}

// dumpSeries appends "url rate offset_ms latency_us" lines to the -dump
// file, to see when in a run the slow requests happened.
func dumpSeries(base string, rate int, start time.Time, res *result) {
	if *dump == "" {
		return
	}
	f, err := os.OpenFile(*dump, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	for i, at := range res.at {
		fmt.Fprintf(w, "%s %d %.3f %.0f\n", base, rate, float64(at.Sub(start).Microseconds())/1e3, res.lat[i])
	}
	w.Flush()
}

func closedLoop(base string, workers int, d time.Duration) result {
	c := newClient()
	var mu sync.Mutex
	var res result
	deadline := time.Now().Add(d)
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var cv conversation
			var local []float64
			errs := 0
			for time.Now().Before(deadline) {
				lat, err := doOnce(c, base, &cv)
				if err != nil {
					noteErr(base, err)
					errs++
					continue
				}
				local = append(local, float64(lat.Microseconds()))
			}
			mu.Lock()
			res.lat = append(res.lat, local...)
			res.errors += errs
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.rate = float64(len(res.lat)) / time.Since(start).Seconds()
	return res
}

// streamRun opens streams back to back on a few connections and measures,
// for every event, receive time minus the stub's send time; it also counts
// HTTP chunks per event (1.00 means each event had its own write).
func streamRun(base string, conc int, d time.Duration) result {
	var mu sync.Mutex
	var res result
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	chunks, evs := 0, 0
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				lat, ch, n, err := oneStream(base)
				mu.Lock()
				if err != nil {
					noteErr(base, err)
					res.errors++
				} else {
					res.lat = append(res.lat, lat...)
					res.streams++
					chunks += ch
					evs += n
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.events = evs
	if chunks > 0 {
		res.perWrite = float64(evs) / float64(chunks)
	}
	return res
}

func oneStream(base string) ([]float64, int, int, error) {
	u, _ := url.Parse(base)
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		return nil, 0, 0, err
	}
	defer c.Close()
	body := `{"model":"Qwen/Qwen3-0.6B","messages":[{"role":"user","content":"Hello!"}],"stream":true}`
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", u.Host, len(body), body)
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	if err != nil {
		return nil, 0, 0, err
	}
	if !strings.HasPrefix(status, "HTTP/1.1 200 ") {
		return nil, 0, 0, fmt.Errorf("stream answered %q", strings.TrimSpace(status))
	}
	for { // headers
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, 0, 0, err
		}
		if line == "\r\n" {
			break
		}
	}
	var lat []float64
	chunks, evs := 0, 0
	for {
		sz, err := br.ReadString('\n')
		if err != nil {
			return nil, 0, 0, err
		}
		n, _ := strconv.ParseInt(strings.TrimSpace(sz), 16, 64)
		if n == 0 {
			return lat, chunks, evs, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return nil, 0, 0, err
		}
		now := nowMicros()
		chunks++
		for _, ev := range strings.Split(string(buf[:n]), "\n\n") {
			if !strings.HasPrefix(ev, "data: ") {
				continue
			}
			evs++
			if sent := gjson.Get(ev[6:], "created").Int(); sent > 0 {
				lat = append(lat, float64(now-sent))
			}
		}
	}
}

// noted holds the targets whose first failed request noteErr reported.
var noted sync.Map

// noteErr prints a target's first failed request on stderr (the report
// counts them; this says why).
func noteErr(base string, err error) {
	if _, seen := noted.LoadOrStore(base, true); !seen {
		fmt.Fprintf(os.Stderr, "%s: first failed request: %v\n", base, err)
	}
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}
