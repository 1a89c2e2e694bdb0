package proxy

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/proxy/continuity"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"
)

// The outputs a scripted engine samples in the calculator session: reasoning
// then a tool call; reasoning then the answer; a closing reply.
var calcOutputs = []string{
	"<think>\nI need the tool.\n</think>\n\n<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"17 * 23\", \"n\": 1}}\n</tool_call><|im_end|>",
	"<think>\nIt is 391.\n</think>\n\n17 * 23 = 391.<|im_end|>",
	"<think>\n\n</think>\n\nYou are welcome.<|im_end|>",
}

const calcTool = `{"type":"function","function":{"name":"calculator","description":"Evaluate arithmetic",` +
	`"parameters":{"type":"object","properties":{"expression":{"type":"string"},"n":{"type":"integer"}},"required":["expression"]}}}`

// startContinuity starts hone in front of a scripted engine with a capture
// store, in the given continuity mode, and waits for the probe.
func startContinuity(t *testing.T, mode string, v *scriptedVLLM) (*testHone, *capture.Store) {
	t.Helper()
	return startContinuityKind(t, mode, v, "")
}

// startContinuityKind is startContinuity with the engine of the given kind
// ("" for the default, vLLM).
func startContinuityKind(t *testing.T, mode string, v *scriptedVLLM, kind string) (*testHone, *capture.Store) {
	t.Helper()
	stub := newStub(t)
	stub.answer = v.handle
	store, err := capture.Open(t.TempDir(), capture.DefaultOptions(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	h := startHoneWith(t, store, func(o *Options) {
		o.Continuity = mode
		o.Upstream.Tokenizer = tinyModel
		o.Upstream.Engines[0].Kind = kind
	}, stub)
	if mode == ContinuityTokens {
		waitProbe(t, h.s, stub.url())
	}
	return h, store
}

func waitProbe(t *testing.T, s *Server, url string) *continuity.EngineState {
	t.Helper()
	if s.cont == nil {
		t.Fatalf("tokens mode is off: %s", s.contWhy)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if st := s.cont.State(url); st != nil {
			return st
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the engine was never probed")
	return nil
}

// chatTurn posts one chat call of a session and returns the assistant
// message the client got (aggregated from the chunks when streamed) and
// the raw body.
func chatTurn(t *testing.T, h *testHone, session string, msgs []any, stream bool, extra ...string) (map[string]any, []byte) {
	t.Helper()
	req := map[string]any{"model": "Qwen/Qwen3-0.6B", "messages": msgs, "tools": []json.RawMessage{json.RawMessage(calcTool)},
		"max_tokens": 64, "stream": stream}
	body, _ := json.Marshal(req)
	hdr := map[string]string{"X-Hone-Session": session}
	for i := 0; i+1 < len(extra); i += 2 {
		hdr[extra[i]] = extra[i+1]
	}
	r := post(t, h.url, "/v1/chat/completions", body, hdr)
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if !stream {
		var resp struct {
			Choices []struct {
				Message      map[string]any `json:"message"`
				FinishReason string         `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(r.body, &resp); err != nil || len(resp.Choices) != 1 {
			t.Fatalf("answer %s: %v", r.body, err)
		}
		m := resp.Choices[0].Message
		m["finish_reason"] = resp.Choices[0].FinishReason
		return m, r.body
	}
	return aggregateStream(t, r.body), r.body
}

// aggregateStream folds a chat stream into the message a client builds.
func aggregateStream(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var content, reasoning strings.Builder
	var hasContent bool
	type call struct{ id, name, args string }
	var calls []*call
	fin := ""
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		ch := gjson.Get(data, "choices.0")
		d := ch.Get("delta")
		if c := d.Get("content"); c.Exists() && c.String() != "" {
			content.WriteString(c.String())
			hasContent = true
		}
		reasoning.WriteString(d.Get("reasoning").String())
		d.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
			i := int(tc.Get("index").Int())
			for len(calls) <= i {
				calls = append(calls, &call{})
			}
			c := calls[i]
			if id := tc.Get("id").String(); id != "" {
				c.id = id
			}
			c.name += tc.Get("function.name").String()
			c.args += tc.Get("function.arguments").String()
			return true
		})
		if f := ch.Get("finish_reason"); f.Type == gjson.String {
			fin = f.Str
		}
	}
	m := map[string]any{"role": "assistant", "content": nil, "finish_reason": fin}
	if hasContent {
		m["content"] = content.String()
	}
	if reasoning.Len() > 0 {
		m["reasoning"] = reasoning.String()
	}
	if len(calls) > 0 {
		var tcs []any
		for _, c := range calls {
			tcs = append(tcs, map[string]any{"id": c.id, "type": "function",
				"function": map[string]any{"name": c.name, "arguments": c.args}})
		}
		m["tool_calls"] = tcs
	}
	return m
}

// reserialise sends a served assistant message back the way the Vercel AI
// SDK, Mastra or LangGraph.js do: tool-call arguments parsed and written
// again compactly with the keys in another order, reasoning dropped.
func reserialise(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	out := map[string]any{"role": "assistant", "content": m["content"]}
	tcs, _ := m["tool_calls"].([]any)
	var calls []any
	for _, x := range tcs {
		tc := x.(map[string]any)
		fn := tc["function"].(map[string]any)
		var args map[string]any
		if err := json.Unmarshal([]byte(fn["arguments"].(string)), &args); err != nil {
			t.Fatalf("arguments %v: %v", fn["arguments"], err)
		}
		keys := make([]string, 0, len(args))
		for k := range args {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		slices.Reverse(keys)
		var sb strings.Builder
		sb.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				sb.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			vb, _ := json.Marshal(args[k])
			sb.Write(kb)
			sb.WriteByte(':')
			sb.Write(vb)
		}
		sb.WriteByte('}')
		calls = append(calls, map[string]any{"id": tc["id"], "type": "function",
			"function": map[string]any{"name": fn["name"], "arguments": sb.String()}})
	}
	if calls != nil {
		out["tool_calls"] = calls
	}
	return out
}

// calcSession runs the three calls of the calculator session; edit changes
// the first user turn before the third call.
func calcSession(t *testing.T, h *testHone, store *capture.Store, session string, stream, edit bool) []map[string]any {
	t.Helper()
	msgs := []any{
		map[string]any{"role": "system", "content": "You are a calculator agent."},
		map[string]any{"role": "user", "content": "What is 17 * 23?"},
	}
	m1, raw := chatTurn(t, h, session, msgs, stream)
	waitRecorded(t, store, session, 1, stream)
	if !stream && (gjson.GetBytes(raw, "choices.0.logprobs").Type != gjson.Null ||
		gjson.GetBytes(raw, "choices.0.token_ids").Type != gjson.Null || gjson.GetBytes(raw, "prompt_token_ids").Type != gjson.Null) {
		t.Errorf("what hone asked for reached the client: %s", raw)
	}
	tcs, _ := m1["tool_calls"].([]any)
	if len(tcs) != 1 {
		t.Fatalf("first answer has no tool call: %v", m1)
	}
	id := tcs[0].(map[string]any)["id"]
	msgs = append(msgs, reserialise(t, m1), map[string]any{"role": "tool", "tool_call_id": id, "content": "391"})
	m2, _ := chatTurn(t, h, session, msgs, stream)
	waitRecorded(t, store, session, 2, stream)
	msgs = append(msgs, map[string]any{"role": "assistant", "content": m2["content"]},
		map[string]any{"role": "user", "content": "Thanks!"})
	if edit {
		msgs[1] = map[string]any{"role": "user", "content": "What is 17 * 24?"}
	}
	m3, _ := chatTurn(t, h, session, msgs, stream, "X-Hone-Reward", "1", "X-Hone-Commit", "1")
	return []map[string]any{m1, m2, m3}
}

// sessionPost posts call i of a session's chat loop (the last one with
// the reward and the commit), fails the test on an error status, and waits
// until the store has the call.
func sessionPost(t *testing.T, h *testHone, store *capture.Store, session string, i int, last, stream bool, body []byte) *rawResponse {
	t.Helper()
	hdr := map[string]string{"X-Hone-Session": session}
	if last {
		hdr["X-Hone-Reward"], hdr["X-Hone-Commit"] = "1", "1"
	}
	r := post(t, h.url, "/v1/chat/completions", body, hdr)
	if r.status != 200 {
		t.Fatalf("call %d: status %d: %s", i, r.status, r.body)
	}
	waitRecorded(t, store, session, i+1, stream)
	return r
}

// waitRecorded waits, after a streamed call, until the store has the
// session's first n calls. A stream is handed to the recorder after its
// last byte reached the client, which may already have sent its next call;
// the store numbers a session's calls in the order it gets them, so the
// next call could be stitched first (a capture race outside continuity).
func waitRecorded(t *testing.T, store *capture.Store, session string, n int, stream bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for stream && time.Now().Before(deadline) {
		if sess, _, err := store.GetSession(context.Background(), session); err == nil && sess.Calls >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sessionDrift waits until the rewarded, committed session's experiences
// are built and returns its drift count, its trajectories (leaves) and its
// calls in order.
func sessionDrift(t *testing.T, store *capture.Store, id string, calls int) (int, int, []*capture.Call) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		sess, cs, err := store.GetSession(context.Background(), id)
		if err == nil && sess.Calls == calls && len(cs) == calls && len(sess.Cursors) > 0 {
			slices.SortFunc(cs, func(a, b *capture.Call) int { return a.Start.Compare(b.Start) })
			return sess.Drift, len(sess.Cursors), cs
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s: %v calls stored, err %v", id, sess, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// extends reports whether each call's prompt starts with the previous
// call's prompt and completion.
func extends(cs []*capture.Call) int {
	for i := 1; i < len(cs); i++ {
		prev := slices.Concat(cs[i-1].PromptIDs, cs[i-1].Choices[0].TokenIDs)
		if len(cs[i].PromptIDs) < len(prev) || !slices.Equal(cs[i].PromptIDs[:len(prev)], prev) {
			return i
		}
	}
	return 0
}

// TestContinuitySession: a client that re-serialises tool-call arguments
// (compact, keys reordered) and drops reasoning, with Qwen3's template
// (which drops earlier <think> blocks): in tokens mode every call extends
// the previous path (drift 0, one trajectory); observing, each of the two
// later calls drifts. The client gets the same messages either way.
func TestContinuitySession(t *testing.T) {
	for _, tc := range []struct {
		mode   string
		stream bool
		drift  int
	}{
		{ContinuityTokens, false, 0},
		{ContinuityTokens, true, 0},
		{ContinuityObserve, false, 2},
	} {
		t.Run(tc.mode+map[bool]string{true: "-stream", false: ""}[tc.stream], func(t *testing.T) {
			v := newScriptedVLLM(t, calcOutputs...)
			h, store := startContinuity(t, tc.mode, v)
			got := calcSession(t, h, store, "s1", tc.stream, false)
			drift, leaves, cs := sessionDrift(t, store, "s1", 3)
			if drift != tc.drift || leaves != tc.drift+1 {
				t.Errorf("drift %d and %d trajectories, want %d and %d", drift, leaves, tc.drift, tc.drift+1)
			}
			if bad := extends(cs); (tc.drift == 0) != (bad == 0) {
				t.Errorf("call %d does not extend the previous path (drift %d)", bad, drift)
			}
			want := "/v1/chat/completions"
			if tc.mode == ContinuityTokens {
				want = "/v1/completions"
			}
			if r := v.routes(); len(r) != 3 || r[0] != want || r[2] != want {
				t.Errorf("engine routes %v, want %s", r, want)
			}
			m1, m2, m3 := got[0], got[1], got[2]
			call := m1["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)
			if call["name"] != "calculator" || call["arguments"] != `{"expression": "17 * 23", "n": 1}` ||
				m1["reasoning"] != "\nI need the tool.\n" {
				t.Errorf("first answer %v", m1)
			}
			if c, _ := m1["content"].(string); m1["finish_reason"] != "tool_calls" || strings.TrimSpace(c) != "" {
				t.Errorf("first answer finish %v content %v", m1["finish_reason"], m1["content"])
			}
			if !strings.Contains(m2["content"].(string), "17 * 23 = 391.") || m2["finish_reason"] != "stop" {
				t.Errorf("second answer %v", m2)
			}
			if c, _ := m3["content"].(string); strings.TrimSpace(c) != "You are welcome." {
				t.Errorf("third answer %v", m3)
			}
			for i, c := range cs {
				if len(c.Choices) != 1 || len(c.Choices[0].Logprobs) != len(c.Choices[0].TokenIDs) || len(c.PromptIDs) == 0 {
					t.Errorf("call %d recorded %d prompt ids, %d logprobs for %d tokens", i, len(c.PromptIDs),
						len(c.Choices[0].Logprobs), len(c.Choices[0].TokenIDs))
				}
			}
			if tc.mode == ContinuityTokens {
				// exactly the sampled path, then the template's glue: the
				// turn's closing newline, the tool result, the generation prompt
				glue := v.tok.Encode("\n<|im_start|>user\n<tool_response>\n391\n</tool_response><|im_end|>\n<|im_start|>assistant\n")
				if want := slices.Concat(cs[0].PromptIDs, cs[0].Choices[0].TokenIDs, glue); !slices.Equal(cs[1].PromptIDs, want) {
					t.Errorf("second prompt %q,\nwant %q", v.tok.Decode(cs[1].PromptIDs), v.tok.Decode(want))
				}
				if n := metricValue(t, h, "hone_continuity_calls_total", "result", "spliced"); n != 2 {
					t.Errorf("spliced calls %v, want 2", n)
				}
			}
		})
	}
}

// TestContinuityEditedHistory: a client that edits an earlier user turn
// still starts a new path in tokens mode, counted as drift.
func TestContinuityEditedHistory(t *testing.T) {
	v := newScriptedVLLM(t, calcOutputs...)
	h, store := startContinuity(t, ContinuityTokens, v)
	calcSession(t, h, store, "s2", false, true)
	drift, leaves, cs := sessionDrift(t, store, "s2", 3)
	if drift != 1 || leaves != 2 {
		t.Errorf("drift %d and %d trajectories, want 1 and 2", drift, leaves)
	}
	if bad := extends(cs); bad != 2 {
		t.Errorf("first call not extending its predecessor: %d, want 2", bad)
	}
}

// TestContinuityProbeMismatch: an engine whose /tokenize disagrees with
// hone's rendering stays observed (chat completions as sent), and says so
// on the gauge and in the readiness details.
func TestContinuityProbeMismatch(t *testing.T) {
	v := newScriptedVLLM(t, calcOutputs...)
	v.skew.Store(true)
	stub := newStub(t)
	stub.answer = v.handle
	h := startHone(t, func(o *Options) { o.Continuity, o.Upstream.Tokenizer = ContinuityTokens, tinyModel }, stub)
	st := waitProbe(t, h.s, stub.url())
	if st.Tokens || !strings.Contains(st.Reason, "differs") {
		t.Fatalf("probe state %+v", st)
	}
	if g := metricValue(t, h, "hone_continuity_tokens", "engine", stub.url()); g != 0 {
		t.Errorf("hone_continuity_tokens %v, want 0", g)
	}
	ctl := httptest.NewServer(NewControl(h.s, "", h.reg))
	defer ctl.Close()
	resp, err := http.Get(ctl.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	ready, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if s := string(ready); !strings.HasPrefix(s, "ready\n") || !strings.Contains(s, "continuity: observe on "+stub.url()) ||
		!strings.Contains(s, "differs") {
		t.Errorf("/readyz %q", s)
	}
	// behind a control token, the engines' URLs and states are for its holder
	tokened := httptest.NewServer(NewControl(h.s, "ctl-secret", h.reg))
	defer tokened.Close()
	for auth, wantLines := range map[string]bool{"": false, "Bearer wrong": false, "Bearer ctl-secret": true} {
		req, _ := http.NewRequest("GET", tokened.URL+"/readyz", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.Contains(string(body), stub.url()) != wantLines {
			t.Errorf("/readyz with %q: %d %q; engine lines wanted: %v", auth, resp.StatusCode, body, wantLines)
		}
	}
	calcSessionFirst(t, h)
	if r := v.routes(); len(r) != 1 || r[0] != "/v1/chat/completions" {
		t.Errorf("engine routes %v", r)
	}
}

// TestContinuityReprobe: an engine replaced without going down (its
// /v1/models lists another base model between two health checks) is probed
// again; a new adapter alone is not a new engine.
func TestContinuityReprobe(t *testing.T) {
	v := newScriptedVLLM(t, calcOutputs...)
	stub := newStub(t)
	stub.answer = v.handle
	h := startHone(t, func(o *Options) { o.Continuity, o.Upstream.Tokenizer = ContinuityTokens, tinyModel }, stub)
	if st := waitProbe(t, h.s, stub.url()); !st.Tokens {
		t.Fatalf("probe state %+v", st)
	}
	v.skew.Store(true) // what a probe would now find
	entry := func(id, parent string) string {
		return `{"id":"` + id + `","object":"model","parent":` + parent + `,"max_model_len":40960}`
	}
	stub.setModels(`{"object":"list","data":[` + entry("Qwen/Qwen3-0.6B", "null") + `,` + entry("policy-v2", `"Qwen/Qwen3-0.6B"`) + `]}`)
	time.Sleep(300 * time.Millisecond) // several health checks
	if st := h.s.cont.State(stub.url()); !st.Tokens {
		t.Fatalf("a new adapter made hone probe again: %+v", st)
	}
	stub.setModels(`{"object":"list","data":[` + entry("Qwen/Qwen3-1.7B", "null") + `]}`)
	deadline := time.Now().Add(5 * time.Second)
	for h.s.cont.State(stub.url()).Tokens {
		if time.Now().After(deadline) {
			t.Fatal("the replaced engine was not probed again")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := h.s.cont.State(stub.url()); !strings.Contains(st.Reason, "differs") {
		t.Errorf("probe state %+v", st)
	}
}

// TestContinuityStructuralTag: a single tool call under auto
// (parallel_tool_calls false), which vLLM's chat constrains with a
// structural tag, goes to a vLLM engine as token ids with that tag.
func TestContinuityStructuralTag(t *testing.T) {
	v := newScriptedVLLM(t, calcOutputs...)
	h, _ := startContinuity(t, ContinuityTokens, v)
	body, _ := json.Marshal(map[string]any{"model": "Qwen/Qwen3-0.6B", "max_tokens": 64, "parallel_tool_calls": false,
		"messages": []any{map[string]any{"role": "user", "content": "What is 17 * 23?"}},
		"tools":    []json.RawMessage{json.RawMessage(calcTool)}})
	r := post(t, h.url, "/v1/chat/completions", body, map[string]string{"X-Hone-Session": "st"})
	if r.status != 200 || gjson.GetBytes(r.body, "choices.0.message.tool_calls.#").Int() != 1 {
		t.Fatalf("answer %d %s", r.status, r.body)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if rt := v.paths; len(rt) != 1 || rt[0] != "/v1/completions" || len(v.cmpl) != 1 {
		t.Fatalf("engine routes %v", rt)
	}
	tag := gjson.Get(v.cmpl[0], "structured_outputs.structural_tag")
	if tag.Type != gjson.String || !gjson.Get(tag.Str, "format.stop_after_first").Bool() ||
		!strings.Contains(gjson.Get(tag.Str, "format.tags.0.begin").String(), `"name": "calculator"`) {
		t.Errorf("token-id request %s", v.cmpl[0])
	}
}

func calcSessionFirst(t *testing.T, h *testHone) {
	t.Helper()
	msgs := []any{map[string]any{"role": "user", "content": "What is 17 * 23?"}}
	if m, _ := chatTurn(t, h, "s3", msgs, false); m["tool_calls"] == nil {
		t.Errorf("answer %v", m)
	}
}

// TestContinuityNeedsModel: tokens mode without a model folder observes and
// says why.
func TestContinuityNeedsModel(t *testing.T) {
	stub := newStub(t)
	h := startHone(t, func(o *Options) { o.Continuity = ContinuityTokens }, stub)
	if h.s.cont != nil || !strings.Contains(h.s.ContinuityStatus(), "--model") {
		t.Errorf("status %q", h.s.ContinuityStatus())
	}
}

// TestContinuityResponsesAPI: Responses API calls are translated onto chat
// completions before continuity, so a tool loop through previous_response_id
// (the second call streamed) goes to the engine as token ids and stays one
// trajectory.
func TestContinuityResponsesAPI(t *testing.T) {
	v := newScriptedVLLM(t, calcOutputs...)
	h, store := startContinuity(t, ContinuityTokens, v)
	tool := `{"type":"function","name":"calculator","description":"Evaluate arithmetic","parameters":` +
		gjson.Get(calcTool, "function.parameters").Raw + `}`
	first := post(t, h.url, "/v1/responses", []byte(`{"model":"Qwen/Qwen3-0.6B","instructions":"You are a calculator agent.",`+
		`"input":"What is 17 * 23?","tools":[`+tool+`],"max_output_tokens":64}`), map[string]string{"X-Hone-Session": "r1"})
	if first.status != 200 {
		t.Fatalf("status %d: %s", first.status, first.body)
	}
	call := gjson.GetBytes(first.body, `output.#(type=="function_call")`)
	if call.Get("name").String() != "calculator" || call.Get("arguments").String() != `{"expression": "17 * 23", "n": 1}` {
		t.Fatalf("first answer %s", first.body)
	}
	follow := `{"model":"Qwen/Qwen3-0.6B","instructions":"You are a calculator agent.","previous_response_id":"` +
		gjson.GetBytes(first.body, "id").String() + `","input":[{"type":"function_call_output","call_id":"` +
		call.Get("call_id").String() + `","output":"391"}],"tools":[` + tool + `],"max_output_tokens":64,"stream":true}`
	second := post(t, h.url, "/v1/responses", []byte(follow),
		map[string]string{"X-Hone-Session": "r1", "X-Hone-Reward": "1", "X-Hone-Commit": "1"})
	if second.status != 200 || !strings.Contains(string(second.body), "17 * 23 = 391.") ||
		!strings.Contains(string(second.body), "response.completed") {
		t.Fatalf("second answer %d: %s", second.status, second.body)
	}
	drift, leaves, cs := sessionDrift(t, store, "r1", 2)
	if drift != 0 || leaves != 1 || extends(cs) != 0 {
		t.Errorf("drift %d, %d trajectories", drift, leaves)
	}
	if r := v.routes(); len(r) != 2 || r[0] != "/v1/completions" || r[1] != "/v1/completions" {
		t.Errorf("engine routes %v", r)
	}
}

// TestContinuityMessagesAPI: an Anthropic Messages tool loop, whose
// tool_use input hone's own translation writes back as compact arguments,
// is one trajectory in tokens mode and drifts when observed.
func TestContinuityMessagesAPI(t *testing.T) {
	for _, tc := range []struct {
		mode  string
		drift int
	}{{ContinuityTokens, 0}, {ContinuityObserve, 1}} {
		t.Run(tc.mode, func(t *testing.T) {
			v := newScriptedVLLM(t, calcOutputs...)
			h, store := startContinuity(t, tc.mode, v)
			tool := `{"name":"calculator","description":"Evaluate arithmetic","input_schema":` +
				gjson.Get(calcTool, "function.parameters").Raw + `}`
			user := `{"role":"user","content":"What is 17 * 23?"}`
			first := post(t, h.url, "/v1/messages", []byte(`{"model":"Qwen/Qwen3-0.6B","max_tokens":64,"system":"You are a calculator agent.",`+
				`"messages":[`+user+`],"tools":[`+tool+`]}`), map[string]string{"X-Hone-Session": "m1"})
			use := gjson.GetBytes(first.body, `content.#(type=="tool_use")`)
			if first.status != 200 || use.Get("name").String() != "calculator" {
				t.Fatalf("first answer %d: %s", first.status, first.body)
			}
			assistant := `{"role":"assistant","content":` + gjson.GetBytes(first.body, "content").Raw + `}`
			result := `{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + use.Get("id").String() + `","content":"391"}]}`
			second := post(t, h.url, "/v1/messages", []byte(`{"model":"Qwen/Qwen3-0.6B","max_tokens":64,"system":"You are a calculator agent.",`+
				`"messages":[`+user+`,`+assistant+`,`+result+`],"tools":[`+tool+`]}`),
				map[string]string{"X-Hone-Session": "m1", "X-Hone-Reward": "1", "X-Hone-Commit": "1"})
			if second.status != 200 || !strings.Contains(string(second.body), "17 * 23 = 391.") {
				t.Fatalf("second answer %d: %s", second.status, second.body)
			}
			drift, leaves, _ := sessionDrift(t, store, "m1", 2)
			if drift != tc.drift || leaves != tc.drift+1 {
				t.Errorf("drift %d, %d trajectories; want %d", drift, leaves, tc.drift)
			}
		})
	}
}

// TestContinuityForcedFirstCall: a call tokens mode leaves to the chat
// endpoint (here with a response_format) is remembered from its record, so
// the next call, sent back re-serialised, puts its sampled turn back.
func TestContinuityForcedFirstCall(t *testing.T) {
	v := newScriptedVLLM(t, calcOutputs...)
	h, store := startContinuity(t, ContinuityTokens, v)
	msgs := []any{map[string]any{"role": "user", "content": "What is 17 * 23?"}}
	req := func(extra map[string]any) []byte {
		r := map[string]any{"model": "Qwen/Qwen3-0.6B", "messages": msgs, "tools": []json.RawMessage{json.RawMessage(calcTool)},
			"max_tokens": 64}
		for k, v := range extra {
			r[k] = v
		}
		b, _ := json.Marshal(r)
		return b
	}
	first := post(t, h.url, "/v1/chat/completions", req(map[string]any{"response_format": map[string]any{"type": "json_object"}}),
		map[string]string{"X-Hone-Session": "f1"})
	var m1 map[string]any
	if err := json.Unmarshal([]byte(gjson.GetBytes(first.body, "choices.0.message").Raw), &m1); err != nil || m1["tool_calls"] == nil {
		t.Fatalf("first answer %s", first.body)
	}
	id := gjson.GetBytes(first.body, "choices.0.message.tool_calls.0.id").String()
	msgs = append(msgs, reserialise(t, m1), map[string]any{"role": "tool", "tool_call_id": id, "content": "391"})
	second := post(t, h.url, "/v1/chat/completions", req(nil),
		map[string]string{"X-Hone-Session": "f1", "X-Hone-Reward": "1", "X-Hone-Commit": "1"})
	if second.status != 200 {
		t.Fatalf("second answer %d: %s", second.status, second.body)
	}
	if r := v.routes(); len(r) != 2 || r[0] != "/v1/chat/completions" || r[1] != "/v1/completions" {
		t.Errorf("engine routes %v", r)
	}
	drift, leaves, _ := sessionDrift(t, store, "f1", 2)
	if drift != 0 || leaves != 1 {
		t.Errorf("drift %d, %d trajectories; want 0 and 1", drift, leaves)
	}
	if n := metricValue(t, h, "hone_continuity_turns_spliced_total"); n != 1 {
		t.Errorf("turns put back %v, want 1", n)
	}
}
