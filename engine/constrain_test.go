package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hone-rl/hone/kernels/cpu"
	"github.com/hone-rl/hone/model"
	"github.com/hone-rl/hone/model/tokenizer"
)

// Tools of the constrained-decoding tests: enums, bounded strings,
// integers, numbers, booleans, null, arrays of objects, anyOf, no
// parameters.
var guideTools = []map[string]any{
	{"type": "function", "function": map[string]any{"name": "get_weather", "description": "Weather for a city",
		"parameters": json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","maxLength":12},` +
			`"unit":{"enum":["celsius","fahrenheit"]},"days":{"type":"integer"}},"required":["city","unit"]}`)}},
	{"type": "function", "function": map[string]any{"name": "search", "description": "Search documents",
		"parameters": json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","minLength":1,"maxLength":16},` +
			`"limit":{"type":["integer","null"]},"filters":{"type":"array","maxItems":2,"items":{"type":"object",` +
			`"properties":{"field":{"enum":["title","body"]},"exact":{"type":"boolean"}},"required":["field","exact"]}},` +
			`"score":{"anyOf":[{"type":"number"},{"const":"auto"}]}},"required":["query","filters"]}`)}},
	{"type": "function", "function": map[string]any{"name": "noop", "description": "Do nothing"}},
}

// smallTools fit the test engine's 1024-token context.
var smallTools = []map[string]any{
	{"type": "function", "function": map[string]any{"name": "get_weather",
		"parameters": json.RawMessage(`{"type":"object","properties":{"city":{"type":"string","maxLength":12},"unit":{"enum":["c","f"]}},"required":["city"]}`)}},
	{"type": "function", "function": map[string]any{"name": "search",
		"parameters": json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","maxLength":16}},"required":["query"]}`)}},
	{"type": "function", "function": map[string]any{"name": "noop"}},
}

// toolSchema returns a tool's parameters ({} -> closed empty object, as
// the decoder writes a tool without parameters).
func toolSchema(tools []map[string]any, name string) (string, bool) {
	for _, t := range tools {
		f := t["function"].(map[string]any)
		if f["name"] == name {
			if p, ok := f["parameters"].(json.RawMessage); ok {
				return string(p), true
			}
			return `{"type":"object","properties":{}}`, true
		}
	}
	return "", false
}

// guideSchema is the json_schema of the response_format tests.
const guideSchema = `{"type":"object","properties":{"name":{"type":"string","maxLength":10},` +
	`"age":{"type":"integer"},"tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":3},` +
	`"pet":{"anyOf":[{"type":"null"},{"$ref":"#/$defs/pet"}]},"ok":{"type":"boolean"}},` +
	`"required":["name","age","tags","pet"],"$defs":{"pet":{"type":"object","properties":{"kind":{"enum":["cat","dog"]},` +
	`"legs":{"type":"integer"}},"required":["kind","legs"]}}}`

var guideMessages = []map[string]any{{"role": "user", "content": "What is the weather in Paris?"}}

// choiceOut is one choice of a chat response, streamed or not.
type choiceOut struct {
	content   any
	reasoning string
	calls     [][2]string // name, arguments
	finish    string
	ids       []int32
}

func (c choiceOut) String() string {
	return fmt.Sprintf("content %v calls %v finish %s (%d tokens)", c.content, c.calls, c.finish, len(c.ids))
}

// chatChoices posts a chat request and returns its choices.
func chatChoices(t testing.TB, url string, req map[string]any) []choiceOut {
	t.Helper()
	req["return_token_ids"] = true
	code, b := post(t, url+"/v1/chat/completions", req)
	if code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	var r chatResponse
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	out := make([]choiceOut, len(r.Choices))
	for _, c := range r.Choices {
		o := choiceOut{content: c.Message.Content, finish: c.FinishReason, ids: c.TokenIDs}
		_ = json.Unmarshal(c.Message.Reasoning, &o.reasoning)
		for _, tc := range c.Message.ToolCalls {
			o.calls = append(o.calls, [2]string{tc.Function.Name, tc.Function.Arguments})
		}
		out[c.Index] = o
	}
	return out
}

// streamChoices streams a chat request and reassembles its choices.
func streamChoices(t testing.TB, url string, req map[string]any) []choiceOut {
	t.Helper()
	req["return_token_ids"], req["stream"] = true, true
	code, b := post(t, url+"/v1/chat/completions", req)
	if code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	n := 1
	if v, ok := req["n"].(int); ok {
		n = v
	}
	out := make([]choiceOut, n)
	content := make([]strings.Builder, n)
	for _, ev := range sseEvents(t, b) {
		if ev == "[DONE]" {
			break
		}
		var c chatChunk
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			t.Fatalf("%v: %s", err, ev)
		}
		for _, ch := range c.Choices {
			o := &out[ch.Index]
			var r string
			if json.Unmarshal(ch.Delta.Reasoning, &r) == nil {
				o.reasoning += r
			}
			if ch.Delta.Content != nil && *ch.Delta.Content != "" {
				content[ch.Index].WriteString(*ch.Delta.Content)
			}
			for _, tc := range ch.Delta.ToolCalls {
				if tc.Index == len(o.calls) {
					o.calls = append(o.calls, [2]string{})
				}
				if tc.Function != nil {
					o.calls[tc.Index][0] += tc.Function.Name
					o.calls[tc.Index][1] += tc.Function.Arguments
				}
			}
			o.ids = append(o.ids, ch.TokenIDs...)
			if ch.FinishReason != nil {
				o.finish = *ch.FinishReason
			}
		}
	}
	for i := range out {
		if content[i].Len() > 0 {
			out[i].content = content[i].String()
		}
	}
	return out
}

// checkCalls holds a choice to be valid tool calls of guideTools (only
// want when set: a named tool_choice, whose finish_reason is "stop" as in
// vLLM; "tool_calls" otherwise).
func checkCalls(c choiceOut, want string) error { return checkToolCalls(c, guideTools, want) }

func checkToolCalls(c choiceOut, tools []map[string]any, want string) error {
	finish := "tool_calls"
	if want != "" {
		finish = "stop"
	}
	if c.finish != finish || len(c.calls) == 0 || (c.content != nil && c.content != "") {
		return fmt.Errorf("not a tool call: %v", c)
	}
	for _, call := range c.calls {
		schema, ok := toolSchema(tools, call[0])
		if !ok || (want != "" && call[0] != want) {
			return fmt.Errorf("tool %q (want %q)", call[0], want)
		}
		if err := checkSchema(schema, call[1]); err != nil {
			return fmt.Errorf("tool %s: %v", call[0], err)
		}
	}
	return nil
}

var guideTinyOnce struct {
	sync.Once
	dir string
	err error
}

// newGuideTinyEngine serves a random tiny model (character tokenizer,
// 2048 positions: the tool list alone is ~1300 prompt tokens), written once
// per test binary. With prefixCache the prompt's KV cache is reused across
// requests (faster, but a reused prefix can move logits in the last bits,
// so equal seeds need not give equal outputs).
func newGuideTinyEngine(t testing.TB, prefixCache bool) *httptest.Server {
	t.Helper()
	guideTinyOnce.Do(func() { guideTinyOnce.dir, guideTinyOnce.err = writeGuideModel(filepath.Join(tempRoot, "guide-tiny")) })
	if guideTinyOnce.err != nil {
		t.Fatal(guideTinyOnce.err)
	}
	opts := DefaultOptions()
	opts.ModelDir, opts.ServedModelName, opts.Threads = guideTinyOnce.dir, "tiny", 2
	if prefixCache {
		opts.PrefixCacheMiB = 64
	}
	e, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e.Handler())
	t.Cleanup(func() { srv.Close(); e.Close() })
	return srv
}

