// Package examples runs real agent frameworks (Node) through hone and
// checks what hone captured from them.
package examples

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/engine"
	"github.com/hone-rl/hone/model/modeltest"
	"github.com/hone-rl/hone/proxy"
	"github.com/hone-rl/hone/trainer"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"
)

// minNode is the oldest Node.js the current releases of these frameworks
// support (openai 7, ai 7, @ai-sdk/*, @langchain/openai 1: >=22; @mastra/core:
// >=22.13). package.json installs Node 24 into node_modules (the `node`
// package), which the tests prefer over the machine's.
const minNode = 22

// skipOrFail skips, or fails with HONE_REQUIRE_NODE=1.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("HONE_REQUIRE_NODE") == "1" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// nodeBin is the Node.js the agents run on: node_modules/.bin/node (from
// the `node` package, installed by make deps), else the one on PATH; it
// skips (or fails with HONE_REQUIRE_NODE=1) when neither is new enough.
func nodeBin(t *testing.T) string {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("node_modules", ".bin", "node"))
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		if bin, err = exec.LookPath("node"); err != nil {
			skipOrFail(t, "no node in examples/node_modules/.bin or on PATH (run make deps): %v", err)
		}
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		skipOrFail(t, "%s --version: %v", bin, err)
	}
	major := 0
	if m := regexp.MustCompile(`^v(\d+)\.`).FindStringSubmatch(strings.TrimSpace(string(out))); m != nil {
		major, _ = strconv.Atoi(m[1])
	}
	if major < minNode {
		skipOrFail(t, "%s is %s; the frameworks need Node >= %d (make deps installs it into examples/node_modules)",
			bin, strings.TrimSpace(string(out)), minNode)
	}
	return bin
}

// requirePackage skips (or, with HONE_REQUIRE_NODE=1, fails) without the
// installed npm package (make deps).
func requirePackage(t *testing.T, pkg string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join("node_modules", pkg, "package.json")); err != nil {
		skipOrFail(t, "examples/node_modules/%s missing; run make deps", pkg)
	}
}

// modelDir is the shipped prepared tiny model, else a random tiny model.
func modelDir(t *testing.T) string {
	if _, err := os.Stat("../testdata/tiny-model/config.json"); err == nil {
		return "../testdata/tiny-model"
	}
	return modeltest.Tiny(t, modeltest.Options{Seed: 1})
}

