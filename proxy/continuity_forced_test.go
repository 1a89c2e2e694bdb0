package proxy

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
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
		// covers (the embedded engine gets no structural tag)
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
// ids with structured_outputs, the session is one trajectory without
// drift, and every tool call's arguments parse against the tool's schema.
// Streamed, the calls come as vLLM's chat streams forced calls (tool-call
// deltas) with the same samples. Observed (forced calls to the chat
// endpoint as sent) the same loop drifts.
func TestContinuityForcedEmbedded(t *testing.T) {
	var unstreamed []gjson.Result
	for _, stream := range []bool{false, true} {
		h, store, url := startEngineContinuity(t, ContinuityTokens)
		if st := waitProbe(t, h.s, url); !st.tokens {
			t.Fatalf("probe against the embedded engine: %s", st.reason)
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
		if n := countTokenCalls(h); n != 4 {
			t.Errorf("stream %v: %v calls sent as token ids, want 4", stream, n)
		}
	}

	obs, obsStore, _ := startEngineContinuity(t, ContinuityObserve)
	forcedSession(t, obs, obsStore, "o1", true, false) // the embedded engine's chat says stop for a named call, as vLLM
	drift, leaves, _ := sessionDrift(t, obsStore, "o1", 4)
	t.Logf("observed: drift %d, %d trajectories", drift, leaves)
	if drift == 0 {
		t.Errorf("observed: no drift: the client's re-serialised arguments should not match the sampled text")
	}
}

func countTokenCalls(h *testHone) float64 {
	return testutil.ToFloat64(h.s.cont.calls.WithLabelValues("rendered")) + testutil.ToFloat64(h.s.cont.calls.WithLabelValues("spliced"))
}

// TestContinuityForcedJSON: forced calls on vLLM 0.32's JSON tool-call
// path, which tokens mode uses towards engines taking no structural tag
// (hone's embedded engine), against a stub replaying vLLM's formats. The
// token-id request carries structured_outputs json with vLLM's schema (an
// array of {name, parameters}, at most one with parallel_tool_calls false;
// the named function's parameters); the answer is vLLM's chat answer for
// that path: the array's items as tool calls with Python-serialised
// arguments (", ", ": ", floats as Python writes them, no ASCII escapes),
// content "", finish_reason tool_calls (required) or stop (named), the
// reasoning parsed; a named call's arguments are its output as written;
// streamed, one announcement per call, then argument deltas, the
// parameters as written. The client sends both calls back re-serialised:
// one trajectory, drift 0, every call as token ids.
func TestContinuityForcedJSON(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "stream"}[stream], func(t *testing.T) { forcedVLLM(t, stream) })
	}
}

