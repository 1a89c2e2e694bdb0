package peers

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hone-rl/hone/proxy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"
)

// Requests whose answers vLLM shapes beyond plain text: n > 1, forced tool
// calls, reasoning. A random model needs help to give them their shape:
//
//   - n=2 needs sampling (vLLM refuses n > 1 at temperature 0), so a seed.
//   - Forced tool calls: vLLM 0.32 enforces the hermes call envelope with an
//     xgrammar structural tag, and the arguments' schema only for a tool
//     marked "strict": true. Its JSON grammar allows any run of whitespace,
//     and a random model, left to choose, spends every token on it; so the
//     requests bias whitespace-only tokens away (wsBias), and the grammar,
//     not the model, makes the call valid. "required" without
//     parallel_tool_calls=false chains calls until max_tokens.
//   - Reasoning: with --reasoning-parser qwen3 vLLM takes everything before
//     </think> as reasoning; a random model never writes </think>, so the
//     reasoning request raises its logit (+10) and samples with a seed that
//     puts it mid-answer: reasoning, then content.
const (
	toolsJSON = `[{"type":"function","function":{"name":"calculator","description":"Evaluate arithmetic","strict":true,` +
		`"parameters":{"type":"object","properties":{"expression":{"type":"string","enum":["17 * 23","2 + 2"]}},` +
		`"required":["expression"],"additionalProperties":false}}}]`
	noThinking = `"chat_template_kwargs":{"enable_thinking":false}`
)

// wsBias is a logit_bias object pushing every whitespace-only token of
// Qwen3's vocabulary down by 100.
func wsBias(t *testing.T) string {
	t.Helper()
	dir, err := Qwen3TokenizerDir()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("{")
	gjson.GetBytes(raw, "model.vocab").ForEach(func(k, v gjson.Result) bool {
		if strings.Trim(k.String(), "ĠĊĉč") == "" && k.String() != "" {
			if b.Len() > 1 {
				b.WriteString(",")
			}
			b.WriteString(`"` + v.String() + `":-100`)
		}
		return true
	})
	b.WriteString("}")
	return b.String()
}

// moreCases are the wire cases of TestWireFidelityMore (also what
// scripts/peers/vllm_fixtures.py sends).
func moreCases(t *testing.T) []wireCase {
	ws := wsBias(t)
	colour := `"messages":[{"role":"user","content":"Name a colour."}]`
	n2 := `{"model":"tiny",` + colour + `,"max_tokens":8,"temperature":0.8,"seed":7,"n":2,` + noThinking
	tool := `{"model":"tiny","messages":[{"role":"user","content":"What is 17 * 23?"}],"tools":` + toolsJSON +
		`,"max_tokens":48,"temperature":0,` + noThinking + `,"logit_bias":` + ws
	named := tool + `,"tool_choice":{"type":"function","function":{"name":"calculator"}}`
	required := tool + `,"tool_choice":"required","parallel_tool_calls":false`
	think := `{"model":"tiny",` + colour + `,"max_tokens":16,"temperature":1,"seed":3,"logit_bias":{"151668":10}`
	comp := `{"model":"tiny","prompt":"The colour of the sky is","max_tokens":6,"temperature":0.8,"seed":5,"n":2`
	const chat, cmpl = "/v1/chat/completions", "/v1/completions"
	return []wireCase{
		{"chat_n2", chat, n2 + `}`, false, false},
		{"chat_n2_stream", chat, n2 + `,"stream":true}`, true, false},
		{"tool_named", chat, named + `}`, false, false},
		{"tool_named_stream", chat, named + `,"stream":true}`, true, false},
		{"tool_required", chat, required + `}`, false, false},
		{"tool_required_stream", chat, required + `,"stream":true}`, true, false},
		{"tool_required_n2_stream", chat, strings.Replace(required, `"temperature":0`, `"temperature":0.8,"seed":3,"n":2`, 1) + `,"stream":true}`, true, false},
		{"reasoning", chat, think + `}`, false, false},
		{"reasoning_stream", chat, think + `,"stream":true}`, true, false},
		{"reasoning_stream_asked", chat, think + `,"stream":true,"logprobs":true,"return_token_ids":true}`, true, true},
		{"completions_n2", cmpl, comp + `}`, false, false},
		{"completions_n2_stream", cmpl, comp + `,"stream":true}`, true, false},
	}
}

// TestWireFidelityMore is TestWireFidelity for n=2, forced tool calls
// (tool_choice named and required) and reasoning: the client gets vLLM's
// own bytes, and hone records vLLM's token ids, logprobs, content,
// reasoning, tool calls and finish reasons. Each case also asserts the
// shape vLLM gave it, so a case that stops exercising what it is named for
// fails instead of passing on plain text.
func TestWireFidelityMore(t *testing.T) {
	v := needVLLM(t)
	tp := newTee(t, v.URL)
	honeURL, rec := startHone(t, tp.url)
	for _, c := range moreCases(t) {
		t.Run(c.name, func(t *testing.T) {
			checkWire(t, v, tp, honeURL, rec, c)
			calls := rec.Calls()
			call := calls[len(calls)-1]
			wantChoices := 1
			if strings.Contains(c.body, `"n":2`) {
				wantChoices = 2
			}
			if len(call.Choices) != wantChoices {
				t.Fatalf("recorded %d choices, want %d", len(call.Choices), wantChoices)
			}
			for _, ch := range call.Choices {
				switch {
				case strings.HasPrefix(c.name, "tool_"):
					if len(ch.ToolCalls) != 1 || ch.ToolCalls[0].Name != "calculator" || ch.Content != "" ||
						!gjson.Valid(ch.ToolCalls[0].Arguments) ||
						!slices.Contains([]string{"17 * 23", "2 + 2"}, gjson.Get(ch.ToolCalls[0].Arguments, "expression").String()) {
						t.Errorf("choice %d: not one valid calculator call: tools %+v content %q", ch.Index, ch.ToolCalls, ch.Content)
					}
				case strings.HasPrefix(c.name, "reasoning"):
					if ch.Reasoning == "" || ch.Content == "" {
						t.Errorf("choice %d: want reasoning and content, got %q and %q", ch.Index, ch.Reasoning, ch.Content)
					}
				default:
					if ch.Content == "" {
						t.Errorf("choice %d: no content", ch.Index)
					}
				}
			}
			if wantChoices == 2 && slices.Equal(call.Choices[0].TokenIDs, call.Choices[1].TokenIDs) && !strings.HasPrefix(c.name, "tool_") {
				t.Errorf("n=2: both choices sampled the same tokens %v", call.Choices[0].TokenIDs)
			}
		})
	}
}