// embeddedEngine serves the tiny model as "tiny" with hone's engine.
func embeddedEngine(t *testing.T) string {
	e, err := engine.New(context.Background(), engine.Options{ModelDir: modelDir(t), ServedModelName: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	es := httptest.NewServer(e.Handler())
	t.Cleanup(func() { es.Close(); e.Close() })
	return es.URL
}

// fixtureEngine replays the proxy's vLLM fixtures as a tool-using model
// would answer: a hermes tool call (calculator "17 * 23") when the request
// offers tools and its last message is not a tool result, else a text
// reply; streamed when asked.
func fixtureEngine(t *testing.T) string {
	cases := filepath.Join("..", "proxy", "testdata", "cases")
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"tiny","object":"model","owned_by":"vllm","root":"tiny","parent":null}]}`))
	})
	mux.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		name := "chat"
		if gjson.GetBytes(body, "tools").IsArray() && gjson.GetBytes(body, "messages.@reverse.0.role").String() != "tool" {
			name = "chat_tools"
		}
		if !gjson.GetBytes(body, "stream").Bool() {
			b, _ := os.ReadFile(filepath.Join(cases, name, "upstream.json"))
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(b)
			return
		}
		b, _ := os.ReadFile(filepath.Join(cases, name+"_stream", "upstream.sse"))
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range strings.SplitAfter(string(b), "\n\n") {
			_, _ = w.Write([]byte(ev))
			w.(http.Flusher).Flush()
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// startHone runs a Badger store, the data plane in front of engineURL and a
// control plane, as hone serve does with its defaults.
func startHone(t *testing.T, engineURL string) (base, control string) {
	return startHoneWith(t, engineURL, nil, nil)
}

// startHoneWith is startHone with the options changed by mutate and the
// metrics in reg (nil: a fresh registry).
func startHoneWith(t *testing.T, engineURL string, mutate func(*proxy.Options), reg *prometheus.Registry) (base, control string) {
	store, err := capture.Open(filepath.Join(t.TempDir(), "capture"), capture.DefaultOptions(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	o := proxy.DefaultOptions()
	o.Upstream.Engines = []proxy.EngineOptions{{URL: engineURL}}
	if mutate != nil {
		mutate(&o)
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	srv, err := proxy.New(o, store, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln) //nolint:errcheck // ends with Shutdown
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	ctl := chi.NewRouter()
	store.Routes(ctl)
	cs := httptest.NewServer(ctl)
	t.Cleanup(cs.Close)
	return "http://" + ln.Addr().String() + "/v1", cs.URL
}

// runResult is the JSON line an example prints last.
type runResult struct {
	Framework string  `json:"framework"`
	Session   string  `json:"session"`
	Calls     int     `json:"calls"` // model calls, where the framework tells
	Reward    float64 `json:"reward"`
	Output    string  `json:"output"`
	Error     string  `json:"error"`
}

func runAgent(t *testing.T, node, script string, env ...string) runResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var r runResult
	if err != nil || json.Unmarshal([]byte(lines[len(lines)-1]), &r) != nil || r.Session == "" {
		t.Fatalf("node %s: %v\n%s", script, err, out)
	}
	t.Logf("%s: %d calls, output %q, error %q", r.Framework, r.Calls, r.Output, r.Error)
	return r
}

// frameworks are the agent frameworks hone is tested with; each example
// sends X-Hone-Session, -Task, -Reward and -Commit on every call through the
// framework's own default-headers option.
var frameworks = []struct {
	name, script, pkg string
	env               []string
}{
	{"openai", "openai_chat.mjs", "openai", nil},
	{"openai-agents-chat", "openai_agents.mjs", "@openai/agents", []string{"AGENTS_API=chat_completions"}},
	// its default, the Responses API, in front of an engine that answers
	// like a tool-using model (a reply the tiny model cuts at
	// max_output_tokens ends "incomplete", which the SDK treats as a failed
	// run, as it would with OpenAI)
	{"openai-agents", "openai_agents.mjs", "@openai/agents", []string{"ENGINE=fixtures"}},
	// the same over the embedded engine: the SDK parses hone's Responses
	// stream and the calls are captured, but the tiny model's first reply is
	// cut at max_output_tokens, so the run ends with the SDK's error for an
	// incomplete response and makes no follow-up
	{"openai-agents-embedded", "openai_agents.mjs", "@openai/agents", []string{"ENDS=incomplete"}},
	{"ai-sdk", "ai_sdk.mjs", "@ai-sdk/openai-compatible", nil},
	// @ai-sdk/openai's default model: the Responses API with store on, whose
	// follow-up names the first run's answers by item_reference
	{"ai-sdk-responses", "ai_sdk.mjs", "@ai-sdk/openai", []string{"AI_SDK_PROVIDER=responses"}},
	{"langgraph", "langgraph.mjs", "@langchain/langgraph", nil},
	{"mastra", "mastra.mjs", "@mastra/core", nil},
	{"llamaindex", "llamaindex.mjs", "llamaindex", nil},
}

// TestFrameworks runs each framework's agent through hone and checks that
// its run became ready training data under the session, task and reward it
// sent as default headers: every call of the session on its trajectories,
// token ids, one logprob per generated token, the loss mask on the generated
// tokens only.
func TestFrameworks(t *testing.T) {
	node := nodeBin(t)
	base, control := startHone(t, embeddedEngine(t))
	fixtures, fixturesControl := startHone(t, fixtureEngine(t))
	for i, fw := range frameworks {
		t.Run(fw.name, func(t *testing.T) {
			requirePackage(t, fw.pkg)
			session := fmt.Sprintf("%s-%d", fw.name, time.Now().UnixNano())
			task := fw.name + "-task"
			reward := 0.25 + 0.125*float64(i) // a different reward per framework
			base, control := base, control
			if slices.Contains(fw.env, "ENGINE=fixtures") {
				base, control = fixtures, fixturesControl
			}
			env := append([]string{"OPENAI_BASE_URL=" + base, "OPENAI_API_KEY=dummy", "HONE_SESSION=" + session,
				"HONE_TASK=" + task, "HONE_REWARD=" + strconv.FormatFloat(reward, 'g', -1, 64)}, fw.env...)
			r := runAgent(t, node, fw.script, env...)
			if r.Session != session {
				t.Fatalf("agent reports session %q, test gave %q", r.Session, session)
			}
			view, exps := waitSession(t, control, session)
			t.Logf("session %s: %d calls on %d experiences", session, view.Calls, len(exps))
			if view.Task != task || view.Reward != reward {
				t.Errorf("session %s: task %q reward %v, agent sent %q and %v", session, view.Task, view.Reward, task, reward)
			}
			// Every agent asks a question and a follow-up: at least two calls.
			minCalls := 2
			if slices.Contains(fw.env, "ENDS=incomplete") {
				if r.Error != "" && !strings.Contains(r.Error, `unsuccessful terminal state "response.incomplete"`) {
					t.Errorf("agent error %q, want the SDK's error for an incomplete response (or none)", r.Error)
				}
				minCalls = 1
			}
			if view.Calls < minCalls || (r.Calls > 0 && view.Calls != r.Calls) {
				t.Errorf("session %s holds %d calls, the agent made %d (at least 2)", session, view.Calls, r.Calls)
			}
			for _, c := range view.CallViews {
				if c.Status != capture.StatusOK {
					t.Errorf("call %s (seq %d): status %v", c.ID, c.Seq, c.Status)
				}
			}
			for _, e := range exps {
				if e.Task != task {
					t.Errorf("experience %s: task %q, agent sent %q", e.Session, e.Task, task)
				}
				checkTrajectory(t, e, reward)
			}
		})
	}
}

// sessionView reads GET /v1/sessions/{id} on the control plane.
func sessionView(t *testing.T, control, session string) capture.SessionView {
	t.Helper()
	resp, err := http.Get(control + "/v1/sessions/" + session)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("session %s: HTTP %d (hone did not take the X-Hone-Session header)", session, resp.StatusCode)
	}
	var v capture.SessionView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// waitSession waits for the ready experiences of one session to hold every
// successful call of it (a call left out of every trajectory is a lost
// turn), and returns the session and its experiences.
func waitSession(t *testing.T, control, session string) (capture.SessionView, []capture.Experience) {
	t.Helper()
	src := trainer.HTTPSource{URL: control}
	deadline := time.Now().Add(30 * time.Second)
	for {
		view := sessionView(t, control, session)
		exps, err := src.Fetch(context.Background(), 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var out []capture.Experience
		onPath := map[string]bool{}
		for _, e := range exps {
			if e.Session == session {
				out = append(out, e)
				for _, s := range e.Steps {
					onPath[s.Call] = true
				}
			}
		}
		var missing []string
		for _, c := range view.CallViews {
			if c.Status == capture.StatusOK && !onPath[c.ID] {
				missing = append(missing, fmt.Sprintf("%s (seq %d)", c.ID, c.Seq))
			}
		}
		if len(out) > 0 && len(missing) == 0 {
			return view, out
		}
		if time.Now().After(deadline) {
			if len(out) == 0 {
				t.Fatalf("no ready experience for session %s (%d calls, state %v)", session, view.Calls, view.State)
			}
			t.Fatalf("session %s: %d experiences leave out %d of its %d calls: %s", session, len(out), len(missing),
				len(view.CallViews), strings.Join(missing, ", "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func checkTrajectory(t *testing.T, e capture.Experience, reward float64) {
	t.Helper()
	n := len(e.Tokens)
	if n == 0 || len(e.Mask) != n || len(e.Logprobs) != n || len(e.Steps) == 0 {
		t.Fatalf("experience %s: %d tokens, %d mask, %d logprobs, %d steps", e.Session, n, len(e.Mask), len(e.Logprobs), len(e.Steps))
	}
	if e.Reward != reward {
		t.Errorf("experience %s: reward %v, agent sent %v", e.Session, e.Reward, reward)
	}
	inStep := make([]bool, n)
	for _, s := range e.Steps {
		if s.Start < 0 || s.End > n || s.End <= s.Start {
			t.Fatalf("step %+v outside %d tokens", s, n)
		}
		for i := s.Start; i < s.End; i++ {
			inStep[i] = true
		}
	}
	for i := range e.Tokens {
		if (e.Mask[i] == 1) != inStep[i] {
			t.Fatalf("token %d: mask %d, in a step %v", i, e.Mask[i], inStep[i])
		}
		if e.Mask[i] == 1 && (e.Logprobs[i] > 0 || e.Logprobs[i] != e.Logprobs[i]) {
			t.Fatalf("token %d: logprob %v", i, e.Logprobs[i])
		}
		if e.Mask[i] == 0 && e.Logprobs[i] != 0 {
			t.Fatalf("prompt token %d has logprob %v", i, e.Logprobs[i])
		}
	}
}

// forcingFrameworks are the frameworks whose scripts force a tool call with
// FORCE=1: the AI SDK and Mastra (toolChoice "required" on each run's first
// step), the OpenAI Agents SDK over chat completions (toolChoice
// "required", which the SDK resets after a tool use), LangGraph.js and
// LlamaIndex.TS (tool_choice "required" unless the last message is a tool
// result); one call at a time (parallel_tool_calls false). Each uses its
// default transport: LlamaIndex.TS's agent streams, the others do not.
var forcingFrameworks = []string{"ai-sdk", "mastra", "openai-agents-chat", "langgraph", "llamaindex"}

// TestFrameworksTokens runs the forcing frameworks' agents once more with
// forced tool calls (FORCE=1; bounded tool arguments, one call at a time)
// through hone to the embedded engine and the tiny model (random weights:
// it calls tools only when forced), observed and in continuity mode tokens,
// and reports each session's drift and trajectories. Each script's second
// run carries the first run's whole history, as the framework hands it
// over. In tokens mode the forced calls go as token ids with structured
// outputs (proxy/continuity/forced.go), and so do the Agents SDK's auto
// calls with parallel_tool_calls false (the embedded engine does not
// constrain them); drift 0 in tokens mode is asserted for every framework.
func TestFrameworksTokens(t *testing.T) {
	node := nodeBin(t)
	engineURL := embeddedEngine(t)
	dir := modelDir(t)
	modes := []string{proxy.ContinuityObserve, proxy.ContinuityTokens}
	bases, controls := map[string]string{}, map[string]string{}
	var tokensReg *prometheus.Registry
	for _, mode := range modes {
		reg := prometheus.NewRegistry()
		bases[mode], controls[mode] = startHoneWith(t, engineURL, func(o *proxy.Options) {
			o.Continuity, o.Upstream.Tokenizer = mode, dir
			o.Upstream.Engines = []proxy.EngineOptions{{URL: engineURL, Kind: "embedded"}}
		}, reg)
		if mode == proxy.ContinuityTokens {
			waitTokensMode(t, reg)
			tokensReg = reg
		}
	}
	for _, name := range forcingFrameworks {
		i := slices.IndexFunc(frameworks, func(f struct {
			name, script, pkg string
			env               []string
		}) bool {
			return f.name == name
		})
		fw := frameworks[i]
		for _, mode := range modes {
			t.Run(fw.name+"/"+mode, func(t *testing.T) {
				requirePackage(t, fw.pkg)
				session := fmt.Sprintf("%s-%s-%d", fw.name, mode, time.Now().UnixNano())
				env := append([]string{"OPENAI_BASE_URL=" + bases[mode], "OPENAI_API_KEY=dummy", "HONE_SESSION=" + session,
					"HONE_TASK=forced", "HONE_REWARD=1", "FORCE=1", "HONE_MAX_TOKENS=400"}, fw.env...)
				before := tokenIDCalls(tokensReg)
				r := runAgent(t, node, fw.script, env...)
				view, exps := waitSession(t, controls[mode], session)
				t.Logf("%s, %s: %d calls, drift %d, %d trajectories (agent error %q)", fw.name, mode, view.Calls, view.Drift,
					len(exps), r.Error)
				if mode != proxy.ContinuityTokens {
					return
				}
				if view.Drift != 0 {
					t.Errorf("%s in tokens mode: drift %d", fw.name, view.Drift)
				}
				// Every call goes as token ids (LlamaIndex.TS's streamed
				// forced ones too), so drift 0 is tokens mode's doing, not
				// calls left to the chat endpoint.
				want := float64(view.Calls)
				if got := tokenIDCalls(tokensReg) - before; got != want {
					t.Errorf("%s in tokens mode: %v of %d calls sent as token ids, want %v", fw.name, got, view.Calls, want)
				}
			})
		}
	}
}

// tokenIDCalls is how many calls hone sent as token ids
// (hone_continuity_calls_total rendered and spliced).
func tokenIDCalls(reg *prometheus.Registry) float64 {
	mfs, _ := reg.Gather()
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "hone_continuity_calls_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && (l.GetValue() == "rendered" || l.GetValue() == "spliced") {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// waitTokensMode waits until hone's continuity probe passed
// (hone_continuity_tokens 1).
func waitTokensMode(t *testing.T, reg *prometheus.Registry) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "hone_continuity_tokens" {
				for _, m := range mf.GetMetric() {
					if m.GetGauge().GetValue() == 1 {
						return
					}
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("continuity probe did not pass within 15s")
}