func forcedVLLM(t *testing.T, stream bool) {
	v := newScriptedVLLM(t,
		"<think>\nI need the tool.\n</think>\n\n"+`[{"name": "calculator", "parameters": {"expression": "17*23 \u00e9", "n": 1, "scale": 2.50}}]`+"<|im_end|>",
		"<think>\nCheck it.\n</think>\n\n"+`{"expression":  "391"}`+"<|im_end|>",
		"<think>\nIt is 391.\n</think>\n\n17 * 23 = 391.<|im_end|>")
	h, store := startContinuityKind(t, ContinuityTokens, v, "embedded")
	msgs := []any{map[string]any{"role": "user", "content": "What is 17 * 23?"}}
	call := func(choice any, hdr map[string]string) *rawResponse {
		r := map[string]any{"model": "Qwen/Qwen3-0.6B", "messages": msgs, "tools": []json.RawMessage{json.RawMessage(calcTool)},
			"max_tokens": 64, "tool_choice": choice, "stream": stream}
		if choice == "required" {
			r["parallel_tool_calls"] = false
		}
		b, _ := json.Marshal(r)
		hdr["X-Hone-Session"] = "v1"
		resp := post(t, h.url, "/v1/chat/completions", b, hdr)
		if resp.status != 200 {
			t.Fatalf("%v: %d %s", choice, resp.status, resp.body)
		}
		return resp
	}
	named := map[string]any{"type": "function", "function": map[string]any{"name": "calculator"}}
	wants := []struct {
		choice            any
		args, finish, why string
	}{
		{"required", `{"expression": "17*23 é", "n": 1, "scale": 2.5}`, "tool_calls", "\nI need the tool.\n"},
		{named, "\n\n" + `{"expression":  "391"}`, "stop", "\nCheck it.\n"},
	}
	for i, w := range wants {
		r := call(w.choice, map[string]string{})
		ch := gjson.GetBytes(r.body, "choices.0")
		if stream {
			if i == 0 {
				// streamed, the parameters as the model wrote them
				w.args = `{"expression": "17*23 \u00e9", "n": 1, "scale": 2.50}`
			}
			checkForcedChunks(t, r.body)
			m := aggregateStream(t, r.body)
			fin := m["finish_reason"]
			delete(m, "finish_reason")
			if m["content"] == nil {
				m["content"] = "" // the role chunk's
			}
			b, _ := json.Marshal(map[string]any{"message": m, "finish_reason": fin})
			ch = gjson.ParseBytes(b)
		}
		tc := ch.Get("message.tool_calls")
		if n := len(tc.Array()); n != 1 || tc.Get("0.function.name").String() != "calculator" ||
			tc.Get("0.function.arguments").String() != w.args || !strings.HasPrefix(tc.Get("0.id").String(), "call_") ||
			tc.Get("0.type").String() != "function" {
			t.Errorf("call %d: tool calls %s, want arguments %q", i, tc.Raw, w.args)
		}
		if c := ch.Get("message.content"); c.Type != gjson.String || c.Str != "" {
			t.Errorf("call %d: content %s", i, c.Raw)
		}
		if f := ch.Get("finish_reason").String(); f != w.finish {
			t.Errorf("call %d: finish_reason %q, want %q", i, f, w.finish)
		}
		if rs := ch.Get("message.reasoning").String(); rs != w.why {
			t.Errorf("call %d: reasoning %q", i, rs)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(ch.Get("message").Raw), &m); err != nil {
			t.Fatal(err)
		}
		id := tc.Get("0.id").String()
		msgs = append(msgs, reserialise(t, m), map[string]any{"role": "tool", "tool_call_id": id, "content": "391"})
	}
	call("auto", map[string]string{"X-Hone-Reward": "1", "X-Hone-Commit": "1"})
	waitRecorded(t, store, "v1", 3, stream)

	if r := v.routes(); len(r) != 3 || r[0] != "/v1/completions" || r[1] != "/v1/completions" || r[2] != "/v1/completions" {
		t.Errorf("engine routes %v", r)
	}
	v.mu.Lock()
	bodies := slices.Clone(v.cmpl)
	v.mu.Unlock()
	schemas := []string{
		`{"type":"array","minItems":1,"items":{"type":"object","anyOf":[{"properties":{"name":{"type":"string","enum":["calculator"]},` +
			`"parameters":{"type":"object","properties":{"expression":{"type":"string"},"n":{"type":"integer"}},"required":["expression"]}},` +
			`"required":["name","parameters"]}]},"maxItems":1}`,
		`{"type":"object","properties":{"expression":{"type":"string"},"n":{"type":"integer"}},"required":["expression"]}`,
		``,
	}
	for i, want := range schemas {
		if i >= len(bodies) {
			break
		}
		got := gjson.Get(bodies[i], "structured_outputs.json").Raw
		if !jsonEqual(got, want) {
			t.Errorf("call %d: structured_outputs.json %s, want %s", i, got, want)
		}
		for _, k := range []string{"tool_choice", "tools", "messages", "parallel_tool_calls"} {
			if gjson.Get(bodies[i], k).Exists() {
				t.Errorf("call %d: completions body has %s", i, k)
			}
		}
	}
	drift, leaves, cs := sessionDrift(t, store, "v1", 3)
	if drift != 0 || leaves != 1 || extends(cs) != 0 {
		t.Errorf("drift %d, %d trajectories, call %d not extending", drift, leaves, extends(cs))
	}
	if n := testutil.ToFloat64(h.s.cont.spliced); n != 2 {
		t.Errorf("turns put back %v, want 2", n)
	}
}

// checkForcedChunks checks a streamed forced call's chunks as vLLM's chat
// stream sends them: the role chunk with content "", then no content, the
// call announced once (id, type, name) and its arguments in later deltas
// without id or name, and the finish reason on the last choice chunk.
func checkForcedChunks(t *testing.T, body []byte) {
	t.Helper()
	announced, fins := 0, 0
	for i, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		d := gjson.Get(data, "choices.0.delta")
		if c := d.Get("content"); c.Exists() && (c.Str != "" || d.Get("role").String() != "assistant") {
			t.Errorf("line %d: content delta %s", i, data)
		}
		d.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
			if tc.Get("id").Exists() {
				announced++
				if tc.Get("type").String() != "function" || tc.Get("function.name").String() == "" {
					t.Errorf("line %d: announcement %s", i, tc.Raw)
				}
			} else if tc.Get("function.name").Exists() || tc.Get("type").Exists() {
				t.Errorf("line %d: a later delta names the call: %s", i, tc.Raw)
			}
			return true
		})
		if gjson.Get(data, "choices.0.finish_reason").Type == gjson.String {
			fins++
		}
	}
	if announced != 1 || fins != 1 {
		t.Errorf("%d calls announced, %d finish reasons, want 1 and 1:\n%s", announced, fins, body)
	}
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

// TestPyDumps: arguments re-serialised as Python's json.dumps(x,
// ensure_ascii=False) writes what json.loads read (values checked with
// CPython 3.11).
func TestPyDumps(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":1,"b":[1,2,{"c":null}],"d":true,"e":false}`:                      `{"a": 1, "b": [1, 2, {"c": null}], "d": true, "e": false}`,
		`{"x":2.50,"y":1e3,"z":1E-7,"w":-0.0,"v":1e16,"u":123456789012345678}`: `{"x": 2.5, "y": 1000.0, "z": 1e-07, "w": -0.0, "v": 1e+16, "u": 123456789012345678}`,
		`{"s":"\u00e9\n\t\"\\/\u0001<>&"}`:                                     `{"s": "é\n\t\"\\/\u0001<>&"}`,
		`{"k":1,"k":2,"j":3}`:                                                  `{"k": 2, "j": 3}`,
		`{"n":-0,"m":1.0,"big":1e400}`:                                         `{"n": 0, "m": 1.0, "big": Infinity}`,
		`{"f":0.1,"g":100000000000000000000.0,"h":0.0001,"i":0.00001}`:         `{"f": 0.1, "g": 1e+20, "h": 0.0001, "i": 1e-05}`,
	} {
		if got := pyDumps(gjson.Parse(in)); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
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