// writeGuideModel writes the tiny preset (2048 positions) with random
// weights, as modeltest.Tiny does.
func writeGuideModel(dir string) (string, error) {
	if err := tokenizer.WriteCharTokenizer(dir, tokenizer.DefaultChars); err != nil {
		return "", err
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return "", err
	}
	cfg, err := model.Preset("tiny")
	if err != nil {
		return "", err
	}
	cfg.VocabSize = tok.VocabSize()
	end, _ := tok.TokenID("<|im_end|>")
	cfg.EOSTokenIDs = []int32{end}
	m, err := model.New(cfg, cpu.New(2), 3)
	if err != nil {
		return "", err
	}
	return dir, m.Save(dir)
}

// TestForcedToolCallsTinyModel is the acceptance test: with tool_choice
// "required", 100 sampled calls (temperature 1, 20 seeds x n=5) of the
// random tiny model all parse as tool calls whose arguments validate
// against the tool's schema; a named function always yields that function;
// with parallel calls allowed, every output is still valid calls.
func TestForcedToolCallsTinyModel(t *testing.T) {
	srv := newGuideTinyEngine(t, true)
	start := time.Now()
	valid, tokens := 0, 0
	for seed := range 20 {
		req := map[string]any{"messages": guideMessages, "tools": guideTools, "tool_choice": "required",
			"parallel_tool_calls": false, "temperature": 1, "seed": seed, "n": 5, "max_tokens": 400}
		for i, c := range chatChoices(t, srv.URL, req) {
			tokens += len(c.ids)
			if err := checkCalls(c, ""); err != nil {
				t.Errorf("seed %d choice %d: %v", seed, i, err)
				continue
			}
			if len(c.calls) != 1 {
				t.Errorf("seed %d choice %d: %d calls with parallel_tool_calls false", seed, i, len(c.calls))
				continue
			}
			valid++
		}
	}
	t.Logf("required: %d/100 valid tool calls, %d tokens in %v", valid, tokens, time.Since(start).Round(time.Millisecond))

	named := map[string]any{"type": "function", "function": map[string]any{"name": "search"}}
	for seed := range 4 {
		req := map[string]any{"messages": guideMessages, "tools": guideTools, "tool_choice": named,
			"temperature": 1, "seed": 100 + seed, "n": 5, "max_tokens": 400}
		for i, c := range chatChoices(t, srv.URL, req) {
			if err := checkCalls(c, "search"); err != nil {
				t.Errorf("named, seed %d choice %d: %v", seed, i, err)
			}
			if len(c.calls) != 1 {
				t.Errorf("named, seed %d choice %d: %d calls", seed, i, len(c.calls))
			}
		}
	}

	// Parallel calls (the default): one or more valid calls unless
	// max_tokens cuts the output.
	calls, cut := 0, 0
	for seed := range 4 {
		req := map[string]any{"messages": guideMessages, "tools": guideTools, "tool_choice": "required",
			"temperature": 1, "seed": 200 + seed, "n": 5, "max_tokens": 700}
		for i, c := range chatChoices(t, srv.URL, req) {
			if c.finish == "length" {
				cut++
				continue
			}
			if err := checkCalls(c, ""); err != nil {
				t.Errorf("parallel, seed %d choice %d: %v", seed, i, err)
			}
			calls += len(c.calls)
		}
	}
	t.Logf("parallel: %d calls in %d outputs (%d cut by max_tokens)", calls, 20-cut, cut)
}

