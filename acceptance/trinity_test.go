package acceptance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/proxy"
	"github.com/hone-rl/hone/trainer"
	"github.com/prometheus/client_golang/prometheus"
)

// startHoneWithStore runs the data plane with a Badger store and the
// Trinity-compatible /feedback and /commit on it (as hone serve mounts
// them, so AgentScope's trinityEndpoint can be the data plane), and a
// control plane serving the store's routes.
func startHoneWithStore(t *testing.T, engineURL string) (data, control string) {
	store, err := capture.Open(filepath.Join(t.TempDir(), "capture"), capture.DefaultOptions(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	o := proxy.DefaultOptions()
	o.Upstream.Engines = []proxy.EngineOptions{{URL: engineURL}}
	o.DataPlaneFeedback = proxy.FeedbackLoopback // the TrainingRunner sends /feedback to its one base URL
	s, err := proxy.New(o, store, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	fb := chi.NewRouter()
	store.Routes(fb)
	for _, p := range []string{"/feedback", "/commit", "/v1/feedback", "/v1/commit"} {
		s.Mount(p, fb)
	}
	ln := listen(t)
	go s.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	ctl := chi.NewRouter()
	store.Routes(ctl)
	cs := httptest.NewServer(ctl)
	t.Cleanup(cs.Close)
	return "http://" + ln.Addr().String(), cs.URL
}

// post sends JSON exactly as given (AgentScope's OkHttp + Jackson bodies)
// and returns the status and body.
func post(t *testing.T, url, apiKey, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// shadowRun replays one shadow-agent run: a ReAct loop of two chat calls
// (the second extends the first with its reply and a user turn), no hone
// headers, api key "dummy". It returns the response ids (msg_ids).
func shadowRun(t *testing.T, base string) []string {
	msgs := []map[string]any{
		{"role": "system", "content": "You are a helpful assistant."},
		{"role": "user", "content": "What is 6 times 7?"},
	}
	var ids []string
	for turn := 0; turn < 2; turn++ {
		body, _ := json.Marshal(map[string]any{"model": "tiny", "messages": msgs, "max_tokens": 12, "stream": false})
		st, raw := post(t, base+"/v1/chat/completions", "dummy", string(body))
		if st != 200 {
			t.Fatalf("chat turn %d: %d %s", turn, st, raw)
		}
		var r struct {
			ID      string `json:"id"`
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(raw, &r); err != nil || r.ID == "" || len(r.Choices) == 0 {
			t.Fatalf("chat turn %d: %v %s", turn, err, raw)
		}
		ids = append(ids, r.ID)
		msgs = append(msgs, map[string]any{"role": "assistant", "content": r.Choices[0].Message.Content},
			map[string]any{"role": "user", "content": "Check again."})
	}
	return ids
}

// TestTrinityTwoCallRuns keeps what peers/TestAgentScopeJavaTrainingRunner
// (the real AgentScope-Java TrainingRunner from Maven Central) does not
// exercise here: there a random model never calls a tool, so each shadow run
// is one chat call. Here each run replays a ReAct loop of two header-less
// calls (the second extends the first with its reply), then TrinityClient's
// POST /feedback {"msg_ids":[...],"reward":..,"task_id":"..","run_id":".."}
// with both ids, and POST /commit with every field null: each run must be one
// inferred session holding both calls, ready with its task and reward.
func TestTrinityTwoCallRuns(t *testing.T) {
	base, control := startHoneWithStore(t, embeddedEngine(t))
	const task = "9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d"
	rewards := []float64{1, 0.25}
	for run, reward := range rewards {
		ids := shadowRun(t, base)
		fb := fmt.Sprintf(`{"msg_ids":["%s","%s"],"reward":%v,"task_id":"%s","run_id":"%d"}`, ids[0], ids[1], reward, task, run)
		if st, raw := post(t, base+"/feedback", "", fb); st != 200 {
			t.Fatalf("feedback run %d: %d %s", run, st, raw)
		}
	}
	st, raw := post(t, base+"/commit", "", `{"task_id":null,"run_id":null,"time_threshold":null}`)
	if st != 200 {
		t.Fatalf("commit: %d %s", st, raw)
	}
	exps := readyExperiences(t, control, len(rewards))
	calls := map[string]map[string]bool{} // session -> calls on its paths
	reward := map[string]float64{}
	for _, e := range exps {
		if e.Task != task {
			t.Errorf("experience %s: task %q, want %q", e.Session, e.Task, task)
		}
		checkExperience(t, e)
		if calls[e.Session] == nil {
			calls[e.Session] = map[string]bool{}
		}
		for _, s := range e.Steps {
			calls[e.Session][s.Call] = true
		}
		reward[e.Session] = e.Reward
	}
	if len(calls) != len(rewards) {
		t.Fatalf("%d sessions, want one per run (%d)", len(calls), len(rewards))
	}
	seen := map[float64]bool{}
	for sess, cs := range calls {
		if len(cs) != 2 {
			t.Errorf("session %s: %d calls on its trajectories, want 2", sess, len(cs))
		}
		seen[reward[sess]] = true
	}
	for _, r := range rewards {
		if !seen[r] {
			t.Errorf("no session with reward %v", r)
		}
	}
}

// readyExperiences polls GET /v1/experiences until at least n are ready
// (a run is one session; a random model's bytes may not re-tokenize the
// same, which splits a session into several trajectories).
func readyExperiences(t *testing.T, control string, n int) []capture.Experience {
	t.Helper()
	src := trainer.HTTPSource{URL: control}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := src.Fetch(context.Background(), 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) >= n {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d experiences ready, want at least %d", len(out), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkExperience: a complete trajectory whose step spans are exactly the
// mask-1 tokens, each with a logprob.
func checkExperience(t *testing.T, e capture.Experience) {
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
				t.Errorf("token %d: logprob %v > 0", i, e.Logprobs[i])
			}
		}
	}
	span := 0
	for _, s := range e.Steps {
		if s.Start < 0 || s.End > len(e.Tokens) || s.End <= s.Start {
			t.Fatalf("step %+v out of range", s)
		}
		for i := s.Start; i < s.End; i++ {
			if e.Mask[i] != 1 {
				t.Fatalf("step %+v: token %d has mask 0", s, i)
			}
		}
		span += s.End - s.Start
	}
	if span != ones {
		t.Errorf("experience %s: %d mask-1 tokens, %d in steps", e.Session, ones, span)
	}
}
