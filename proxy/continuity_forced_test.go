package proxy

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hone-rl/hone/capture"
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
func forcedSession(t *testing.T, h *testHone, store *capture.Store, session string, checkFinish, stream bool) []gjson.Result {
	t.Helper()
	msgs := []any{map[string]any{"role": "user", "content": "What is 6 times 7, plus 3?"}}
	named := map[string]any{"type": "function", "function": map[string]any{"name": "calc"}}
	var calls []gjson.Result
	for turn, choice := range []any{"required", named, "required", "auto"} {
		req := map[string]any{"model": "Qwen/Qwen3-0.6B", "messages": msgs, "tools": forcedTools, "tool_choice": choice,
			"max_tokens": 400, "temperature": 1, "seed": 7 + turn, "stream": stream}
		// the random model would add calls up to max_tokens; under auto (the
		// last turn) as the OpenAI Agents SDK sends it, which tokens mode
		// covers (the embedded engine gets no tag under auto)
		req["parallel_tool_calls"] = false
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
		waitRecorded(t, store, session, turn+1, stream)
		if turn == 3 {
			break
		}
		ch := gjson.GetBytes(r.body, "choices.0")
		if stream {
			m := aggregateStream(t, r.body)
			fin := m["finish_reason"]
			delete(m, "finish_reason")
			b, _ := json.Marshal(map[string]any{"message": m, "finish_reason": fin})
			ch = gjson.ParseBytes(b)
		}
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
// ids with the structural tag equal to the engine's chat constraint
// (embeddedTag), the session is one trajectory without drift, and every
// tool call's arguments parse against the tool's schema. Streamed, the
// calls come as tool-call deltas with the same samples. Observed (forced
// calls to the chat endpoint as sent) the first call is the same sample and
// the loop drifts.
func TestContinuityForcedEmbedded(t *testing.T) {
	var unstreamed []gjson.Result
	for _, stream := range []bool{false, true} {
		h, store, url := startEngineContinuity(t, ContinuityTokens)
		if st := waitProbe(t, h.s, url); !st.Tokens {
			t.Fatalf("probe against the embedded engine: %s", st.Reason)
		}
		calls := forcedSession(t, h, store, "f1", true, stream)
		for i, tc := range calls {
			if tc.Get("function.name").String() != "calc" || !strings.HasPrefix(tc.Get("id").String(), "call_") {
				t.Errorf("stream %v: call %d: %s", stream, i, tc.Raw)
			}
			if err := checkCalc(tc.Get("function.arguments").String()); err != nil {
				t.Errorf("stream %v: call %d: arguments %s: %v", stream, i, tc.Get("function.arguments").String(), err)
			}
		}
		if !stream {
			unstreamed = calls
		} else if len(calls) != len(unstreamed) {
			t.Errorf("streamed: %d calls, %d not streamed", len(calls), len(unstreamed))
		} else {
			// same seeds, same spliced prompts: the same samples, the
			// arguments as written (streamed) or as Python dumps them
			for i := range calls {
				a, b := calls[i].Get("function.arguments").String(), unstreamed[i].Get("function.arguments").String()
				if !jsonEqual(a, b) {
					t.Errorf("call %d: streamed arguments %s, not streamed %s", i, a, b)
				}
			}
		}
		drift, leaves, cs := sessionDrift(t, store, "f1", 4)
		if drift != 0 || leaves != 1 || extends(cs) != 0 {
			t.Errorf("stream %v: tokens mode: drift %d, %d trajectories, call %d not extending", stream, drift, leaves, extends(cs))
		}
		if n := countTokenCalls(t, h); n != 4 {
			t.Errorf("stream %v: %v calls sent as token ids, want 4", stream, n)
		}
	}

	obs, obsStore, _ := startEngineContinuity(t, ContinuityObserve)
	observed := forcedSession(t, obs, obsStore, "o1", true, false) // the embedded engine's chat says stop for a named call, as vLLM
	// the first prompt is the same in both modes: the token-id request's
	// structural tag makes the engine sample what its chat samples
	if a, b := observed[0].Get("function").Raw, unstreamed[0].Get("function").Raw; a != b {
		t.Errorf("first call: chat endpoint %s, token ids %s", a, b)
	}
	drift, leaves, _ := sessionDrift(t, obsStore, "o1", 4)
	t.Logf("observed: drift %d, %d trajectories", drift, leaves)
	if drift == 0 {
		t.Errorf("observed: no drift: the client's re-serialised arguments should not match the sampled text")
	}
}

func countTokenCalls(t *testing.T, h *testHone) float64 {
	return metricValue(t, h, "hone_continuity_calls_total", "result", "rendered") + metricValue(t, h, "hone_continuity_calls_total", "result", "spliced")
}

// jsonEqual compares two JSON texts as values ("" equals "").
func jsonEqual(a, b string) bool {
	if a == "" || b == "" {
		return a == b
	}
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// TestContinuityForcedNative: towards vLLM engines forced calls go as token
// ids with the structural tag vLLM's own chat constrains them with (hermes
// calls: all function tools for required, the named one for a named
// choice), and the output is parsed as vLLM's chat parses it (hermes):
// content "", finish_reason tool_calls for required and stop for named,
// streamed or not. The client sends the calls back re-serialised: one
// trajectory, drift 0.
func TestContinuityForcedNative(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "stream"}[stream], func(t *testing.T) {
			v := newScriptedVLLM(t,
				"<think>\nI need the tool.\n</think>\n\n<tool_call>\n"+`{"name": "calculator", "arguments": {"expression": "17*23", "n": 1}}`+"\n</tool_call><|im_end|>",
				"<think>\nCheck it.\n</think>\n\n<tool_call>\n"+`{"name": "calculator", "arguments": {"expression":  "391"}}`+"\n</tool_call><|im_end|>",
				"<think>\nIt is 391.\n</think>\n\n17 * 23 = 391.<|im_end|>")
			h, store := startContinuity(t, ContinuityTokens, v)
			msgs := []any{map[string]any{"role": "user", "content": "What is 17 * 23?"}}
			named := map[string]any{"type": "function", "function": map[string]any{"name": "calculator"}}
			for i, w := range []struct {
				choice       any
				args, finish string
			}{
				{"required", `{"expression": "17*23", "n": 1}`, "tool_calls"},
				{named, `{"expression": "391"}`, "stop"},
				{"auto", "", "stop"},
			} {
				body, _ := json.Marshal(map[string]any{"model": "Qwen/Qwen3-0.6B", "messages": msgs, "max_tokens": 64,
					"tools": []json.RawMessage{json.RawMessage(calcTool)}, "tool_choice": w.choice, "stream": stream})
				r := sessionPost(t, h, store, "n1", i, i == 2, stream, body)
				if i == 2 {
					break
				}
				m := map[string]any{}
				if stream {
					m = aggregateStream(t, r.body)
				} else {
					_ = json.Unmarshal([]byte(gjson.GetBytes(r.body, "choices.0.message").Raw), &m)
					m["finish_reason"] = gjson.GetBytes(r.body, "choices.0.finish_reason").String()
					if c, ok := m["content"].(string); !ok || strings.TrimSpace(c) != "" { // what follows </think>
						t.Errorf("call %d: content %v", i, m["content"])
					}
				}
				tcs, _ := m["tool_calls"].([]any)
				if len(tcs) != 1 || m["finish_reason"] != w.finish {
					t.Fatalf("call %d: %v", i, m)
				}
				fn := tcs[0].(map[string]any)["function"].(map[string]any)
				if args, _ := fn["arguments"].(string); fn["name"] != "calculator" || !jsonEqual(args, w.args) ||
					(!stream && args != w.args) || !strings.HasPrefix(tcs[0].(map[string]any)["id"].(string), "chatcmpl-tool-") {
					t.Errorf("call %d: tool call %v, want arguments %s", i, tcs[0], w.args)
				}
				msgs = append(msgs, reserialise(t, m), map[string]any{"role": "tool", "tool_call_id": "x", "content": "391"})
			}
			v.mu.Lock()
			bodies := slices.Clone(v.cmpl)
			v.mu.Unlock()
			for i, want := range []string{"tags_with_separator", "tags_with_separator", ""} {
				so := gjson.Get(bodies[i], "structured_outputs")
				if got := gjson.Get(so.Get("structural_tag").Str, "format.type").String(); got != want || so.Get("json").Exists() {
					t.Errorf("call %d: structured_outputs %s, want a %q tag", i, so.Raw, want)
				}
			}
			drift, leaves, cs := sessionDrift(t, store, "n1", 3)
			if drift != 0 || leaves != 1 || extends(cs) != 0 {
				t.Errorf("drift %d, %d trajectories, call %d not extending", drift, leaves, extends(cs))
			}
		})
	}
}