// TestJSONSchemaTinyModel: response_format json_schema outputs of the
// random tiny model all validate; json_object outputs are JSON objects.
func TestJSONSchemaTinyModel(t *testing.T) {
	srv := newGuideTinyEngine(t, true)
	format := map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "person", "schema": json.RawMessage(guideSchema)}}
	valid := 0
	for seed := range 20 {
		req := map[string]any{"messages": guideMessages, "response_format": format, "temperature": 1, "seed": seed, "n": 5,
			"max_tokens": 400}
		for i, c := range chatChoices(t, srv.URL, req) {
			s, _ := c.content.(string)
			if c.finish != "stop" || len(c.calls) > 0 {
				t.Errorf("seed %d choice %d: %v", seed, i, c)
				continue
			}
			if err := checkSchema(guideSchema, s); err != nil {
				t.Errorf("seed %d choice %d: %v", seed, i, err)
				continue
			}
			valid++
		}
	}
	t.Logf("json_schema: %d/100 valid", valid)
}

// TestGuideStreamAgrees: streamed and non-streamed forced calls and
// json_schema answers with the same seed are the same tokens and, unless
// max_tokens cut them, the same parsed calls.
func TestGuideStreamAgrees(t *testing.T) {
	srv := newGuideTinyEngine(t, false)
	format := map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "p", "schema": json.RawMessage(guideSchema)}}
	whole := 0
	for seed := range 9 {
		req := func() map[string]any {
			r := map[string]any{"messages": guideMessages, "tools": guideTools, "tool_choice": "required",
				"temperature": 1, "seed": 300 + seed, "n": 2, "max_tokens": 600}
			switch seed % 3 {
			case 1:
				r["parallel_tool_calls"] = false
			case 2:
				delete(r, "tool_choice")
				r["response_format"] = format
			}
			return r
		}
		plain, streamed := chatChoices(t, srv.URL, req()), streamChoices(t, srv.URL, req())
		for i := range plain {
			p, s := plain[i], streamed[i]
			// A call cut by max_tokens parses differently streamed (the calls
			// before it were sent, finish_reason tool_calls) and not (all
			// content, length), as in vLLM: then only the tokens must agree.
			differ := p.finish != s.finish || fmt.Sprint(p.calls) != fmt.Sprint(s.calls) || fmt.Sprint(orEmpty(p.content)) != fmt.Sprint(orEmpty(s.content))
			if !slices.Equal(p.ids, s.ids) || (differ && p.finish != "length") {
				t.Fatalf("seed %d choice %d:\n plain    %v %v\n streamed %v %v", seed, i, p, p.ids, s, s.ids)
			}
			if p.finish == "length" {
				continue
			}
			whole++
			if seed%3 != 2 {
				if err := checkCalls(p, ""); err != nil {
					t.Fatalf("seed %d choice %d: %v", seed, i, err)
				}
			} else if err := checkSchema(guideSchema, p.content.(string)); err != nil {
				t.Fatalf("seed %d choice %d: %v", seed, i, err)
			}
		}
	}
	if whole < 12 {
		t.Fatalf("only %d of 18 outputs complete", whole)
	}
}

