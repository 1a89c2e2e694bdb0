package peers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/proxy"
	"github.com/hone-rl/hone/trainer"
	"github.com/prometheus/client_golang/prometheus"
)

// honeStack is hone as `hone serve` wires it (cmd/hone/serve.go): the data
// plane over a Badger store, the store's feedback routes also mounted on the
// data plane (served there as proxy.data_plane_feedback allows), and the
// control plane with the store's routes.
type honeStack struct {
	data    string // data plane base URL
	control string // control plane base URL
	store   *capture.Store
	srv     *proxy.Server
}

// startHoneStack starts a honeStack in front of engineURL; opt may change
// the proxy options.
func startHoneStack(t *testing.T, engineURL string, opt func(*proxy.Options)) *honeStack {
	t.Helper()
	reg := prometheus.NewRegistry()
	store, err := capture.Open(filepath.Join(t.TempDir(), "capture"), capture.DefaultOptions(), reg)
	if err != nil {
		t.Fatal(err)
	}
	o := proxy.DefaultOptions()
	o.Upstream.Engines = []proxy.EngineOptions{{URL: engineURL}}
	// vLLM on the CPU of a loaded 2-core machine (its OpenMP threads
	// oversubscribed) can go quiet longer than the default 60 s between two
	// events of a stream: TestAgentScopePython's stream was cut after 68 s in
	// one .ci/run beside a whole-repo staticcheck (4.7-8.9 s alone). These
	// tests are not about timeouts; the first byte's bound applies between
	// events too.
	o.Upstream.Timeouts.Idle = o.Upstream.Timeouts.FirstByte
	if opt != nil {
		opt(&o)
	}
	srv, err := proxy.New(o, store, reg, nil)
	if err != nil {
		store.Close()
		t.Fatal(err)
	}
	fb := chi.NewRouter()
	store.Routes(fb)
	for _, p := range []string{"/feedback", "/commit", "/v1/feedback", "/v1/commit"} {
		srv.Mount(p, fb)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		store.Close()
		t.Fatal(err)
	}
	go srv.Serve(ln)
	ctl := httptest.NewServer(proxy.NewControl(srv, "", reg, store.Routes))
	t.Cleanup(func() {
		ctl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		store.Close()
	})
	return &honeStack{data: "http://" + ln.Addr().String(), control: ctl.URL, store: store, srv: srv}
}

