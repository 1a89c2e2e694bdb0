package proxy

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/hone-rl/hone/capture"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tidwall/gjson"
)

// digits bound calc's operands (the random model writes integers of any
// length otherwise).
var digits = []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 42}

// forcedTools is the forced loop's one tool.
var forcedTools = []any{map[string]any{"type": "function", "function": map[string]any{"name": "calc",
	"parameters": map[string]any{"type": "object", "properties": map[string]any{
		"op": map[string]any{"enum": []string{"add", "mul"}}, "a": map[string]any{"enum": digits},
		"b": map[string]any{"enum": digits}}, "required": []string{"op", "a", "b"}, "additionalProperties": false}}}}

// checkCalc reports whether arguments parse as calc's parameters.
func checkCalc(args string) error {
	var m map[string]any
	d := json.NewDecoder(strings.NewReader(args))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return err
	}
	if len(m) != 3 {
		return fmt.Errorf("want keys op, a, b: %v", m)
	}
	if op, _ := m["op"].(string); op != "add" && op != "mul" {
		return fmt.Errorf("op %v", m["op"])
	}
	for _, k := range []string{"a", "b"} {
		n, ok := m[k].(json.Number)
		if _, err := n.Int64(); !ok || err != nil {
			return fmt.Errorf("%s %v is no integer", k, m[k])
		}
	}
	return nil
}

// reserialiseKeys writes arguments back as a framework does: compact, keys in
// reverse order.
func reserialiseKeys(t *testing.T, args string) string {
	var keys []string
	vals := map[string]string{}
	gjson.Parse(args).ForEach(func(k, v gjson.Result) bool {
		keys = append(keys, k.Str)
		vals[k.Str] = strings.Join(strings.Fields(v.Raw), "")
		return true
	})
	var b strings.Builder
	b.WriteByte('{')
	for i := len(keys) - 1; i >= 0; i-- {
		kb, _ := json.Marshal(keys[i])
		b.Write(kb)
		b.WriteByte(':')
		b.WriteString(vals[keys[i]])
		if i > 0 {
			b.WriteByte(',')
		}
	}
	b.WriteByte('}')
	if b.String() == args {
		t.Fatalf("re-serialising %s changed nothing", args)
	}
	return b.String()
}

// forcedSession runs a tool loop whose every tool call is forced (required,
// then the named function, then required) and whose client sends the
// calls back re-serialised, then a last free call (max_tokens 1) with the
// reward. It returns the tool calls the client got; checkFinish: the
// finish reasons are vLLM's (tool_calls for required, stop for named).
func forcedSession(t *testing.T, h *testHone, store *capture.Store, session string, checkFinish bool) []gjson.Result {
	t.Helper()
	msgs := []any{map[string]any{"role": "user", "content": "What is 6 times 7, plus 3?"}}
	named := map[string]any{"type": "function", "function": map[string]any{"name": "calc"}}
	var calls []gjson.Result
	for turn, choice := range []any{"required", named, "required", "auto"} {
		req := map[string]any{"model": "Qwen/Qwen3-0.6B", "messages": msgs, "tools": forcedTools, "tool_choice": choice,
			"max_tokens": 400, "temperature": 1, "seed": 7 + turn}
		if turn < 3 {
			req["parallel_tool_calls"] = false // the random model would add calls up to max_tokens
		}
		hdr := map[string]string{"X-Hone-Session": session}
		if turn == 3 {
			req["max_tokens"] = 1
			hdr["X-Hone-Reward"], hdr["X-Hone-Commit"] = "1", "1"
		}
		body, _ := json.Marshal(req)
		r := post(t, h.url, "/v1/chat/completions", body, hdr)
		if r.status != 200 {
			t.Fatalf("turn %d: status %d: %s", turn, r.status, r.body)
		}
		waitRecorded(t, store, session, turn+1, false)
		if turn == 3 {
			break
		}
		ch := gjson.GetBytes(r.body, "choices.0")
		tcs := ch.Get("message.tool_calls").Array()
		if len(tcs) == 0 {
			t.Fatalf("turn %d: no tool call: %s", turn, r.body)
		}
		if ch.Get("message.content").String() != "" {
			t.Errorf("turn %d: content %s", turn, ch.Get("message.content").Raw)
		}
		want := "tool_calls"
		if turn == 1 {
			want = "stop"
		}
		if f := ch.Get("finish_reason").String(); checkFinish && f != want {
			t.Errorf("turn %d: finish_reason %q, want %q", turn, f, want)
		}
		var sent []any
		for i, tc := range tcs {
			calls = append(calls, tc)
			args := tc.Get("function.arguments").String()
			sent = append(sent, map[string]any{"id": fmt.Sprintf("c%d_%d", turn, i), "type": "function",
				"function": map[string]any{"name": tc.Get("function.name").String(), "arguments": reserialiseKeys(t, args)}})
		}
		msgs = append(msgs, map[string]any{"role": "assistant", "content": "", "tool_calls": sent})
		for i := range tcs {
			msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": fmt.Sprintf("c%d_%d", turn, i), "content": "42"})
		}
	}
	return calls
}

// TestContinuityForcedEmbedded: a tool loop with forced tool calls
// (required, named) whose client re-serialises the arguments, through hone
// to the embedded engine with the shipped tiny model (random weights, so it
// calls tools only when forced): in tokens mode every call goes as token
// ids with structured_outputs, the session is one trajectory without
// drift, and every tool call's arguments parse against the tool's schema.
// Observed (forced calls to the chat endpoint as sent) the same loop
// drifts.
func TestContinuityForcedEmbedded(t *testing.T) {
	h, store, url := startEngineContinuity(t, ContinuityTokens)
	if st := waitProbe(t, h.s, url); !st.tokens {
		t.Fatalf("probe against the embedded engine: %s", st.reason)
	}
	calls := forcedSession(t, h, store, "f1", true)
	for i, tc := range calls {
		if tc.Get("function.name").String() != "calc" || !strings.HasPrefix(tc.Get("id").String(), "call_") {
			t.Errorf("call %d: %s", i, tc.Raw)
		}
		if err := checkCalc(tc.Get("function.arguments").String()); err != nil {
			t.Errorf("call %d: arguments %s: %v", i, tc.Get("function.arguments").String(), err)
		}
	}
	drift, leaves, cs := sessionDrift(t, store, "f1", 4)
	if drift != 0 || leaves != 1 || extends(cs) != 0 {
		t.Errorf("tokens mode: drift %d, %d trajectories, call %d not extending", drift, leaves, extends(cs))
	}
	if n := countTokenCalls(h); n != 4 {
		t.Errorf("%v calls sent as token ids, want 4", n)
	}

	obs, obsStore, _ := startEngineContinuity(t, ContinuityObserve)
	forcedSession(t, obs, obsStore, "o1", false) // the embedded engine's chat says tool_calls for a named call
	drift, leaves, _ = sessionDrift(t, obsStore, "o1", 4)
	t.Logf("observed: drift %d, %d trajectories", drift, leaves)
	if drift == 0 {
		t.Errorf("observed: no drift: the client's re-serialised arguments should not match the sampled text")
	}
}

func countTokenCalls(h *testHone) float64 {
	return testutil.ToFloat64(h.s.cont.calls.WithLabelValues("rendered")) + testutil.ToFloat64(h.s.cont.calls.WithLabelValues("spliced"))
}