// TestGuideRequests: what is refused, and what the constraint does to a
// model scripted to write something else.
func TestGuideRequests(t *testing.T) {
	e, srv := newTestEngine(t, DefaultOptions())
	bad := []struct {
		name string
		req  map[string]any
		msg  string
	}{
		{"required without tools", map[string]any{"tool_choice": "required"}, "`tools` must be set"},
		{"named without tools", map[string]any{"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "x"}}}, "`tools` must be set"},
		{"unknown named tool", map[string]any{"tools": guideTools, "tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "x"}}}, "does not match any"},
		{"bad tool_choice", map[string]any{"tools": guideTools, "tool_choice": "always"}, "Invalid value for `tool_choice`"},
		{"tool_choice without function", map[string]any{"tools": guideTools, "tool_choice": map[string]any{"type": "function"}}, "Invalid value for `function`"},
		{"tool_choice without name", map[string]any{"tools": guideTools, "tool_choice": map[string]any{"type": "function", "function": map[string]any{}}}, "Expected field `name`"},
		{"bad tool schema", map[string]any{"tools": []map[string]any{{"type": "function", "function": map[string]any{"name": "f", "parameters": map[string]any{"type": "strin"}}}}, "tool_choice": "required"}, "unsupported type"},
		{"bad format type", map[string]any{"response_format": map[string]any{"type": "yaml"}}, "response_format type"},
		{"json_schema without json_schema", map[string]any{"response_format": map[string]any{"type": "json_schema"}}, "json_schema field"},
		{"bad json_schema", map[string]any{"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "schema": map[string]any{"$ref": "#/nope"}}}}, "not found"},
		{"structural_tag", map[string]any{"response_format": map[string]any{"type": "structural_tag"}}, "not supported"},
	}
	for _, c := range bad {
		c.req["messages"] = guideMessages
		code, b := post(t, srv.URL+"/v1/chat/completions", c.req)
		if code != 400 || !strings.Contains(string(b), c.msg) {
			t.Errorf("%s: %d %s, want 400 with %q", c.name, code, b, c.msg)
		}
	}
	// response_format also applies to /v1/completions.
	r := complete(t, srv.URL, map[string]any{"prompt": "x", "max_tokens": 500, "seed": 1,
		"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "p", "schema": json.RawMessage(guideSchema)}}})
	if err := checkSchema(guideSchema, r.Choices[0].Text); err != nil || r.Choices[0].FinishReason != "stop" {
		t.Errorf("completions: %q %v", r.Choices[0].Text, err)
	}

	// A model set on calling get_weather is held to the named function, and
	// to a schema when only a format is asked for.
	scripted(t, e, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris</tool_call>\", \"unit\": \"c\"}}\n</tool_call>")
	named := map[string]any{"type": "function", "function": map[string]any{"name": "search"}}
	got := chatChoices(t, srv.URL, map[string]any{"messages": guideMessages, "tools": smallTools, "tool_choice": named,
		"temperature": 0, "max_tokens": 120})
	if err := checkToolCalls(got[0], smallTools, "search"); err != nil {
		t.Errorf("named: %v", err)
	}
	got = chatChoices(t, srv.URL, map[string]any{"messages": guideMessages, "tools": smallTools, "tool_choice": "required",
		"parallel_tool_calls": false, "temperature": 0, "max_tokens": 120})
	if err := checkToolCalls(got[0], smallTools, ""); err != nil {
		t.Errorf("required: %v", err)
	} else if got[0].calls[0][0] != "get_weather" || strings.Contains(got[0].calls[0][1], "</tool_call>") {
		// The scripted call is followed up to the end tag inside the string.
		t.Errorf("required: %v", got[0].calls)
	}
	// tool_choice auto leaves the scripted text alone: the hermes parser
	// cuts the call at the end tag inside the string, so it is content.
	got = chatChoices(t, srv.URL, map[string]any{"messages": guideMessages, "tools": smallTools, "temperature": 0, "max_tokens": 120})
	if got[0].finish != "stop" || len(got[0].calls) != 0 {
		t.Errorf("auto: %v", got[0])
	}
	// tool_choice none: no tool calls are parsed, whatever the output.
	scripted(t, e, "<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>")
	got = chatChoices(t, srv.URL, map[string]any{"messages": guideMessages, "tools": smallTools, "tool_choice": "none", "temperature": 0, "max_tokens": 120})
	if got[0].finish != "stop" || len(got[0].calls) != 0 {
		t.Errorf("none: %v", got[0])
	}
	// The hermes parser option off: forced calls are still parsed.
	opts := DefaultOptions()
	opts.ToolCallParser = "none"
	_, srv2 := newTestEngine(t, opts)
	got = chatChoices(t, srv2.URL, map[string]any{"messages": guideMessages, "tools": smallTools, "tool_choice": named, "seed": 4, "max_tokens": 120})
	if err := checkToolCalls(got[0], smallTools, "search"); err != nil {
		t.Errorf("parser none: %v", err)
	}
}

// TestGuideSampling drives the guided sampler directly with random logits
// under each kind of sampling: every output is complete and valid, and
// reported logprobs are normalised over the allowed tokens.
func TestGuideSampling(t *testing.T) {
	e, _ := newTestEngine(t, DefaultOptions())
	g, apiErr := e.formatGuide(json.RawMessage(`{"type":"json_schema","json_schema":{"schema":`+guideSchema+`}}`), false)
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	end, _ := e.tok.TokenID("<|im_end|>")
	params := []samplingParams{
		{Temperature: 1, TopP: 1},
		{Temperature: 0, TopP: 1},
		{Temperature: 0.7, TopP: 0.9, TopK: 20, MinP: 0.01},
		{Temperature: 1, TopP: 1, Logprobs: true, TopLogprobs: 3},
	}
	for pi, p := range params {
		for seed := range 10 {
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(pi)))
			gs := g.newState(map[int32]bool{end: true}, e.eos)
			p.Guide = gs
			var out []byte
			done := false
			for step := 0; step < 2000 && !done; step++ {
				logits := make([]float32, e.vocab)
				for i := range logits {
					logits[i] = float32(rng.NormFloat64() * 3)
				}
				id, lp, top := sample(logits, logits, p, rng)
				if id == end {
					done = true
					break
				}
				out = append(out, e.tok.DecodeBytes([]int32{id})...)
				if p.Logprobs {
					// The masked distribution: lp is log-softmax over the allowed.
					if lp > 0 || math.IsNaN(float64(lp)) || len(top) == 0 || top[0].Logprob < lp {
						t.Fatalf("logprob %v top %v", lp, top)
					}
				}
			}
			if !done {
				t.Fatalf("params %d seed %d: no end after %q", pi, seed, out)
			}
			if err := checkSchema(guideSchema, string(out)); err != nil {
				t.Fatalf("params %d seed %d: %v", pi, seed, err)
			}
		}
	}
}

// TestGuideMaskedLogprobs: the reported logprob is the sampled token's
// share of the allowed tokens' probability.
func TestGuideMaskedLogprobs(t *testing.T) {
	e, _ := newTestEngine(t, DefaultOptions())
	g, _ := e.formatGuide(json.RawMessage(`{"type":"json_schema","json_schema":{"schema":{"enum":["ab","x"]}}}`), false)
	gs := g.newState(nil, e.eos)
	logits := make([]float32, e.vocab)
	quote, _ := e.tok.TokenID(`"`)
	logits[quote] = 2
	id, lp, _ := sample(logits, logits, samplingParams{Temperature: 1, TopP: 1, Logprobs: true, Guide: gs}, rand.New(rand.NewPCG(1, 1)))
	// Allowed: '"' (logit 2) and its byte-fallback twin (logit 0).
	want := 2 - math.Log(math.Exp(2)+1)
	if id != quote || math.Abs(float64(lp)-want) > 1e-5 {
		t.Fatalf("id %d lp %v, want %d %v", id, lp, quote, want)
	}
}

// TestGuideMinTokens: min_tokens masks EOS, but a finished output needs it:
// the constraint wins and the sequence ends.
func TestGuideMinTokens(t *testing.T) {
	_, srv := newTestEngine(t, DefaultOptions())
	got := chatChoices(t, srv.URL, map[string]any{"messages": guideMessages, "min_tokens": 50, "max_tokens": 100, "seed": 1,
		"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "schema": map[string]any{"const": "ok"}}}})
	if got[0].content != `"ok"` || got[0].finish != "stop" {
		t.Fatalf("%v", got[0])
	}
}

// TestGuideOpenThink: when the prompt leaves <think> open, the reasoning
// runs free up to </think> and the constraint holds after it.
func TestGuideOpenThink(t *testing.T) {
	e, srv := newTestEngine(t, DefaultOptions())
	req := func() map[string]any {
		return map[string]any{"messages": []map[string]any{{"role": "user", "content": "ok?"}, {"role": "assistant", "content": "<think>\nhmm, "}},
			"continue_final_message": true, "add_generation_prompt": false, "temperature": 0, "max_tokens": 60,
			"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "schema": map[string]any{"const": "ok"}}}}
	}
	scripted(t, e, "so it is ok</think>\n\n\"ok\"")
	for _, stream := range []bool{false, true} {
		var got choiceOut
		if stream {
			got = streamChoices(t, srv.URL, req())[0]
		} else {
			got = chatChoices(t, srv.URL, req())[0]
		}
		if got.reasoning != "so it is ok" || got.content != "\n\n\"ok\"" || got.finish != "stop" {
			t.Fatalf("stream %v: %v reasoning %q", stream, got, got.reasoning)
		}
	}
	// A model that skips the end tag is held to it: the answer is never
	// read as reasoning.
	scripted(t, e, "\"ok\"")
	got := chatChoices(t, srv.URL, req())[0]
	if s, _ := got.content.(string); got.finish == "stop" && !strings.HasSuffix(s, `"ok"`) {
		t.Fatalf("%v reasoning %q", got, got.reasoning)
	}
}

// orEmpty is content with no content as "": a stream cannot tell a forced
// call's content "" (vLLM's, not streamed) from none.
func orEmpty(content any) any {
	if content == nil {
		return ""
	}
	return content
}
