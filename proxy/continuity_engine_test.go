package proxy

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hone-rl/hone/capture"
	honeengine "github.com/hone-rl/hone/engine"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"
)

// serveTinyEngine serves the shipped tiny model with hone's embedded engine
// (its hand-written Qwen3 renderer, /tokenize, and /v1/completions with
// token-id prompts), as a stub engine URL.
func serveTinyEngine(t *testing.T) string {
	t.Helper()
	o := honeengine.DefaultOptions()
	o.ModelDir, o.ServedModelName = tinyModel, "Qwen/Qwen3-0.6B"
	e, err := honeengine.New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: e.Handler()}
	go srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { _ = srv.Close(); e.Close() })
	return "http://" + ln.Addr().String()
}

// startEngineContinuity starts hone in front of the embedded engine with a
// capture store.
func startEngineContinuity(t *testing.T, mode string) (*testHone, *capture.Store, string) {
	t.Helper()
	return startEngineContinuityIn(t, mode, prometheus.NewRegistry())
}

// startEngineContinuityIn is startEngineContinuity with the store's metrics
// in reg.
func startEngineContinuityIn(t *testing.T, mode string, reg prometheus.Registerer) (*testHone, *capture.Store, string) {
	t.Helper()
	url := serveTinyEngine(t)
	store, err := capture.Open(t.TempDir(), capture.DefaultOptions(), reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	h := startHoneWith(t, store, func(o *Options) {
		o.Continuity, o.Upstream.Tokenizer = mode, tinyModel
		o.Upstream.Engines = []EngineOptions{{URL: url, Kind: "embedded"}}
	})
	return h, store, url
}

// textSession runs the demo agent's text-mode loop against the tiny model
// (greedy): a word problem, the hermes tool call the model writes into its
// content, the calculator's result, the model's closing reply, and a last
// one-token call carrying the reward and the commit.
func textSession(t *testing.T, h *testHone, store *capture.Store, session string, stream bool) []map[string]any {
	t.Helper()
	msgs := []any{map[string]any{"role": "user", "content": "Ann has a boxes of b pens. How many pens does Ann have? (a = 6, b = 7)"}}
	var got []map[string]any
	for turn := 0; turn < 3; turn++ {
		req := map[string]any{"model": "Qwen/Qwen3-0.6B", "messages": msgs, "max_tokens": 80, "temperature": 0, "stream": stream}
		hdr := map[string]string{"X-Hone-Session": session}
		if turn == 2 {
			req["max_tokens"] = 1
			hdr["X-Hone-Reward"], hdr["X-Hone-Commit"] = "1", "1"
		}
		body, _ := json.Marshal(req)
		r := post(t, h.url, "/v1/chat/completions", body, hdr)
		if r.status != 200 {
			t.Fatalf("turn %d: status %d: %s", turn, r.status, r.body)
		}
		var m map[string]any
		if stream {
			m = aggregateStream(t, r.body)
		} else {
			m = map[string]any{"content": gjson.GetBytes(r.body, "choices.0.message.content").Value(),
				"finish_reason": gjson.GetBytes(r.body, "choices.0.finish_reason").String()}
		}
		got = append(got, map[string]any{"content": m["content"], "finish_reason": m["finish_reason"]})
		waitRecorded(t, store, session, turn+1, stream)
		content, _ := m["content"].(string)
		msgs = append(msgs, map[string]any{"role": "assistant", "content": content})
		switch turn {
		case 0:
			msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "42"})
		case 1:
			msgs = append(msgs, map[string]any{"role": "user", "content": "Thanks."})
		}
	}
	return got
}

