package peers

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/proxy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"
)

// continuityFolder is the tokenizer side of the model folder vLLM serves
// (Qwen3's tokenizer and chat template, generation_config.json's stop ids):
// what hone needs for continuity mode tokens.
func continuityFolder(t *testing.T) string {
	t.Helper()
	tokDir, err := Qwen3TokenizerDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		raw, err := os.ReadFile(filepath.Join(tokDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gen := `{"bos_token_id": 151643, "eos_token_id": [151645, 151643], "pad_token_id": 151643}`
	if err := os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(gen), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startContinuityHone runs hone in front of vLLM in the given continuity
// mode, with a capture store, and waits for the probe in tokens mode.
func startContinuityHone(t *testing.T, v *VLLM, mode string) (string, *prometheus.Registry, *capture.Store) {
	t.Helper()
	store, err := capture.Open(t.TempDir(), capture.DefaultOptions(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	o := proxy.DefaultOptions()
	o.Upstream.Engines = []proxy.EngineOptions{{URL: v.URL, Kind: "vllm"}}
	o.Continuity, o.Upstream.Tokenizer = mode, continuityFolder(t)
	reg := prometheus.NewRegistry()
	s, err := proxy.New(o, store, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln) //nolint:errcheck
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	if mode == proxy.ContinuityTokens {
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(s.ContinuityStatus(), "tokens on") {
			if st := s.ContinuityStatus(); strings.Contains(st, "observe on") && !strings.Contains(st, "pending") {
				t.Fatalf("the probe against vLLM failed: %s", st)
			}
			if time.Now().After(deadline) {
				t.Fatalf("no probe result: %s", s.ContinuityStatus())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return "http://" + ln.Addr().String(), reg, store
}

const continuityTools = `[{"type":"function","function":{"name":"calculator","description":"Evaluate arithmetic",` +
	`"parameters":{"type":"object","properties":{"expression":{"type":"string"}},"required":["expression"]}}}]`

// TestContinuityVLLM runs continuity mode tokens against real vLLM with
// Qwen3's tokenizer and chat template: the probe passes (vLLM's /tokenize
// renders as hone does), every answer hone builds from vLLM's token-id
// completion is byte for byte vLLM's own chat answer for the same request
// (ids and times aside; streamed, with tools, with logprobs), and a
// three-call session whose client drops the reasoning it got is one
// trajectory without drift, where observing it drifts.
func TestContinuityVLLM(t *testing.T) {
	v := needVLLM(t)
	url, reg, store := startContinuityHone(t, v, proxy.ContinuityTokens)
	msgs := `[{"role":"system","content":"You are a careful assistant."},{"role":"user","content":"What is 17 * 23?"}]`
	for _, c := range []struct {
		name, extra string
		usage       bool
	}{
		{"chat", ``, false},
		{"chat-tools", `,"tools":` + continuityTools, false},
		{"chat-stream", `,"stream":true`, true},
		{"chat-tools-stream", `,"stream":true,"tools":` + continuityTools, true},
		{"chat-logprobs", `,"logprobs":true,"top_logprobs":2`, false},
		{"chat-stream-logprobs-usage", `,"stream":true,"logprobs":true,"stream_options":{"include_usage":true}`, false},
		{"chat-no-thinking", `,"chat_template_kwargs":{"enable_thinking":false}`, false},
		// vLLM constrains these with a structural tag; hone sends its own
		// tag on the token-id request
		{"chat-tools-single", `,"parallel_tool_calls":false,"tools":` + continuityTools, false},
		{"chat-tools-single-stream", `,"stream":true,"parallel_tool_calls":false,"tools":` + continuityTools, true},
		{"chat-tools-strict", `,"tools":` + strings.Replace(continuityTools, `"name":"calculator",`, `"name":"calculator","strict":true,`, 1), false},
		// forced calls: vLLM's chat constrains them with a structural tag
		// too, and so does hone's token-id request
		{"chat-required", `,"tool_choice":"required","tools":` + continuityTools, false},
		{"chat-required-stream", `,"stream":true,"tool_choice":"required","tools":` + continuityTools, true},
		{"chat-named", `,"tool_choice":{"type":"function","function":{"name":"calculator"}},"tools":` + continuityTools, false},
		{"chat-named-stream-single", `,"stream":true,"parallel_tool_calls":false,"tool_choice":{"type":"function","function":{"name":"calculator"}},"tools":` + continuityTools, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := tokenCalls(t, reg)
			defer func() {
				if n := tokenCalls(t, reg) - before; n != 1 {
					t.Errorf("%v calls went as token ids, want 1", n)
				}
			}()
			body := `{"model":"` + v.Model + `","messages":` + msgs + `,"max_tokens":24,"temperature":0` + c.extra + `}`
			status, _, got, err := Post(context.Background(), url+"/v1/chat/completions", []byte(body),
				map[string][]string{"X-Hone-Session": {"wire-" + c.name}})
			if err != nil || status != 200 {
				t.Fatalf("through hone: %d %v\n%s", status, err, got)
			}
			sameAsDirect(t, v.URL+"/v1/chat/completions", body, got, c.usage)
		})
	}

	tokDrift, tokLeaves := vllmSession(t, v, url, store, "tokens-1")
	obsURL, _, obsStore := startContinuityHone(t, v, proxy.ContinuityObserve)
	obsDrift, obsLeaves := vllmSession(t, v, obsURL, obsStore, "observe-1")
	t.Logf("three-call session: tokens mode drift %d (%d trajectories), observing drift %d (%d trajectories)",
		tokDrift, tokLeaves, obsDrift, obsLeaves)
	if tokDrift != 0 || tokLeaves != 1 {
		t.Errorf("tokens mode: drift %d, %d trajectories; want 0 and 1", tokDrift, tokLeaves)
	}
	if n := counter(t, reg, "hone_continuity_turns_spliced_total"); n != 2 {
		t.Errorf("tokens mode put back %v served turns, want 2 (calls 2 and 3)", n)
	}
	if obsDrift == 0 {
		t.Errorf("observing, the session did not drift: the test no longer shows what tokens mode fixes")
	}
}

// vllmSession runs three greedy calls of one session whose client keeps
// only the visible text of each answer (frameworks drop reasoning), the
// last one rewarded and committed, and returns the drift and trajectories.
func vllmSession(t *testing.T, v *VLLM, url string, store *capture.Store, session string) (int, int) {
	t.Helper()
	var msgs []any
	msgs = append(msgs, map[string]any{"role": "user", "content": "Count from one to five."})
	for turn := 0; turn < 3; turn++ {
		req, _ := json.Marshal(map[string]any{"model": v.Model, "messages": msgs, "max_tokens": 16, "temperature": 0})
		hdr := map[string][]string{"X-Hone-Session": {session}}
		if turn == 2 {
			hdr["X-Hone-Reward"], hdr["X-Hone-Commit"] = []string{"1"}, []string{"1"}
		}
		status, _, body, err := Post(context.Background(), url+"/v1/chat/completions", req, hdr)
		if err != nil || status != 200 {
			t.Fatalf("%s turn %d: %d %v\n%s", session, turn, status, err, body)
		}
		content := gjson.GetBytes(body, "choices.0.message.content").String()
		msgs = append(msgs, map[string]any{"role": "assistant", "content": content},
			map[string]any{"role": "user", "content": "And again."})
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		sess, calls, err := store.GetSession(context.Background(), session)
		if err == nil && len(sess.Cursors) > 0 && len(calls) == 3 {
			slices.SortFunc(calls, func(a, b *capture.Call) int { return a.Start.Compare(b.Start) })
			return sess.Drift, len(sess.Cursors)
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s never became ready: %+v %v", session, sess, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// counter reads a counter's value from a registry (0 when absent).
func counter(t *testing.T, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// tokenCalls is how many calls hone sent as token ids.
func tokenCalls(t *testing.T, g prometheus.Gatherer) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
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
