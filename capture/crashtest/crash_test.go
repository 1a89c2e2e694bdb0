// Package crashtest runs the hone binary (hone serve) as a subprocess in
// front of a vLLM-format stub engine. TestEndToEnd checks what a session
// becomes on /v1/experiences; TestCrashRecovery kills hone serve with
// SIGKILL under load, again and again (HONE_CRASH_ROUNDS, default 3; make
// test-crash runs 100), and checks after every restart that the trace store
// opens, that every reward and commit acknowledged before a kill is still
// there (through /v1/feedback and /v1/commit, or through X-Hone-Reward and
// X-Hone-Commit on a call answered 200), with every call answered before it
// in its session's experience, and that no experience is queued twice; at
// the end, that every captured call is one the load sent, once, and that a
// captured call whose answer never reached the client was in flight at a
// kill (see TestCrashRecovery). A hone that does not build or start fails
// the test.
package crashtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// workers is the load's concurrency: each worker sends one request at a
// time, so at most workers requests are in flight when hone is killed.
const workers = 4

// sentCall is one chat call the load sent.
type sentCall struct {
	turn int
	// prompt is the number of prompt tokens the stub answers for it
	// (len(render(messages))): it tells a session's two calls apart when
	// no answer, and so no call id, reached the client
	prompt     int
	start, end time.Time // before the request was sent; after its answer was read or failed
	status     int       // 0: the connection failed or the answer did not arrive whole
	err        error     // nil: a chat completion answered 200
	id         string    // X-Hone-Call of an answer 200
}

// outcome is what the load sent for one session and saw acknowledged.
type outcome struct {
	round     int // the kill it ran before: its session id starts with k<round>-
	kind      int // how reward and commit are sent: see load
	reward    *float64
	committed bool
	// calls are the chat calls sent, in order; calls[:callsOK] were
	// answered 200 (a worker stops at its first call that is not)
	calls   []*sentCall
	callsOK int
	// callsAcked is how many of its calls were answered before its reward
	// and commit were acknowledged: all of them (calls[:callsAcked]) must
	// be in the store and in the experience
	callsAcked int
}

// killWindow is when one SIGKILL was sent and when the process was reaped:
// a request in flight at the kill started before end and ended after start.
type killWindow struct{ start, end time.Time }

type ledger struct {
	mu       sync.Mutex
	sessions map[string]*outcome
	sent     int
	kills    []killWindow // by round
}

func (l *ledger) get(id string) *outcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	o, ok := l.sessions[id]
	if !ok {
		o = &outcome{}
		l.sessions[id] = o
	}
	return o
}

// kills is the number of SIGKILLs: HONE_CRASH_ROUNDS (make test-crash sets
// 100), else 3 so that make test runs a short form.
func kills(*testing.T) int {
	if v, err := strconv.Atoi(os.Getenv("HONE_CRASH_ROUNDS")); err == nil && v > 0 {
		return v
	}
	return 3
}