// TestContinuityEmbeddedEngine runs hone in front of the embedded engine
// (its own hand-written Qwen3 renderer and /tokenize) with the shipped tiny
// model: the probe passes, tokens mode sends every call as token ids, the
// session is one trajectory without drift, the first prompt is the one the
// engine renders itself, and the client gets the same answers (greedy) as
// when hone observes, streamed or not.
func TestContinuityEmbeddedEngine(t *testing.T) {
	obs, obsStore, _ := startEngineContinuity(t, ContinuityObserve)
	want := textSession(t, obs, obsStore, "o1", false)
	_, _, obsCalls := sessionDrift(t, obsStore, "o1", 3)
	if c, _ := want[0]["content"].(string); !strings.Contains(c, "<tool_call>") {
		t.Errorf("the tiny model wrote no tool call: %v", want[0])
	}
	for _, stream := range []bool{false, true} {
		h, store, url := startEngineContinuity(t, ContinuityTokens)
		if st := waitProbe(t, h.s, url); !st.Tokens {
			t.Fatalf("probe against the embedded engine: %s", st.Reason)
		}
		got := textSession(t, h, store, "t1", stream)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("stream %v: answers in tokens mode %v, observing %v", stream, got, want)
		}
		drift, leaves, cs := sessionDrift(t, store, "t1", 3)
		if drift != 0 || leaves != 1 || extends(cs) != 0 {
			t.Errorf("stream %v: drift %d, %d trajectories, call %d not extending", stream, drift, leaves, extends(cs))
		}
		// the client sent back what the model wrote: the spliced prompts are
		// exactly what the engine renders itself
		for i := range cs {
			if !slices.Equal(cs[i].PromptIDs, obsCalls[i].PromptIDs) || !slices.Equal(cs[i].Choices[0].TokenIDs, obsCalls[i].Choices[0].TokenIDs) {
				t.Errorf("stream %v: call %d's ids differ from the engine's own rendering", stream, i)
			}
		}
		for i, c := range cs {
			if len(c.Choices[0].Logprobs) != len(c.Choices[0].TokenIDs) || len(c.Choices[0].TokenIDs) == 0 {
				t.Errorf("call %d: %d logprobs for %d tokens", i, len(c.Choices[0].Logprobs), len(c.Choices[0].TokenIDs))
			}
		}
		if n := metricValue(t, h, "hone_continuity_calls_total", "result", "rendered") + metricValue(t, h, "hone_continuity_calls_total", "result", "spliced"); n != 3 {
			t.Errorf("stream %v: %v calls sent as token ids, want 3", stream, n)
		}
	}
}

// TestContinuityLastTurnServed: a conversation that ends with the assistant
// turn hone served (LangChain sends back a forced call that ran out of
// tokens, with no tool result; cut inside its hermes block, the call is the
// message's content) puts that turn's sampled ids back too: the next
// prompt extends the path.
func TestContinuityLastTurnServed(t *testing.T) {
	h, store, url := startEngineContinuity(t, ContinuityTokens)
	waitProbe(t, h.s, url)
	tools := json.RawMessage(`[{"type":"function","function":{"name":"calc","parameters":{"properties":{"op":{"type":"string"},` +
		`"a":{"type":"integer"},"b":{"type":"integer"}},"required":["op","a","b"],"type":"object"}}}]`)
	msgs := []any{map[string]any{"role": "user", "content": "What is 6 times 7?"}}
	for i, maxTok := range []int{40, 1} {
		body, _ := json.Marshal(map[string]any{"model": "Qwen/Qwen3-0.6B", "messages": msgs, "tools": tools, "max_completion_tokens": maxTok,
			"temperature": 1.0, "seed": 3, "tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "calc"}}})
		r := sessionPost(t, h, store, "last", i, i == 1, false, body)
		var m map[string]any
		_ = json.Unmarshal([]byte(gjson.GetBytes(r.body, "choices.0.message").Raw), &m)
		msgs = append(msgs, map[string]any{"role": "assistant", "content": m["content"], "tool_calls": m["tool_calls"]})
	}
	drift, leaves, cs := sessionDrift(t, store, "last", 2)
	if drift != 0 || leaves != 1 || extends(cs) != 0 || metricValue(t, h, "hone_continuity_turns_spliced_total") != 1 {
		t.Errorf("drift %d, %d trajectories, call %d not extending, %v turns put back", drift, leaves, extends(cs),
			metricValue(t, h, "hone_continuity_turns_spliced_total"))
	}
}
