// Package examples runs real agent frameworks (Node) through hone and
// checks what hone captured from them.
package examples

import (
	"context"
	"encoding/json"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
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
)

// requireNode skips (or, with HONE_REQUIRE_NODE=1, fails) without Node and
// the installed npm packages (make deps).
func requireNode(t *testing.T) {
	t.Helper()
	_, err := exec.LookPath("node")
	_, err2 := os.Stat("node_modules/@openai/agents/package.json")
	if err == nil && err2 == nil {
		return
	}
	if os.Getenv("HONE_REQUIRE_NODE") == "1" {
		t.Fatalf("node or examples/node_modules missing (run make deps): %v %v", err, err2)
	}
	t.Skip("node or examples/node_modules missing; run make deps")
}

// modelDir is the shipped prepared tiny model, else a random tiny model.
func modelDir(t *testing.T) string {
	if _, err := os.Stat("../testdata/tiny-model/config.json"); err == nil {
		return "../testdata/tiny-model"
	}
	return modeltest.Tiny(t, modeltest.Options{Seed: 1})
}

// startHone runs the embedded engine, a Badger store, the data plane (with
// feedback and commit mounted, as hone serve does) and a control plane;
// agents ask for model "hone", an alias of the served model.
func startHone(t *testing.T) (base, control string) {
	e, err := engine.New(context.Background(), engine.Options{ModelDir: modelDir(t), ServedModelName: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	es := httptest.NewServer(e.Handler())
	t.Cleanup(func() { es.Close(); e.Close() })
	store, err := capture.Open(filepath.Join(t.TempDir(), "capture"), capture.DefaultOptions(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	o := proxy.DefaultOptions()
	o.Upstream.Engines = []proxy.EngineOptions{{URL: es.URL, Kind: "embedded"}}
	o.Aliases = []proxy.AliasConfig{{Name: "hone", Target: "tiny"}}
	srv, err := proxy.New(o, store, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	fb := chi.NewRouter()
	store.Routes(fb)
	for _, p := range []string{"/feedback", "/commit", "/v1/feedback", "/v1/commit"} {
		srv.Mount(p, fb)
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
	Reward    float64 `json:"reward"`
	Output    string  `json:"output"`
	Error     string  `json:"error"`
}

func runAgent(t *testing.T, script, base string) runResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Env = append(os.Environ(), "OPENAI_BASE_URL="+base, "OPENAI_API_KEY=dummy")
	out, err := cmd.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var r runResult
	if err != nil || json.Unmarshal([]byte(lines[len(lines)-1]), &r) != nil || r.Session == "" {
		t.Fatalf("node %s: %v\n%s", script, err, out)
	}
	t.Logf("%s: reward %v output %q error %q", r.Framework, r.Reward, r.Output, r.Error)
	return r
}

// TestExampleAgents runs each framework's agent through hone and checks
// that its run became ready training data: trajectories of the session
// with token ids, one logprob per generated token, the loss mask on the
// generated tokens only, and the reward the agent sent.
func TestExampleAgents(t *testing.T) {
	requireNode(t)
	base, control := startHone(t)
	for _, script := range []string{"openai_agents.mjs", "langchain_agent.mjs"} {
		t.Run(strings.TrimSuffix(script, ".mjs"), func(t *testing.T) {
			r := runAgent(t, script, base)
			exps := sessionExperiences(t, control, r.Session)
			for _, e := range exps {
				checkTrajectory(t, e, r.Reward)
			}
		})
	}
}

// sessionExperiences waits for the ready experiences of one session.
func sessionExperiences(t *testing.T, control, session string) []capture.Experience {
	t.Helper()
	src := trainer.HTTPSource{URL: control}
	deadline := time.Now().Add(30 * time.Second)
	for {
		exps, err := src.Fetch(context.Background(), 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var out []capture.Experience
		for _, e := range exps {
			if e.Session == session {
				out = append(out, e)
			}
		}
		if len(out) > 0 {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ready experience for session %s", session)
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