// session reads GET /v1/sessions/{id} from the control plane.
func (h *honeStack) session(t *testing.T, id string) capture.SessionView {
	t.Helper()
	resp, err := http.Get(h.control + "/v1/sessions/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/sessions/%s: %d %s", id, resp.StatusCode, b)
	}
	var v struct {
		capture.Session
		Reward    float64            `json:"reward"`
		CallViews []capture.CallView `json:"calls_detail"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("GET /v1/sessions/%s: %v: %s", id, err, b)
	}
	return capture.SessionView{Session: &v.Session, Reward: v.Reward, CallViews: v.CallViews}
}

// experiences polls GET /v1/experiences until keep accepts the ready
// experiences (or 60 s pass) and returns them.
func (h *honeStack) experiences(t *testing.T, keep func([]capture.Experience) bool) []capture.Experience {
	t.Helper()
	src := trainer.HTTPSource{URL: h.control}
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := src.Fetch(context.Background(), 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if keep(out) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s, the %d ready experiences are not the ones awaited", len(out))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ofSession returns the experiences of one session.
func ofSession(exps []capture.Experience, session string) []capture.Experience {
	var out []capture.Experience
	for _, e := range exps {
		if e.Session == session {
			out = append(out, e)
		}
	}
	return out
}

// checkTrajectory: tokens, mask and logprobs align, every step span is
// exactly the mask-1 tokens, each with a logprob <= 0.
func checkTrajectory(t *testing.T, e capture.Experience) {
	t.Helper()
	if len(e.Tokens) == 0 || len(e.Mask) != len(e.Tokens) || len(e.Logprobs) != len(e.Tokens) {
		t.Fatalf("experience %s: %d tokens, %d mask, %d logprobs", e.Session, len(e.Tokens), len(e.Mask), len(e.Logprobs))
	}
	if len(e.Steps) == 0 {
		t.Fatalf("experience %s: no steps", e.Session)
	}
	ones := 0
	for i, m := range e.Mask {
		if m == 1 {
			ones++
			if e.Logprobs[i] > 0 {
				t.Errorf("experience %s token %d: logprob %v > 0", e.Session, i, e.Logprobs[i])
			}
		}
	}
	span := 0
	for _, s := range e.Steps {
		if s.Start < 0 || s.End > len(e.Tokens) || s.End <= s.Start {
			t.Fatalf("experience %s: step %+v out of range", e.Session, s)
		}
		for i := s.Start; i < s.End; i++ {
			if e.Mask[i] != 1 {
				t.Fatalf("experience %s: step %+v: token %d has mask 0", e.Session, s, i)
			}
		}
		span += s.End - s.Start
	}
	if span != ones {
		t.Errorf("experience %s: %d mask-1 tokens, %d in steps", e.Session, ones, span)
	}
}

// stepCalls is the set of calls on a session's trajectories.
func stepCalls(exps []capture.Experience) map[string]bool {
	out := map[string]bool{}
	for _, e := range exps {
		for _, s := range e.Steps {
			out[s.Call] = true
		}
	}
	return out
}

// wireTap is a TCP relay in front of hone that keeps every byte clients
// send, so a test sees header names spelled as they went on the wire.
type wireTap struct {
	url string
	mu  sync.Mutex
	buf bytes.Buffer
}

func newWireTap(t *testing.T, upstream string) *wireTap {
	t.Helper()
	target := strings.TrimPrefix(upstream, "http://")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &wireTap{url: "http://" + ln.Addr().String()}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go w.relay(c, target)
		}
	}()
	return w
}

func (w *wireTap) relay(c net.Conn, target string) {
	defer c.Close()
	u, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer u.Close()
	go func() {
		io.Copy(c, u)
		c.Close()
	}()
	io.Copy(u, io.TeeReader(c, w))
}

// Write keeps what the client sent.
func (w *wireTap) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *wireTap) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// onWire returns the spelling of each header line "name: value" in raw
// HTTP/1.1 requests, matching the name case-insensitively.
func onWire(wire, name, value string) []string {
	var out []string
	for _, line := range strings.Split(wire, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(k, name) && strings.TrimSpace(v) == value {
			out = append(out, k)
		}
	}
	return out
}

// needPython returns the peers' interpreter, skipping (failing under
// HONE_REQUIRE_PEERS=1) without it.
func needPython(t *testing.T) string {
	t.Helper()
	py, err := Python()
	if err != nil {
		if Required() && !testing.Short() {
			t.Fatalf("HONE_REQUIRE_PEERS=1: %v", err)
		}
		t.Skip(err)
	}
	return py
}

// needTokenizer returns the folder of Qwen3's tokenizer (the one vLLM serves
// here), failing without it.
func needTokenizer(t *testing.T) string {
	t.Helper()
	dir, err := Qwen3TokenizerDir()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// runPeerScript runs scripts/peers/NAME with the peers' Python and returns
// its stdout's last line parsed as JSON into out. A failing script fails the
// test with its output.
func runPeerScript(t *testing.T, py, name string, timeout time.Duration, out any, args ...string) {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, append([]string{filepath.Join(root, "scripts", "peers", name)}, args...)...)
	cmd.Env = append(cmd.Environ(), "HF_HUB_OFFLINE=1", "TRANSFORMERS_OFFLINE=1", "PYTHONUNBUFFERED=1",
		"OPENAI_API_KEY=sk-hone-test", "NO_PROXY=127.0.0.1,localhost")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	t.Logf("%s ran in %s", name, time.Since(start).Round(10*time.Millisecond))
	if err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", name, err, stdout.String(), tailString(stderr.String(), 60))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), out); err != nil {
		t.Fatalf("%s: last line is not its JSON result: %v\nstdout:\n%s\nstderr:\n%s", name, err, stdout.String(), tailString(stderr.String(), 40))
	}
}

func tailString(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// openaiClientResult is what scripts/peers/openai_client.py reports.
type openaiClientResult struct {
	Calls []struct {
		Kind     string `json:"kind"` // chat, stream, tool_call, tool_result
		ID       string `json:"id"`   // the response id the client saw
		Session  string `json:"session"`
		Call     string `json:"call"`
		Policy   string `json:"policy"`
		Content  string `json:"content"`
		Finish   string `json:"finish"`
		Chunks   int    `json:"chunks"`
		ToolName string `json:"tool_name"`
		ToolArgs string `json:"tool_args"`
	} `json:"calls"`
}

// TestOpenAIPythonClient drives hone (in front of vLLM) with the openai
// Python client: a chat, a streamed follow-up, a forced tool call the
// client parses, and the tool result's answer, with hone's four headers as
// the client's default_headers. The headers reach hone spelled as given,
// the client sees vLLM's answers without what hone injected, and the
// session becomes a ready experience with the task, the reward and every
// call on its trajectories.
func TestOpenAIPythonClient(t *testing.T) {
	v := needVLLM(t)
	py := needPython(t)
	tokDir := needTokenizer(t)
	h := startHoneStack(t, v.URL, nil)
	tap := newWireTap(t, h.data)
	const session, task, reward = "py-openai-1", "py-openai-task", "0.75"
	var res openaiClientResult
	runPeerScript(t, py, "openai_client.py", 5*time.Minute, &res,
		"--base-url", tap.url+"/v1", "--model", v.Model, "--session", session, "--task", task, "--reward", reward, "--tokenizer", tokDir)

	kinds := []string{"chat", "stream", "tool_call", "tool_result"}
	if len(res.Calls) != len(kinds) {
		t.Fatalf("client made %d calls, want %d: %+v", len(res.Calls), len(kinds), res.Calls)
	}
	for i, c := range res.Calls {
		if c.Kind != kinds[i] {
			t.Errorf("call %d: kind %q, want %q", i, c.Kind, kinds[i])
		}
		if c.Session != session || c.Call == "" || c.Policy == "" {
			t.Errorf("call %d (%s): response headers X-Hone-Session %q, X-Hone-Call %q, X-Hone-Policy %q", i, c.Kind, c.Session, c.Call, c.Policy)
		}
		if !strings.HasPrefix(c.ID, "chatcmpl-") {
			t.Errorf("call %d (%s): response id %q", i, c.Kind, c.ID)
		}
	}
	if res.Calls[1].Chunks < 2 {
		t.Errorf("stream: %d chunks", res.Calls[1].Chunks)
	}
	if tc := res.Calls[2]; tc.ToolName != "add" {
		t.Errorf("forced tool call: name %q, finish %q, arguments %s", tc.ToolName, tc.Finish, tc.ToolArgs)
	}

	// Every call carries the four headers; their spelling on the wire is
	// the client's (hone reads them case-insensitively).
	wire := tap.String()
	for _, hdr := range [][2]string{{"X-Hone-Session", session}, {"X-Hone-Task", task}, {"X-Hone-Reward", reward}, {"X-Hone-Commit", "1"}} {
		spellings := onWire(wire, hdr[0], hdr[1])
		if len(spellings) != len(kinds) {
			t.Errorf("%s: %s on the wire %d times, want %d", hdr[0], hdr[1], len(spellings), len(kinds))
			continue
		}
		t.Logf("on the wire as %q", spellings[0])
	}

	exps := h.experiences(t, func(all []capture.Experience) bool {
		return len(stepCalls(ofSession(all, session))) == len(kinds)
	})
	mine := ofSession(exps, session)
	for _, e := range mine {
		checkTrajectory(t, e)
		if e.Task != task || e.Reward != 0.75 {
			t.Errorf("experience of %s: task %q reward %v, want %q %s", session, e.Task, e.Reward, task, reward)
		}
	}
	sv := h.session(t, session)
	if sv.State != capture.StateReady || sv.Calls != len(kinds) || sv.Reward != 0.75 || sv.Task != task {
		t.Errorf("session %s: state %s, %d calls, reward %v, task %q", session, sv.State, sv.Calls, sv.Reward, sv.Task)
	}
	byCall := map[string]capture.CallView{}
	for _, c := range sv.CallViews {
		byCall[c.ID] = c
	}
	for i, c := range res.Calls {
		cv, ok := byCall[c.Call]
		if !ok {
			t.Errorf("call %d (%s): X-Hone-Call %s not in the session", i, c.Kind, c.Call)
			continue
		}
		if cv.ResponseID != c.ID || cv.CompletionTokens == 0 || cv.MeanLogprob == nil {
			t.Errorf("call %d (%s): recorded response id %q (client saw %q), %d completion tokens, mean logprob %v",
				i, c.Kind, cv.ResponseID, c.ID, cv.CompletionTokens, cv.MeanLogprob)
		}
	}
	t.Logf("%d experiences for the session, drift %d, %s", len(mine), sv.Drift, fmt.Sprint(sv.Closed))
}