// TestCrashRecovery kills hone serve with SIGKILL while workers clients
// run sessions against it, kills() times, restarting it on the same store
// after each kill. What must hold, exactly:
//
//   - No acknowledged data is lost (checked after every restart, verify,
//     for the sessions of the round just killed and a sample of older
//     ones; for all of them at the last start): every reward and commit
//     acknowledged before a kill is stored, and
//     every call answered 200 before that acknowledgement is in the store,
//     by its X-Hone-Call id, and counted in the session's experience. Control-plane
//     writes return once durable, and a call carrying X-Hone-Reward or
//     X-Hone-Commit is answered after they are.
//   - Captured calls are calls sent (at the end, report): each call in the
//     store is one the load sent in that session, and no sent call is
//     stored twice. A call answered 200 is identified by its X-Hone-Call
//     id; one that got no answer by its session and its prompt (its turn).
//   - A captured call whose answer never reached the client was in flight
//     at a kill: it started before the process was reaped and ended, after
//     SIGKILL was sent, with a connection error (no status at all, neither
//     200 nor an error status). hone records the engine's answer before or while the bytes
//     go out to the client, so a kill in between leaves a call that is
//     stored though its client saw a broken connection: that is right, and
//     the test names such calls by id. They number at most workers per
//     kill (each worker has one request in flight at a time).
//
// Not required: that every call answered 200 is stored. One with no
// acknowledged reward or commit after it may be lost with a kill, as
// capture is asynchronous (the hot path never waits on disk). Nor is the
// number of captured calls bounded by the calls answered: it is bounded by
// the calls answered plus those in flight at the kills.
func TestCrashRecovery(t *testing.T) {
	bin := buildHone(t)
	stub := newStub(t)
	data := t.TempDir()
	led := &ledger{sessions: map[string]*outcome{}}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	n := kills(t)
	for i := 0; i <= n; i++ {
		srv, err := startServe(bin, data, stub.url)
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		verify(t, srv, led, i, i == n, rng)
		if i == n {
			srv.kill()
			break
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() { defer wg.Done(); load(ctx, srv, led, i, fmt.Sprintf("k%d-w%d", i, w)) }()
		}
		time.Sleep(time.Duration(200+rng.IntN(1300)) * time.Millisecond)
		k := killWindow{start: time.Now()}
		srv.kill()
		k.end = time.Now()
		led.kills = append(led.kills, k)
		cancel()
		wg.Wait()
	}
	report(t, led, data, bin, stub.url)
}

// report checks, on a last start, every call in the store against the
// calls the load sent (see TestCrashRecovery) and logs the counts.
func report(t *testing.T, led *ledger, data, bin, stubURL string) {
	srv, err := startServe(bin, data, stubURL)
	if err != nil {
		t.Fatalf("final start: %v", err)
	}
	defer srv.kill()
	ok, captured, capturedOK, committed, byHeader := 0, 0, 0, 0, 0
	inFlight := make([][]string, len(led.kills)) // by kill: captured calls whose answer never reached the client
	for id, o := range led.sessions {
		ok += o.callsOK
		for i, c := range o.calls[:o.callsOK] {
			if c.id == "" {
				t.Fatalf("session %s: call %d answered 200 without an X-Hone-Call id", id, i)
			}
		}
		if o.committed {
			committed++
			if o.kind != kindEndpoints {
				byHeader++
			}
		}
		stored, found := srv.storedCalls(t, id)
		if !found {
			continue
		}
		matched := make([]bool, len(o.calls))
		for _, c := range stored {
			i := slices.IndexFunc(o.calls, func(s *sentCall) bool { return s.id != "" && s.id == c.ID })
			if i < 0 { // no answer reached the client: the sent call of the same turn that got none
				i = slices.IndexFunc(o.calls, func(s *sentCall) bool { return s.id == "" && s.prompt == c.PromptTokens })
			}
			if i < 0 {
				t.Fatalf("session %s holds call %s (%d prompt tokens) that the load did not send: sent %s",
					id, c.ID, c.PromptTokens, describe(o.calls))
			}
			s := o.calls[i]
			if matched[i] {
				t.Fatalf("session %s holds turn %d twice (call %s): sent %s", id, s.turn, c.ID, describe(o.calls))
			}
			matched[i] = true
			captured++
			if c.PromptTokens != s.prompt {
				t.Fatalf("session %s: call %s (turn %d) holds %d prompt tokens, %d were sent", id, c.ID, s.turn, c.PromptTokens, s.prompt)
			}
			if s.id != "" {
				capturedOK++
				continue
			}
			k := led.kills[o.round]
			if s.status != 0 || !s.start.Before(k.end) || s.end.Before(k.start) {
				t.Fatalf("session %s holds call %s (turn %d) whose answer never reached the client, yet it was not in flight at kill %d "+
					"(relative to SIGKILL: sent %v, ended %v, process reaped %v; status %d, %v)",
					id, c.ID, s.turn, o.round, s.start.Sub(k.start), s.end.Sub(k.start), k.end.Sub(k.start), s.status, s.err)
			}
			inFlight[o.round] = append(inFlight[o.round], fmt.Sprintf("%s (session %s turn %d)", c.ID, id, s.turn))
		}
	}
	unanswered := 0
	for r, calls := range inFlight {
		if len(calls) > workers {
			t.Fatalf("kill %d: %d captured calls never answered, more than the %d requests in flight: %v", r, len(calls), workers, calls)
		}
		unanswered += len(calls)
		if len(calls) > 0 {
			t.Logf("kill %d: captured, answer cut by the kill: %s", r, strings.Join(calls, ", "))
		}
	}
	if committed == 0 || byHeader == 0 {
		t.Fatalf("no acknowledged commit to check (%d, %d through headers): the load did not run", committed, byHeader)
	}
	t.Logf("%d kills: calls sent %d, answered 200 %d, captured %d: %d answered, %d cut by a kill (at most %d a kill); "+
		"%d answered with no acknowledged reward or commit after them lost with a kill (capture is asynchronous); "+
		"%d sessions, %d committed with acknowledged reward (%d through headers), "+
		"each present exactly once in the ready queue with every call answered before the acknowledgement",
		kills(t), led.sent, ok, captured, capturedOK, unanswered, workers, ok-capturedOK,
		len(led.sessions), committed, byHeader)
}