// startHoneOpts is startHone with options changed by edit.
func startHoneOpts(t *testing.T, engineURL string, edit func(*proxy.Options)) (string, *proxy.MemRecorder) {
	o := proxy.DefaultOptions()
	o.Upstream.Engines = []proxy.EngineOptions{{URL: engineURL}}
	edit(&o)
	rec := proxy.NewMemRecorder()
	s, err := proxy.New(o, rec, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String(), rec
}

// TestTokenizeFallback runs hone with engine.token_ids: tokenize (for
// engines without return_token_ids) in front of vLLM: hone asks for
// return_tokens_as_token_ids instead, reads completion ids out of the
// logprob token strings, and gets prompt ids from vLLM's /tokenize after the
// answer. The client still sees vLLM's own bytes, and the record equals
// vLLM's direct answer with return_token_ids (prompt ids exactly, logprobs
// within 1e-5).
func TestTokenizeFallback(t *testing.T) {
	v := needVLLM(t)
	tp := newTee(t, v.URL)
	honeURL, rec := startHoneOpts(t, tp.url, func(o *proxy.Options) { o.Upstream.TokenIDs = "tokenize" })
	chat := `{"model":"tiny","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Name a colour."}],"max_tokens":10,"temperature":0`
	tool := `{"model":"tiny","messages":[{"role":"user","content":"What is 17 * 23?"}],"tools":` + toolsJSON +
		`,"tool_choice":{"type":"function","function":{"name":"calculator"}},"max_tokens":48,"temperature":0,` + noThinking + `,"logit_bias":` + wsBias(t)
	cases := []wireCase{
		{"chat", "/v1/chat/completions", chat + `}`, false, false},
		{"chat_stream", "/v1/chat/completions", chat + `,"stream":true}`, true, false},
		{"chat_no_thinking", "/v1/chat/completions", chat + `,` + noThinking + `}`, false, false},
		{"chat_tools_named", "/v1/chat/completions", tool + `}`, false, false},
		{"completions", "/v1/completions", `{"model":"tiny","prompt":"The colour of the sky is","max_tokens":10,"temperature":0}`, false, false},
		{"completions_stream", "/v1/completions", `{"model":"tiny","prompt":"The colour of the sky is","max_tokens":10,"temperature":0,"stream":true}`, true, false},
	}
	ctx := context.Background()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, m := len(rec.Calls()), tp.count()
			status, _, got, err := Post(ctx, honeURL+c.path, []byte(c.body), nil)
			if err != nil || status != 200 {
				t.Fatalf("through hone: %d %v\n%s", status, err, got)
			}
			call := waitCall(t, rec, n+1)
			up := tp.next(m, c.path)
			if up == nil {
				t.Fatalf("the tee saw no exchange on %s", c.path)
			}
			if gjson.GetBytes(up.request, "return_token_ids").Exists() || !gjson.GetBytes(up.request, "return_tokens_as_token_ids").Bool() {
				t.Errorf("in tokenize mode hone sent vLLM %s", up.request)
			}
			tok := tp.next(m, "/tokenize")
			if tok == nil {
				t.Fatalf("hone did not call vLLM's /tokenize")
			}
			t.Logf("hone's /tokenize request: %.300s", tok.request)
			sameAsDirect(t, v.URL+c.path, c.body, got, c.stream)
			checkParsed(t, call, up.response, c.stream)

			ask := strings.Replace(strings.TrimSuffix(c.body, "}"), `"stream":true`, `"stream":false`, 1)
			if c.path == "/v1/completions" {
				ask += `,"logprobs":1,"return_token_ids":true}`
			} else {
				ask += `,"logprobs":true,"return_token_ids":true}`
			}
			status, _, ref, err := Post(ctx, v.URL+c.path, []byte(ask), nil)
			if err != nil || status != 200 {
				t.Fatalf("direct with token ids: %d %v\n%s", status, err, ref)
			}
			checkRecord(t, "vLLM's direct answer with return_token_ids", call, vllmTokens(ref, false), c.path == "/v1/completions", 1e-5)
			if ids := gjson.GetBytes(tok.response, "tokens").Array(); len(ids) != len(call.PromptIDs)+len(call.Choices[0].PromptIDs) {
				t.Errorf("/tokenize answered %d ids, hone recorded %d", len(ids), len(call.PromptIDs)+len(call.Choices[0].PromptIDs))
			}
		})
	}
}
