package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// config is one soak run.
type config struct {
	Duration time.Duration // how long the load runs
	Interval time.Duration // between report lines
	Rate     int           // chat calls per second (open loop)
	Agents   int           // concurrent agents (bounds calls in flight)
	Bin      string        // hone binary
	Data     string        // data folder (a fresh temporary one when empty)
	Env      []string      // extra environment for hone serve
	Out      io.Writer
}

// sample is one report line.
type sample struct {
	At                 time.Duration
	Calls, Errors      int64
	RSS, Anon, File    int64 // bytes, from /proc/<pid>/status
	Heap               float64
	Goroutines         float64
	Dropped, Orphans   float64
	Ready, Open        float64
	Rate               float64
	Continued, Rebuilt float64
	Limit, Queue       float64 // Go memory limit in effect, capture queue depth
}

// result is what a run saw.
type result struct {
	Samples   []sample
	Calls     int64
	Errors    int64
	Feedback  int64 // control-plane rewards and commits answered 200
	MaxRSS    int64
	FirstErrs []string
}

type soak struct {
	cfg      config
	data     string // data plane base URL
	control  string
	client   *http.Client
	tokens   chan struct{}
	calls    atomic.Int64
	errors   atomic.Int64
	feedback atomic.Int64
	errMu    sync.Mutex
	firstErr []string
}

func (s *soak) fail(format string, args ...any) {
	s.errors.Add(1)
	s.errMu.Lock()
	if len(s.firstErr) < 10 {
		s.firstErr = append(s.firstErr, fmt.Sprintf(format, args...))
	}
	s.errMu.Unlock()
}

// run starts a stub engine and hone serve, drives the mixed load for
// cfg.Duration and reports every cfg.Interval.
func run(ctx context.Context, cfg config) (*result, error) {
	stub, err := startStub()
	if err != nil {
		return nil, err
	}
	defer stub.close()
	data := cfg.Data
	if data == "" {
		if data, err = os.MkdirTemp("", "hone-soak-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(data)
	}
	hone, err := startHone(cfg, data, stub.url)
	if err != nil {
		return nil, err
	}
	defer hone.stop()
	s := &soak{cfg: cfg, data: hone.data, control: hone.control, tokens: make(chan struct{}, max(cfg.Rate/10, 1)),
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Agents + 16}}}
	fmt.Fprintf(cfg.Out, "soak: hone serve pid %d, %d chat calls/s for %v, %d agents, report every %v (data %s)\n",
		hone.cmd.Process.Pid, cfg.Rate, cfg.Duration, cfg.Agents, cfg.Interval, data)
	fmt.Fprintln(cfg.Out, "  time   calls/s   RSS MiB (anon+file)   heap MiB  limit MiB  goroutines  errors  queue  dropped  orphans  sessions open/ready  continued rebuilt")

	lctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.limit(lctx) }()
	for a := 0; a < cfg.Agents; a++ {
		wg.Add(1)
		go func() { defer wg.Done(); s.agent(lctx, a) }()
	}
	wg.Add(2)
	go func() { defer wg.Done(); s.trainer(lctx) }()
	go func() { defer wg.Done(); s.trinityCommits(lctx) }()

	res := &result{}
	start := time.Now()
	tick := time.NewTicker(cfg.Interval)
	defer tick.Stop()
	var lastCalls int64
	last := start
	report := func(now time.Time) {
		sm := s.sample(hone.cmd.Process.Pid)
		sm.At = now.Sub(start).Round(time.Second)
		sm.Rate = float64(sm.Calls-lastCalls) / now.Sub(last).Seconds()
		lastCalls, last = sm.Calls, now
		res.Samples = append(res.Samples, sm)
		res.MaxRSS = max(res.MaxRSS, sm.RSS)
		fmt.Fprintf(cfg.Out, "%6s  %8.1f   %6.1f (%5.1f+%5.1f)   %8.1f  %9.0f  %10.0f  %6d  %5.0f  %7.0f  %7.0f  %8.0f/%-8.0f  %9.0f %7.0f\n",
			sm.At, sm.Rate, mib(sm.RSS), mib(sm.Anon), mib(sm.File), sm.Heap/(1<<20), sm.Limit/(1<<20), sm.Goroutines, sm.Errors,
			sm.Queue, sm.Dropped, sm.Orphans, sm.Open, sm.Ready, sm.Continued, sm.Rebuilt)
	}