// TestEmbeddedTagEqualsChat: for forced calls of tools whose name JSON
// escapes, whose parameters are an empty schema written with a space, or
// missing, the same request and seed sampled through the embedded engine's
// chat endpoint (observe) and as token ids with embeddedTag (tokens) give
// the same answer: content (vLLM's "" for a forced call), tool calls and
// finish reason.
func TestEmbeddedTagEqualsChat(t *testing.T) {
	tools := []json.RawMessage{
		json.RawMessage(`{"type":"function","function":{"name":"we\"ather\\","parameters":{ }}}`),
		json.RawMessage(`{"type":"function","function":{"name":"noargs"}}`),
		json.RawMessage(`{"type":"function","function":{"name":"calc","parameters":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}}}`),
	}
	named := func(n string) map[string]any {
		return map[string]any{"type": "function", "function": map[string]any{"name": n}}
	}
	choices := []any{"required", named(`we"ather\`), named("noargs"), named("calc")}
	got := map[string][]string{}
	for _, mode := range []string{ContinuityObserve, ContinuityTokens} {
		h, store, url := startEngineContinuity(t, mode)
		if mode == ContinuityTokens {
			waitProbe(t, h.s, url)
		}
		for i, choice := range choices {
			body, _ := json.Marshal(map[string]any{"model": "Qwen/Qwen3-0.6B", "tools": tools, "tool_choice": choice,
				"messages": []any{map[string]any{"role": "user", "content": "go"}}, "max_tokens": 300, "temperature": 1, "seed": 11 + i})
			session := fmt.Sprintf("e%d", i)
			r := post(t, h.url, "/v1/chat/completions", body, map[string]string{"X-Hone-Session": session})
			if r.status != 200 {
				t.Fatalf("%s %v: %d %s", mode, choice, r.status, r.body)
			}
			waitRecorded(t, store, session, 1, false)
			ch := gjson.GetBytes(r.body, "choices.0")
			got[mode] = append(got[mode], ch.Get("message.content").Raw+" "+ch.Get("message.tool_calls.#.function").Raw+" "+
				ch.Get("finish_reason").Raw)
		}
		if mode == ContinuityTokens && countTokenCalls(t, h) != float64(len(choices)) {
			t.Errorf("%v calls as token ids, want %d", countTokenCalls(t, h), len(choices))
		}
	}
	for i := range choices {
		if a, b := got[ContinuityObserve][i], got[ContinuityTokens][i]; a != b {
			t.Errorf("choice %v: chat endpoint %s, token ids %s", choices[i], a, b)
		}
	}
}
