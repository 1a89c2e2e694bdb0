package acceptance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/kernels/cpu"
	"github.com/hone-rl/hone/model"
	"github.com/hone-rl/hone/model/modeltest"
	"github.com/hone-rl/hone/proxy"
	"github.com/hone-rl/hone/trainer"
	"github.com/hone-rl/hone/trainer/publish"
	"github.com/hone-rl/hone/trainer/trainertest"
	"github.com/prometheus/client_golang/prometheus"
)

// TestLearningThroughProxy closes hone's loop over the wire: an agent calls
// the proxy with the engine's own served model name ("base", which follows
// the trainer's policy alias "agent" as hone serve sets it up), the capture store records the calls with the
// engine's token ids and logprobs, rewards and commits arrive on the control
// plane, the trainer consumes the ready experiences (GRPO), and each version
// is published into the engine and swapped into the proxy's alias. The task
// rewards digits; the share of digits the agent gets must rise clearly.
func TestLearningThroughProxy(t *testing.T) {
	if testing.Short() {
		t.Skip("learning run")
	}
	dir, engineURL, store, s, base, ctl := startDigitLoop(t)

	opts := trainer.DefaultOptions()
	opts.Name, opts.CheckpointDir, opts.BatchSessions, opts.MicroBatchTokens = "agent", t.TempDir(), 32, 512
	opts.Schedule = trainer.ScheduleOptions{Kind: trainer.SchedConstant, LR: 2e-2}
	opts.LoRA = trainer.LoRAOptions{Rank: 8, Alpha: 16, Seed: 1}
	pol, err := trainer.LoadPolicy(dir, cpu.New(2), opts)
	if err != nil {
		t.Fatal(err)
	}
	pub := &publish.Publisher{Engines: []publish.Engine{{URL: engineURL, Kind: publish.KindEmbedded}}, Aliases: s.Aliases()}
	tr, err := trainer.New(opts, trainer.Deps{Policy: pol, Sources: []trainer.Source{trainer.StoreSource{Store: store}},
		Publisher: pub, BaseModel: "base"})
	if err != nil {
		t.Fatal(err)
	}

	prompts := []string{"a", "k", "Q", "="}
	policy := "" // X-Hone-Policy of the last call
	eval := func(seed int) float64 {
		var sum float64
		for i, p := range prompts {
			for k := 0; k < 8; k++ {
				var text string
				text, policy = complete(t, base, "", "", p, seed+100*i+k)
				sum += digitShare(text)
			}
		}
		return sum / float64(8*len(prompts))
	}
	before := eval(5000)
	if policy != "0" {
		t.Fatalf("X-Hone-Policy %q before training, want 0", policy)
	}
	for step := 0; step < 10; step++ {
		for pi, p := range prompts {
			for k := 0; k < 8; k++ {
				session := fmt.Sprintf("s%d-%d-%d", step, pi, k)
				text, _ := complete(t, base, session, fmt.Sprint("p", pi), p, 1000*step+10*pi+k)
				feedback(t, ctl.URL, session, digitShare(text))
			}
		}
		m := trainertest.PollStep(t, tr, time.Minute)
		t.Logf("step %d: v%d reward %.3f", m.Step, m.Version, m.RewardMean)
	}
	pub.Wait()
	after := eval(5000)
	t.Logf("digit share through hone %.3f -> %.3f after 10 GRPO steps", before, after)
	if after-before < 0.2 {
		t.Fatalf("digit share rose by %.3f, want >= 0.2", after-before)
	}
	if _, v, _ := s.Aliases().Get("agent"); v < 10 || policy != fmt.Sprint(v) {
		t.Fatalf("alias at version %d after 10 steps; the agent sending %q was served by policy %q", v, "base", policy)
	}
}

// complete asks hone for one sampled completion of prompt as an unmodified
// agent would (model "base", the engine's served name; a session and task
// header when given). It returns the text and X-Hone-Policy.
func complete(t *testing.T, base, session, task, prompt string, seed int) (string, string) {
	body, _ := json.Marshal(map[string]any{"model": "base", "prompt": prompt, "max_tokens": 6, "temperature": 1.0,
		"seed": seed})
	req, _ := http.NewRequest("POST", base+"/v1/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if session != "" {
		req.Header.Set("X-Hone-Session", session)
		req.Header.Set("X-Hone-Task", task)
	} else {
		req.Header.Set("X-Hone-Train", "0") // evaluation calls are not training data
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || len(out.Choices) != 1 {
		t.Fatalf("completion: HTTP %d, %v", resp.StatusCode, err)
	}
	return out.Choices[0].Text, resp.Header.Get("X-Hone-Policy")
}

// feedback rewards and commits a session on the control plane.
func feedback(t *testing.T, ctl, session string, reward float64) {
	for path, body := range map[string]string{
		"/v1/feedback": fmt.Sprintf(`{"session":%q,"reward":%g}`, session, reward),
		"/v1/commit":   fmt.Sprintf(`{"session":%q}`, session),
	} {
		resp, err := http.Post(ctl+path, "application/json", bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s: HTTP %d", path, body, resp.StatusCode)
		}
	}
}

func digitShare(s string) float64 {
	n := 0
	for _, c := range s {
		if c >= '0' && c <= '9' {
			n++
		}
	}
	return float64(n) / float64(max(len([]rune(s)), 1))
}

// digitModel writes a tiny character model whose embeddings are widened 3x
// (at N(0, 0.02) the logits are nearly flat and no adapter moves them much).
func digitModel(t *testing.T) string {
	return modeltest.Tiny(t, modeltest.Options{Seed: 7, EmbedScale: 3, Config: func(c *model.Config) {
		c.MaxPositions, c.NumLayers = 128, 2
	}})
}

// startDigitLoop is hone's loop over the wire around the digit model: the
// embedded engine serving it as "base", a capture store, hone's data plane
// (alias "agent", which "base" follows, as hone serve sets it up) and its
// control plane. It returns the model folder, the engine's URL, the store,
// the server and both planes' base URLs; all stop with the test.
func startDigitLoop(t *testing.T) (string, string, *capture.Store, *proxy.Server, string, *httptest.Server) {
	t.Helper()
	dir := digitModel(t)
	engineURL := serveEngineAs(t, dir, "base")
	reg := prometheus.NewRegistry()
	store, err := capture.Open(filepath.Join(t.TempDir(), "capture"), capture.DefaultOptions(), reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	o := proxy.DefaultOptions()
	o.Upstream.Engines = []proxy.EngineOptions{{URL: engineURL, Kind: "embedded"}}
	o.Aliases = []proxy.AliasConfig{{Name: "agent", Target: "base", Names: []string{"base"}}}
	s, err := proxy.New(o, store, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(t)
	go s.Serve(ln)
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	ctl := httptest.NewServer(proxy.NewControl(s, "", reg, store.Routes))
	t.Cleanup(ctl.Close)
	return dir, engineURL, store, s, "http://" + ln.Addr().String(), ctl
}