loop:
	for {
		select {
		case now := <-tick.C:
			report(now)
		case <-lctx.Done():
			break loop
		}
	}
	wg.Wait()
	report(time.Now())
	if !hone.alive() { // first, whatever failed before: the calls that failed after it say only that it was gone
		s.errors.Add(1)
		s.errMu.Lock()
		s.firstErr = append([]string{fmt.Sprintf("hone serve exited during the run (%v); its last output:\n%s",
			hone.cmd.ProcessState, hone.logs.tail())}, s.firstErr...)
		s.errMu.Unlock()
	}
	res.Calls, res.Errors, res.Feedback = s.calls.Load(), s.errors.Load(), s.feedback.Load()
	res.FirstErrs = s.firstErr
	return res, nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// limit hands out cfg.Rate tokens per second; one per chat call.
func (s *soak) limit(ctx context.Context) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	var sent int64
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			due := int64(now.Sub(start).Seconds() * float64(s.cfg.Rate))
			for ; sent < due; sent++ {
				select {
				case s.tokens <- struct{}{}:
				default:
					sent = due // agents all busy: do not bank a burst
				}
			}
		}
	}
}

func (s *soak) wait(ctx context.Context) bool {
	select {
	case <-s.tokens:
		return true
	case <-ctx.Done():
		return false
	}
}

// systemPrompt makes each call's request a few KB, as agents' are.
var systemPrompt = "You are a careful agent. " + strings.Repeat("Read the task, plan, call tools when needed, check the result, answer briefly. ", 24)

// Conversation kinds, by agent round: (reward and commit)
//
//	0-3  X-Hone-Session, 3 turns, X-Hone-Reward + X-Hone-Commit on the last
//	4-5  X-Hone-Session, 3 turns, both headers on every turn (default headers)
//	6    no headers, 3 turns (inferred), Trinity /feedback with the reply ids
//	7-8  X-Hone-Session, 2 turns, POST /v1/feedback then POST /v1/commit
//	9    no headers, 1 call (stays open until the idle timeout)
//
// Every other conversation streams.
func (s *soak) agent(ctx context.Context, a int) {
	for n := 0; ctx.Err() == nil; n++ {
		kind := (a*7 + n) % 10
		id := fmt.Sprintf("soak-%d-%d", a, n)
		stream := (a+n)%2 == 0
		turns := 3
		switch {
		case kind >= 7 && kind <= 8:
			turns = 2
		case kind == 9:
			turns = 1
		}
		msgs := []chatMsg{{Role: "system", Content: systemPrompt}, {Role: "user", Content: "Task " + id + ": find the answer."}}
		var replyIDs []string
		for t := 0; t < turns; t++ {
			if !s.wait(ctx) {
				return
			}
			hdr := map[string]string{}
			if kind <= 5 || kind == 7 || kind == 8 {
				hdr["X-Hone-Session"] = id
				hdr["X-Hone-Task"] = fmt.Sprintf("task-%d", n%50)
			}
			if kind <= 3 && t == turns-1 || kind == 4 || kind == 5 {
				hdr["X-Hone-Reward"] = strconv.FormatFloat(float64(n%5)/4, 'f', -1, 64)
				hdr["X-Hone-Commit"] = "1"
			}
			content, respID, ok := s.chat(ctx, msgs, hdr, stream)
			if !ok {
				break
			}
			replyIDs = append(replyIDs, respID)
			msgs = append(msgs, chatMsg{Role: "assistant", Content: content}, chatMsg{Role: "user", Content: fmt.Sprintf("Now check step %d.", t)})
		}
		switch {
		case kind == 6 && len(replyIDs) > 0:
			s.post(ctx, s.control+"/feedback", map[string]any{"msg_ids": replyIDs, "reward": float64(n%3) / 2, "task_id": n % 50})
		case kind == 7 || kind == 8:
			if s.post(ctx, s.control+"/v1/feedback", map[string]any{"session": id, "reward": float64(n%4) / 3}) {
				s.post(ctx, s.control+"/v1/commit", map[string]any{"session": id})
			}
		}
	}
}

