package continuity

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/model/template"
	"github.com/tidwall/gjson"
)

// TestTurnMatchedByMeaning: the assistant message a client sends back
// matches the served choice when it means the same to the template, and
// only then.
func TestTurnMatchedByMeaning(t *testing.T) {
	served := capture.Choice{Content: "\n\nLet me compute.", Reasoning: "think",
		ToolCalls: []capture.ToolCall{{Name: "calc", Arguments: `{"x": 1, "y": {"a": [1, 2.5], "b": "s"}}`}}}
	for _, tc := range []struct {
		name, msg string
		same      bool
	}{
		{"as served", `{"role":"assistant","content":"\n\nLet me compute.","reasoning":"think","tool_calls":[{"id":"call_1","type":"function","function":{"name":"calc","arguments":"{\"x\": 1, \"y\": {\"a\": [1, 2.5], \"b\": \"s\"}}"}}]}`, true},
		{"compact, keys reordered, reasoning dropped", `{"role":"assistant","content":"Let me compute.","tool_calls":[{"id":"other","type":"function","function":{"name":"calc","arguments":"{\"y\":{\"b\":\"s\",\"a\":[1,2.5]},\"x\":1}"}}]}`, true},
		{"arguments as an object", `{"role":"assistant","content":"Let me compute.","tool_calls":[{"type":"function","function":{"name":"calc","arguments":{"y":{"a":[1,2.5],"b":"s"},"x":1}}}]}`, true},
		{"reasoning inline in content", `{"role":"assistant","content":"<think>\nthink\n</think>\n\nLet me compute.","tool_calls":[{"type":"function","function":{"name":"calc","arguments":"{\"x\":1,\"y\":{\"a\":[1,2.5],\"b\":\"s\"}}"}}]}`, true},
		{"another argument value", `{"role":"assistant","content":"Let me compute.","tool_calls":[{"type":"function","function":{"name":"calc","arguments":"{\"x\":2,\"y\":{\"a\":[1,2.5],\"b\":\"s\"}}"}}]}`, false},
		// JavaScript clients parse and write numbers by value (1.0 as 1,
		// 2.50 as 2.5): they mean the same
		{"numbers written otherwise", `{"role":"assistant","content":"Let me compute.","tool_calls":[{"type":"function","function":{"name":"calc","arguments":"{\"x\":1.0,\"y\":{\"a\":[1e0,2.50],\"b\":\"s\"}}"}}]}`, true},
		{"another number", `{"role":"assistant","content":"Let me compute.","tool_calls":[{"type":"function","function":{"name":"calc","arguments":"{\"x\":1.5,\"y\":{\"a\":[1,2.5],\"b\":\"s\"}}"}}]}`, false},
		{"another tool", `{"role":"assistant","content":"Let me compute.","tool_calls":[{"type":"function","function":{"name":"calc2","arguments":"{\"x\":1,\"y\":{\"a\":[1,2.5],\"b\":\"s\"}}"}}]}`, false},
		{"edited text", `{"role":"assistant","content":"Let me compute!","tool_calls":[{"type":"function","function":{"name":"calc","arguments":"{\"x\":1,\"y\":{\"a\":[1,2.5],\"b\":\"s\"}}"}}]}`, false},
		{"tool call dropped", `{"role":"assistant","content":"Let me compute."}`, false},
	} {
		body := `{"messages":[{"role":"user","content":"q"},` + tc.msg + `]}`
		in, err := template.RequestInput([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		msgs, err := parseMessages(in)
		if err != nil {
			t.Fatal(err)
		}
		seed := seedHash(in)
		hs := prefixHashes(seed, msgs)
		served := prefixHashes(seed, msgs[:1])[0].chain(replyCanon(nil, &served))
		if got := hs[1] == served; got != tc.same {
			t.Errorf("%s: matched %v, want %v", tc.name, got, tc.same)
		}
	}
}

// TestSeedHash: tools and template arguments are part of what a prefix
// means; their spelling is not.
func TestSeedHash(t *testing.T) {
	h := func(body string) prefixHash {
		in, err := template.RequestInput([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return seedHash(in)
	}
	base := h(`{"messages":[{"role":"user","content":"q"}],"tools":[{"type":"function","function":{"name":"a","parameters":{"type":"object","properties":{}}}}]}`)
	if h(`{"messages":[{"role":"user","content":"q"}],"tools":[{"function":{"parameters":{"properties":{},"type":"object"},"name":"a"},"type":"function"}]}`) != base {
		t.Error("the same tools spelt otherwise changed the seed")
	}
	for _, other := range []string{
		`{"messages":[{"role":"user","content":"q"}]}`,
		`{"messages":[{"role":"user","content":"q"}],"tools":[{"type":"function","function":{"name":"b","parameters":{"type":"object","properties":{}}}}]}`,
		`{"messages":[{"role":"user","content":"q"}],"tools":[{"type":"function","function":{"name":"a","parameters":{"type":"object","properties":{}}}}],"chat_template_kwargs":{"enable_thinking":false}}`,
	} {
		if h(other) == base {
			t.Errorf("%s: same seed as the base", other)
		}
	}
}

// TestNthEOS: the n-th end-of-turn token, whichever of the model's it is.
func TestNthEOS(t *testing.T) {
	k := &Continuity{eos: []eosToken{{1, "<|im_end|>"}, {2, "<|endoftext|>"}}}
	text := "a<|im_end|>\nb<|endoftext|>c<|im_end|>\nd"
	for _, tc := range []struct {
		n, end int
		id     int32
	}{{1, 11, 1}, {2, 26, 2}, {3, 37, 1}, {4, -1, 0}} {
		end, tok := k.nthEOS(text, tc.n)
		if end != tc.end || (end >= 0 && tok.id != tc.id) {
			t.Errorf("n=%d: end %d token %d, want %d and %d", tc.n, end, tok.id, tc.end, tc.id)
		}
	}
}

// TestCompletionsBody: the token-id request keeps the client's sampling
// fields, drops chat-only ones, asks for what capture needs, and sets
// max_tokens as vLLM's chat does.
func TestCompletionsBody(t *testing.T) {
	p := &Plan{ids: []int32{5, 6, 7}, topN: 2}
	up := `{"model":"m","messages":[{"role":"user","content":"q"}],"tools":[],"tool_choice":"auto","temperature":0.5,` +
		`"seed":3,"stop":["x"],"stream":true,"stream_options":{"include_usage":true},"logprobs":true,"top_logprobs":2,` +
		`"return_token_ids":true,"chat_template_kwargs":{"enable_thinking":false},"max_completion_tokens":9,"n":2}`
	p.up = []byte(up)
	b, err := p.completionsBody(100, false)
	if err != nil {
		t.Fatal(err)
	}
	doc := gjson.ParseBytes(b)
	want := map[string]string{"model": `"m"`, "temperature": "0.5", "seed": "3", "stop": `["x"]`, "stream": "true",
		"stream_options": `{"include_usage":true}`, "n": "2", "prompt": "[5,6,7]", "max_tokens": "9", "logprobs": "2",
		"return_token_ids": "true", "return_tokens_as_token_ids": "true"}
	got := map[string]string{}
	doc.ForEach(func(k, v gjson.Result) bool { got[k.Str] = v.Raw; return true })
	if len(got) != len(want) {
		t.Errorf("fields %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %s, want %s", k, got[k], v)
		}
	}
	p.up = []byte(`{"model":"m","messages":[]}`)
	if b, _ := p.completionsBody(100, false); gjson.GetBytes(b, "max_tokens").Int() != 97 {
		t.Errorf("default max_tokens: %s", b)
	}
	p.up = []byte(`{"model":"m","skip_special_tokens":true,"max_tokens":5}`)
	if b, _ := p.completionsBody(100, true); gjson.GetBytes(b, "skip_special_tokens").Bool() || strings.Count(string(b), "skip_special") != 1 {
		t.Errorf("tool-calling request for vLLM: %s", b)
	}
	p.up = []byte(`{"model":"m","messages":[]}`)
	if _, err := p.completionsBody(0, false); err == nil {
		t.Error("no max_tokens and no max_model_len: want an error")
	}
}

// TestCovered: what tokens mode leaves to the engine's chat endpoint.
func TestCovered(t *testing.T) {
	for body, ok := range map[string]bool{
		`{"tool_choice":"auto"}`:                                      true,
		`{"tool_choice":"none","response_format":{"type":"text"}}`:    true,
		`{"tool_choice":null}`:                                        true,
		`{"tool_choice":"required"}`:                                  false, // no tools
		`{"tool_choice":{"type":"function","function":{"name":"a"}}}`: false,
		`{"tool_choice":"required","tools":[{"type":"function","function":{"name":"a","strict":true}}]}`:                    true,
		`{"tool_choice":"required","tools":[{"type":"function","function":{"name":"a"}}],"stream":true}`:                    true,
		`{"tool_choice":"required","tools":[{"type":"function","function":{"name":"a"}}],"parallel_tool_calls":false}`:      true,
		`{"tool_choice":{"type":"function","function":{"name":"a"}},"tools":[{"type":"function","function":{"name":"a"}}]}`: true,
		`{"tool_choice":{"type":"function","function":{"name":"b"}},"tools":[{"type":"function","function":{"name":"a"}}]}`: false,
		`{"tool_choice":{"type":"function"},"tools":[{"type":"function","function":{"name":"a"}}]}`:                         false,
		`{"tool_choice":{"type":"function","function":{"name":""}},"tools":[{"type":"function","function":{"name":""}}]}`:   false, // the engines refuse an empty name
		`{"response_format":{"type":"json_object"}}`:                                                                        false,
		`{"continue_final_message":true}`:    false,
		`{"add_generation_prompt":false}`:    false,
		`{"add_generation_prompt":true}`:     true,
		`{"chat_template":"{{ messages }}"}`: false,
		`{"structured_outputs":{"json":{}}}`: false,
		`{"tools":[{"type":"function","function":{"name":"a"}}],"parallel_tool_calls":false}`:               true, // vLLM engines get structuralTag
		`{"tools":[{"type":"function","function":{"name":"a","strict":true}}]}`:                             true,
		`{"tools":[{"type":"function","function":{"name":"a","strict":false}}],"parallel_tool_calls":true}`: true,
		`{"include_reasoning":false}`: false,
		`{"include_reasoning":true}`:  true,
	} {
		if err := covered(gjson.Parse(body)); (err == nil) != ok {
			t.Errorf("%s: covered err %v, want ok %v", body, err, ok)
		}
	}
}

// TestChatBodyFromCompletion: a completions answer becomes the chat
// completion: parsed reasoning and tool call, tool_calls finish reason,
// logprobs in the chat form with the client's top_logprobs, ids.
func TestChatBodyFromCompletion(t *testing.T) {
	k, err := New(tinyModel, nil, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	ids := k.tok.Encode(`<think>r</think><tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>`)
	var toks, lps, tops []string
	for i, id := range ids {
		s := `"token_id:` + itoa(int(id)) + `"`
		toks, lps = append(toks, s), append(lps, "-0.5")
		tops = append(tops, `{`+s+`:-0.5,"token_id:`+itoa(i)+`":-1.25,"token_id:9":-3}`)
	}
	text := k.tok.Decode(ids)
	cmpl := `{"id":"cmpl-abc","object":"text_completion","created":7,"model":"m","choices":[{"index":0,"text":` +
		mustQuote(text) + `,"logprobs":{"text_offset":[],"token_logprobs":[` + strings.Join(lps, ",") + `],"tokens":[` +
		strings.Join(toks, ",") + `],"top_logprobs":[` + strings.Join(tops, ",") + `]},"finish_reason":"stop",` +
		`"stop_reason":null}],"usage":{"prompt_tokens":3,"total_tokens":9,"completion_tokens":6}}`
	p := &Plan{k: k, ids: []int32{1, 2, 3}, tools: true, topN: 2, thinking: true}
	out, err := p.ChatBody([]byte(cmpl))
	if err != nil {
		t.Fatal(err)
	}
	doc := gjson.ParseBytes(out)
	checks := map[string]string{"id": "chatcmpl-abc", "object": "chat.completion", "choices.0.message.reasoning": "r",
		"choices.0.message.content": "", "choices.0.message.tool_calls.0.function.name": "f",
		"choices.0.message.tool_calls.0.function.arguments": `{"a": 1}`, "choices.0.finish_reason": "tool_calls",
		"prompt_token_ids": "[1,2,3]", "usage.total_tokens": "9", "choices.0.logprobs.content.0.token": "<think>",
		"choices.0.logprobs.content.0.logprob": "-0.5", "choices.0.logprobs.content.0.top_logprobs.#": "2",
		"choices.0.logprobs.content.0.top_logprobs.1.logprob": "-1.25"}
	for path, want := range checks {
		got := doc.Get(path)
		if path == "prompt_token_ids" {
			if got.Raw != want {
				t.Errorf("%s = %s, want %s", path, got.Raw, want)
			}
			continue
		}
		if got.String() != want {
			t.Errorf("%s = %q, want %q\n%s", path, got.String(), want, out)
		}
	}
	var back []int32
	_ = json.Unmarshal([]byte(doc.Get("choices.0.token_ids").Raw), &back)
	if len(back) != len(ids) {
		t.Errorf("token_ids %v, want %v", back, ids)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func mustQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestTurnCacheBytes: the served-turn cache stays within its byte budget,
// dropping the least recently used turns, and accounts replaced entries.
func TestTurnCacheBytes(t *testing.T) {
	k, err := New(tinyModel, nil, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	big := make([]int32, continuityBytes/4/8) // an eighth of the budget
	for i := 0; i < 20; i++ {
		k.turns.Add("s\x00"+itoa(i), &servedTurn{ids: big})
		k.turns.Add("s\x00"+itoa(i), &servedTurn{ids: big}) // replaced: counted once
	}
	if n, b := k.turns.Len(), k.turns.Bytes(); n != 8 || b != continuityBytes {
		t.Errorf("%d turns, %d bytes; want 8 and %d", n, b, continuityBytes)
	}
	if _, ok := k.turns.Get("s\x0019"); !ok {
		t.Error("the newest turn was evicted")
	}
	if _, ok := k.turns.Get("s\x0011"); ok {
		t.Error("an old turn outlived the budget")
	}
}

// TestReasoningTokens: vLLM's reasoning token count, tokens before
// </think> (a leading <think> aside), or all when reasoning never ended;
// none for the embedded engine, which reports no count.
func TestReasoningTokens(t *testing.T) {
	k, err := New(tinyModel, nil, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	enc := k.tok.Encode
	vllm, emb := "vllm", "embedded"
	for _, tc := range []struct {
		out      string
		thinking bool
		kind     string
		n        int
		ok       bool
	}{
		{"<think>ab</think>cd", true, vllm, 2, true},
		{"ab</think>cd", true, vllm, 2, true},
		{"abcd", true, vllm, 4, true},
		{"abcd", false, vllm, 0, true},
		{"<think>ab</think>cd", false, vllm, 2, true},
		{"<think>ab</think>cd", true, emb, 0, false},
	} {
		p := &Plan{k: k, thinking: tc.thinking, sent: true, kind: tc.kind}
		n, ok := p.reasoningTokens([][]int32{enc(tc.out)})
		if n != tc.n || ok != tc.ok {
			t.Errorf("%q thinking %v %s: %d %v, want %d %v", tc.out, tc.thinking, tc.kind, n, ok, tc.n, tc.ok)
		}
	}
}

// TestSingleToolCall: with parallel_tool_calls false the client gets the
// first of two sampled tool calls, as vLLM's maybe_filter_parallel_tool_calls
// leaves it, plain and streamed (where the second call's deltas are
// dropped); the turn remembered is what the client got.
func TestSingleToolCall(t *testing.T) {
	k, err := New(tinyModel, nil, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	text := "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>"
	for _, single := range []bool{false, true} {
		want := map[bool]int{false: 2, true: 1}[single]
		p := &Plan{k: k, ids: []int32{1, 2, 3}, tools: true, single: single, session: "s"}
		cmpl := `{"id":"cmpl-a","object":"text_completion","created":7,"model":"m","choices":[{"index":0,"text":` +
			mustQuote(text) + `,"finish_reason":"stop","stop_reason":null}]}`
		out, err := p.ChatBody([]byte(cmpl))
		if err != nil {
			t.Fatal(err)
		}
		if n := gjson.GetBytes(out, "choices.0.message.tool_calls.#").Int(); int(n) != want {
			t.Errorf("single %v: %d tool calls, want %d: %s", single, n, want, out)
		}
		var sse strings.Builder
		for i, piece := range strings.SplitAfter(text, "\n") {
			fin := "null"
			if i == len(strings.SplitAfter(text, "\n"))-1 {
				fin = `"stop"`
			}
			fmt.Fprintf(&sse, "data: {\"id\":\"cmpl-a\",\"object\":\"text_completion\",\"created\":7,\"model\":\"m\","+
				"\"choices\":[{\"index\":0,\"text\":%s,\"finish_reason\":%s}]}\n\n", mustQuote(piece), fin)
		}
		sse.WriteString("data: [DONE]\n\n")
		b, err := io.ReadAll(p.ChatStream(strings.NewReader(sse.String())))
		if err != nil {
			t.Fatal(err)
		}
		calls, finish := streamedCalls(b)
		if calls != want || finish != "tool_calls" {
			t.Errorf("single %v streamed: %d tool calls (want %d), finish %v:\n%s", single, calls, want, finish, b)
		}
	}
}

// tinyModel is the repository's tiny Qwen3-shaped model folder (chat
// template and tokenizer).
const tinyModel = "../../testdata/tiny-model"

// streamedCalls counts the tool calls of a chat stream's first choice (by
// their index) and returns its finish reason.
func streamedCalls(body []byte) (calls int, finish string) {
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		ch := gjson.Get(data, "choices.0")
		ch.Get("delta.tool_calls.#.index").ForEach(func(_, i gjson.Result) bool {
			calls = max(calls, int(i.Int())+1)
			return true
		})
		if f := ch.Get("finish_reason"); f.Type == gjson.String {
			finish = f.Str
		}
	}
	return calls, finish
}