// describe lists sent calls for a failure message.
func describe(calls []*sentCall) string {
	var b strings.Builder
	for _, c := range calls {
		fmt.Fprintf(&b, "[turn %d: %d prompt tokens, status %d, call %q, err %v] ", c.turn, c.prompt, c.status, c.id, c.err)
	}
	return b.String()
}

func buildHone(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "hone")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/hone-rl/hone/cmd/hone").CombinedOutput()
	if err != nil {
		t.Fatalf("hone does not build: %v\n%s", err, out)
	}
	return bin
}

type server struct {
	cmd     *exec.Cmd
	data    string
	control string
	logs    *bytes.Buffer
	exited  chan struct{} // closed once the process has been waited for
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// startServe starts hone serve on free ports. A port freeAddr found free
// can be taken before hone binds it (the load's client connections use
// ephemeral ports too): hone then exits at once saying so, and is started
// again on other ports.
func startServe(bin, data, engine string) (*server, error) {
	for try := 0; ; try++ {
		s, err := startServeOnce(bin, data, engine)
		if err == nil || !errors.Is(err, errPortTaken) || try == 4 {
			return s, err
		}
	}
}

var errPortTaken = errors.New("a port was taken before hone bound it")

func startServeOnce(bin, data, engine string) (*server, error) {
	da, err := freeAddr()
	if err != nil {
		return nil, err
	}
	ca, err := freeAddr()
	if err != nil {
		return nil, err
	}
	s := &server{data: "http://" + da, control: "http://" + ca, logs: &bytes.Buffer{}}
	s.cmd = exec.Command(bin, "serve", "--data", data, "--engine", engine, "--listen", da, "--control-listen", ca)
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	s.exited = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			out := s.logs.String()
			if strings.Contains(out, "address already in use") {
				return nil, fmt.Errorf("%w: %s", errPortTaken, out)
			}
			return nil, fmt.Errorf("hone exited before it was ready; output:\n%s", out)
		default:
		}
		if get(s.control+"/healthz") == http.StatusOK && get(s.data+"/v1/models") == http.StatusOK {
			return s, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.kill()
	return nil, fmt.Errorf("not ready after 30s; output:\n%s", s.logs.String())
}

func (s *server) kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

var client = &http.Client{Timeout: 10 * time.Second}

func get(url string) int {
	resp, err := client.Get(url)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func postJSON(ctx context.Context, url string, body any, hdr map[string]string, out any) int {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0 // the answer did not arrive whole: not acknowledged
	}
	if out != nil && resp.StatusCode == http.StatusOK {
		if json.Unmarshal(rb, out) != nil {
			return 0
		}
	}
	return resp.StatusCode
}

// How a session of the load sends its reward and commit.
const (
	kindEndpoints  = iota // POST /v1/feedback, then POST /v1/commit
	kindLastHeader        // X-Hone-Reward and X-Hone-Commit on its last call
	kindEveryCall         // both headers on every call (a client's default headers)
	kinds
)

// load runs 2-turn sessions with a reward and a commit until ctx ends or a
// request is not answered 200; round is the kill it runs before.
func load(ctx context.Context, s *server, led *ledger, round int, prefix string) {
	for n := 0; ctx.Err() == nil; n++ {
		id := fmt.Sprintf("%s-%d", prefix, n)
		o := led.get(id)
		o.round, o.kind = round, n%kinds
		reward := float64(n%3) / 2
		msgs := []chatMsg{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hello " + id}}
		for turn := 0; turn < 2; turn++ {
			hdr := map[string]string{"X-Hone-Session": id}
			headers := o.kind == kindEveryCall || o.kind == kindLastHeader && turn == 1
			if headers {
				hdr["X-Hone-Reward"], hdr["X-Hone-Commit"] = strconv.FormatFloat(reward, 'f', -1, 64), "1"
			}
			c := &sentCall{turn: turn, prompt: len(render(msgs))}
			led.mu.Lock()
			led.sent++
			o.calls = append(o.calls, c)
			led.mu.Unlock()
			content := chatCall(ctx, s, msgs, hdr, c)
			if c.err != nil {
				return
			}
			led.mu.Lock()
			o.callsOK++
			if headers { // the answer came after reward and commit were durable
				o.reward, o.committed, o.callsAcked = &reward, true, o.callsOK
			}
			led.mu.Unlock()
			msgs = append(msgs, chatMsg{Role: "assistant", Content: content}, chatMsg{Role: "user", Content: "and then?"})
		}
		if o.kind != kindEndpoints {
			continue
		}
		if postJSON(ctx, s.control+"/v1/feedback", map[string]any{"session": id, "reward": reward}, nil, nil) != http.StatusOK {
			return
		}
		led.mu.Lock()
		o.reward = &reward
		led.mu.Unlock()
		if postJSON(ctx, s.control+"/v1/commit", map[string]any{"session": id}, nil, nil) != http.StatusOK {
			return
		}
		led.mu.Lock()
		o.committed, o.callsAcked = true, o.callsOK
		led.mu.Unlock()
	}
}

// chatCall sends one chat call and fills in c; it returns the answer's
// content. c.status stays 0 when the connection failed or the answer did
// not arrive whole; c.err is set unless a chat completion came back 200.
func chatCall(ctx context.Context, s *server, msgs []chatMsg, hdr map[string]string, c *sentCall) string {
	defer func() { c.end = time.Now() }()
	b, _ := json.Marshal(map[string]any{"model": "stub", "messages": msgs, "max_tokens": 16})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.data+"/v1/chat/completions", bytes.NewReader(b))
	if err != nil {
		c.err = err
		return ""
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	c.start = time.Now()
	resp, err := client.Do(req)
	if err != nil {
		c.err = err
		return ""
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	if err != nil {
		c.err = err // the answer did not arrive whole: not acknowledged
		return ""
	}
	c.status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		c.err = fmt.Errorf("%s", rb)
		return ""
	}
	var r struct {
		Choices []struct {
			Message chatMsg `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(rb, &r); err != nil || len(r.Choices) == 0 {
		c.err = fmt.Errorf("answer 200 is no chat completion (%v): %s", err, rb)
		return ""
	}
	c.id = resp.Header.Get("X-Hone-Call")
	return r.Choices[0].Message.Content
}

type sessionView struct {
	State   string `json:"state"`
	Calls   int    `json:"calls"`
	Rewards []struct {
		Value float64 `json:"value"`
	} `json:"rewards"`
	ContinuedBy string       `json:"continued_by"`
	CallsDetail []storedCall `json:"calls_detail"`
}

// storedCall is the part of capture.CallView the test reads.
type storedCall struct {
	ID           string `json:"id"`
	PromptTokens int    `json:"prompt_tokens"`
}

func (s *server) session(id string) (sessionView, int) {
	var v sessionView
	resp, err := client.Get(s.control + "/v1/sessions/" + id)
	if err != nil {
		return v, 0
	}
	defer resp.Body.Close()
	_ = json.NewDecoder(resp.Body).Decode(&v)
	return v, resp.StatusCode
}

// storedCalls returns the calls stored for session id and its
// continuations (none here: nothing consumes the ready queue); found is
// false when the session is not stored at all.
func (s *server) storedCalls(t *testing.T, id string) (calls []storedCall, found bool) {
	t.Helper()
	for part := id; part != ""; {
		v, st := s.session(part)
		if st == http.StatusNotFound && part == id {
			return nil, false
		}
		if st != http.StatusOK {
			t.Fatalf("session %s answers %d", part, st)
		}
		if v.Calls != len(v.CallsDetail) {
			t.Fatalf("session %s counts %d calls, %d are stored", part, v.Calls, len(v.CallsDetail))
		}
		calls = append(calls, v.CallsDetail...)
		part = v.ContinuedBy
	}
	return calls, true
}

// verify checks every acknowledged feedback and commit, and that the ready
// queue holds each session at most once with increasing cursors.
func verify(t *testing.T, s *server, led *ledger, restart int, all bool, rng *rand.Rand) {
	t.Helper()
	// every session after the kill that could have hurt it (the last
	// round's), older ones sampled: checking them all at each restart made
	// the 100-kill run quadratic (23 minutes on a 2-core VM)
	sample := min(1, float64(verifySample)/float64(max(1, len(led.sessions))))
	for id, o := range led.sessions {
		if !all && o.round < restart-1 && rng.Float64() >= sample {
			continue
		}
		if o.reward == nil && !o.committed {
			continue
		}
		v, st := s.session(id)
		if st != http.StatusOK {
			t.Fatalf("restart %d: session %s (feedback acknowledged) answers %d", restart, id, st)
		}
		if o.reward != nil && !hasReward(v, *o.reward) {
			t.Fatalf("restart %d: session %s lost its acknowledged reward %v: %+v", restart, id, *o.reward, v)
		}
		if o.committed && v.State != "ready" && v.State != "consumed" {
			t.Fatalf("restart %d: committed, rewarded session %s (kind %d) is %s", restart, id, o.kind, v.State)
		}
		stored, _ := s.storedCalls(t, id)
		for _, c := range o.calls[:o.callsAcked] {
			if !slices.ContainsFunc(stored, func(sc storedCall) bool { return sc.ID == c.id }) {
				t.Fatalf("restart %d: session %s (kind %d) lost call %s (turn %d), answered before its reward and commit: holds %+v",
					restart, id, o.kind, c.id, c.turn, stored)
			}
		}
	}
	seen := map[string]bool{}
	steps := map[string]int{}
	var last uint64
	for _, e := range experiences(t, s) {
		if e.Cursor <= last {
			t.Fatalf("restart %d: cursor %d after %d", restart, e.Cursor, last)
		}
		last = e.Cursor
		if seen[e.Session] {
			t.Fatalf("restart %d: session %s queued twice", restart, e.Session)
		}
		seen[e.Session] = true
		steps[e.Session] = len(e.Steps)
	}
	for id, o := range led.sessions {
		if o.committed && !seen[id] {
			t.Fatalf("restart %d: committed session %s (kind %d) missing from the ready queue", restart, id, o.kind)
		}
		if o.committed && steps[id] < o.callsAcked {
			t.Fatalf("restart %d: the experience of %s (kind %d) holds %d calls, %d were answered before its reward and commit",
				restart, id, o.kind, steps[id], o.callsAcked)
		}
	}
}

// verifySample is about how many older sessions verify checks again at a
// restart.
const verifySample = 200

func hasReward(v sessionView, r float64) bool {
	for _, x := range v.Rewards {
		if x.Value == r {
			return true
		}
	}
	return false
}

type experience struct {
	Cursor  uint64            `json:"cursor"`
	Session string            `json:"session"`
	Steps   []json.RawMessage `json:"steps"`
}

func experiences(t *testing.T, s *server) []experience {
	t.Helper()
	var out []experience
	var after uint64
	for {
		resp, err := client.Get(fmt.Sprintf("%s/v1/experiences?after=%d&limit=1000", s.control, after))
		if err != nil {
			t.Fatalf("experiences: %v", err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("experiences: %d %v", resp.StatusCode, err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) == 1 && lines[0] == "" {
			return out
		}
		for _, l := range lines {
			var e experience
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatalf("experience line: %v", err)
			}
			out = append(out, e)
			after = e.Cursor
		}
	}
}