// chat sends one call and reads the whole answer; it returns the reply text
// and the response id.
func (s *soak) chat(ctx context.Context, msgs []chatMsg, hdr map[string]string, stream bool) (string, string, bool) {
	body, _ := json.Marshal(map[string]any{"model": "stub", "messages": msgs, "max_tokens": 128, "stream": stream})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.data+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			s.fail("chat: %v", err)
		}
		return "", "", false
	}
	defer resp.Body.Close()
	s.calls.Add(1)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		s.fail("chat: %d %s", resp.StatusCode, b)
		return "", "", false
	}
	if !stream {
		var r struct {
			ID      string `json:"id"`
			Choices []struct {
				Message chatMsg `json:"message"`
			} `json:"choices"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || len(r.Choices) == 0 {
			if ctx.Err() == nil {
				s.fail("chat body: %v", err)
			}
			return "", "", false
		}
		return r.Choices[0].Message.Content, r.ID, true
	}
	var text strings.Builder
	respID, done := "", false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			done = true
			break
		}
		var ev struct {
			ID      string `json:"id"`
			Choices []struct {
				Delta chatMsg `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(line), &ev) != nil {
			s.fail("stream event: %.200s", line)
			return "", "", false
		}
		respID = ev.ID
		for _, c := range ev.Choices {
			text.WriteString(c.Delta.Content)
		}
	}
	if !done {
		if ctx.Err() == nil {
			s.fail("stream ended without [DONE]: %v", sc.Err())
		}
		return "", "", false
	}
	return text.String(), respID, true
}

// post sends a control-plane request; 200 is success.
func (s *soak) post(ctx context.Context, url string, body any) bool {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			s.fail("POST %s: %v", url, err)
		}
		return false
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		s.fail("POST %s: %d %s", url, resp.StatusCode, rb)
		return false
	}
	s.feedback.Add(1)
	return true
}

// trainer reads ready experiences and acknowledges them, as a remote
// trainer does, so sessions get consumed (and later calls continue them).
func (s *soak) trainer(ctx context.Context) {
	var after uint64
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/experiences?after=%d&limit=2000", s.control, after), nil)
		resp, err := s.client.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				s.fail("experiences: %v", err)
			}
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		last := after
		for sc.Scan() {
			var e struct {
				Cursor uint64 `json:"cursor"`
			}
			if json.Unmarshal(sc.Bytes(), &e) == nil && e.Cursor > last {
				last = e.Cursor
			}
		}
		resp.Body.Close()
		if last > after && s.post(ctx, s.control+"/v1/experiences/ack", map[string]uint64{"cursor": last}) {
			after = last
		}
	}
}

// trinityCommits closes the rewarded header-less sessions now and then, as
// AgentScope's TrainingRunner does after its feedback.
func (s *soak) trinityCommits(ctx context.Context) {
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			s.post(ctx, s.control+"/commit", nil)
		}
	}
}

// sample reads hone's memory from /proc and its metrics.
func (s *soak) sample(pid int) sample {
	sm := sample{Calls: s.calls.Load(), Errors: s.errors.Load()}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) < 2 {
				continue
			}
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "VmRSS:":
				sm.RSS = kb << 10
			case "RssAnon:":
				sm.Anon = kb << 10
			case "RssFile:", "RssShmem:":
				sm.File += kb << 10
			}
		}
	}
	m := s.metrics()
	sm.Heap, sm.Goroutines = m["go_memstats_heap_inuse_bytes"], m["go_goroutines"]
	sm.Dropped, sm.Orphans = m["hone_capture_dropped_total"], m["hone_capture_orphan_calls_total"]
	sm.Open, sm.Ready = m[`hone_capture_sessions{state="open"}`], m[`hone_capture_sessions{state="ready"}`]
	sm.Continued, sm.Rebuilt = m["hone_capture_continuations_total"], m["hone_capture_rebuilds_total"]
	sm.Limit, sm.Queue = m["go_gc_gomemlimit_bytes"], m["hone_capture_queue_depth"]
	return sm
}

// metrics reads the Prometheus text of the control plane.
func (s *soak) metrics() map[string]float64 {
	out := map[string]float64{}
	resp, err := s.client.Get(s.control + "/metrics")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(l[i+1:], 64); err == nil {
			out[l[:i]] = v
		}
	}
	return out
}

// honeProc is a running hone serve.
type honeProc struct {
	cmd           *exec.Cmd
	data, control string
	logs          *tailBuffer
	exited        chan struct{}
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func startHone(cfg config, data, engine string) (*honeProc, error) {
	da, err := freeAddr()
	if err != nil {
		return nil, err
	}
	ca, err := freeAddr()
	if err != nil {
		return nil, err
	}
	h := &honeProc{data: "http://" + da, control: "http://" + ca, logs: &tailBuffer{}, exited: make(chan struct{})}
	h.cmd = exec.Command(cfg.Bin, "serve", "--data", filepath.Join(data, "hone"), "--engine", engine, "--listen", da, "--control-listen", ca)
	h.cmd.Env = append(os.Environ(), cfg.Env...)
	h.cmd.Stdout, h.cmd.Stderr = h.logs, h.logs
	if err := h.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cfg.Bin, err)
	}
	go func() { _ = h.cmd.Wait(); close(h.exited) }()
	c := &http.Client{Timeout: 2 * time.Second}
	ok := func(url string) bool {
		resp, err := c.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if !h.alive() {
			return nil, fmt.Errorf("hone serve exited at start:\n%s", h.logs.tail())
		}
		if ok(h.control+"/healthz") && ok(h.data+"/v1/models") {
			return h, nil
		}
	}
	h.stop()
	return nil, fmt.Errorf("hone serve not ready after 60s:\n%s", h.logs.tail())
}

func (h *honeProc) alive() bool {
	select {
	case <-h.exited:
		return false
	default:
		return true
	}
}

// stop ends hone serve gracefully (SIGTERM), then for good.
func (h *honeProc) stop() {
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.exited:
	case <-time.After(20 * time.Second):
		_ = h.cmd.Process.Kill()
		<-h.exited
	}
}

// tailBuffer keeps the last 16 KB written to it.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 128<<10 { // a crash's trace fits in what is kept
		t.b = append(t.b[:0], t.b[len(t.b)-64<<10:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) tail() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// buildHone builds cmd/hone into dir.
func buildHone(dir string) (string, error) {
	bin := filepath.Join(dir, "hone")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/hone-rl/hone/cmd/hone").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("hone does not build: %w\n%s", err, out)
	}
	return bin, nil
}

// check judges a run: no errors, RSS under maxRSS, and flat: the last
// samples are no more than growth above the samples of the second quarter.
func (r *result) check(maxRSS int64, growth float64) error {
	var errs []error
	if r.Errors > 0 {
		errs = append(errs, fmt.Errorf("%d errors; first: %s", r.Errors, strings.Join(r.FirstErrs, "; ")))
	}
	if r.Calls == 0 {
		errs = append(errs, errors.New("no call was answered"))
	}
	if r.MaxRSS > maxRSS {
		errs = append(errs, fmt.Errorf("RSS reached %.1f MiB, over %.0f MiB", mib(r.MaxRSS), mib(maxRSS)))
	}
	if n := len(r.Samples); n >= 8 && growth > 0 {
		var mid, end int64
		for _, s := range r.Samples[n/4 : n/2] {
			mid = max(mid, s.RSS)
		}
		for _, s := range r.Samples[n-n/4:] {
			end = max(end, s.RSS)
		}
		if float64(end) > float64(mid)*(1+growth) {
			errs = append(errs, fmt.Errorf("RSS not flat: %.1f MiB in the last quarter, %.1f MiB in the second", mib(end), mib(mid)))
		}
	}
	return errors.Join(errs...)
}
