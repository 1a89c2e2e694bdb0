package engine

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/hone-rl/hone/engine/internal/grammar"
)

// hermesTag is the structural tag for hermes calls of tools with the
// given parameters: the newline layout only, "\n" between calls, every
// tool held to its schema and "</tool_call>" kept out of its strings: the
// language this engine's chat path forces for tool_choice required or a
// named function.
func hermesTagFor(tools map[string]json.RawMessage, single bool) map[string]any {
	var tags []any
	for name, params := range tools {
		tags = append(tags, map[string]any{"type": "tag", "begin": "<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": ",
			"content": map[string]any{"type": "json_schema", "json_schema": params, "style": "json", "excludes": []string{"</tool_call>"}},
			"end":     "}\n</tool_call>"})
	}
	return map[string]any{"type": "structural_tag", "format": map[string]any{"type": "tags_with_separator", "tags": tags,
		"separator": "\n", "at_least_one": true, "stop_after_first": single}}
}

type idsChoice struct {
	Text         string  `json:"text"`
	TokenIDs     []int32 `json:"token_ids"`
	FinishReason string  `json:"finish_reason"`
}

// TestCompletionsStructuralTag: a forced tool call through /v1/completions
// with the structural tag equivalent to the chat path's constraint samples
// the very tokens the chat path samples for the same prompt and seed
// (named, and required with parallel_tool_calls false), so token
// continuity mode changes nothing the engine draws. vLLM's own hermes tag
// (both layouts, no separator, schema true), given as a string as vLLM
// takes it, gives hermes calls; other formats are refused.
func TestCompletionsStructuralTag(t *testing.T) {
	srv := newGuideTinyEngine(t, true)
	params := json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"celsius":{"type":"integer"}},"required":["city","celsius"]}`)
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "weather", "parameters": params}}}
	cases := []struct {
		name       string
		toolChoice any
		parallel   bool
	}{
		{"named", map[string]any{"type": "function", "function": map[string]any{"name": "weather"}}, true},
		{"required single", "required", false},
		{"required", "required", true},
	}
	for _, c := range cases {
		for seed := range 3 {
			chatReq := map[string]any{"model": "tiny", "messages": []any{map[string]any{"role": "user", "content": "weather?"}},
				"tools": tools, "tool_choice": c.toolChoice, "parallel_tool_calls": c.parallel, "temperature": 1, "seed": seed,
				"max_tokens": 200, "return_token_ids": true}
			code, body := post(t, srv.URL+"/v1/chat/completions", chatReq)
			var chat struct {
				PromptTokenIDs []int32     `json:"prompt_token_ids"`
				Choices        []idsChoice `json:"choices"`
			}
			if code != 200 || json.Unmarshal(body, &chat) != nil || len(chat.Choices) != 1 {
				t.Fatalf("%s: chat: %d %s", c.name, code, body)
			}
			single := c.name != "required"
			tag := hermesTagFor(map[string]json.RawMessage{"weather": params}, single)
			comp := map[string]any{"model": "tiny", "prompt": chat.PromptTokenIDs, "temperature": 1, "seed": seed, "max_tokens": 200,
				"return_token_ids": true, "structured_outputs": map[string]any{"structural_tag": tag}}
			code, body = post(t, srv.URL+"/v1/completions", comp)
			var out struct {
				Choices []idsChoice `json:"choices"`
			}
			if code != 200 || json.Unmarshal(body, &out) != nil || len(out.Choices) != 1 {
				t.Fatalf("%s: completions: %d %s", c.name, code, body)
			}
			got, want := out.Choices[0], chat.Choices[0]
			if !slices.Equal(got.TokenIDs, want.TokenIDs) {
				t.Errorf("%s seed %d: completions sampled %v (%q), chat %v", c.name, seed, got.TokenIDs, got.Text, want.TokenIDs)
			}
			if got.FinishReason == "stop" && (!strings.HasPrefix(got.Text, "<tool_call>\n{\"name\": \"weather\", \"arguments\": {") ||
				!strings.HasSuffix(got.Text, "}\n</tool_call>")) {
				t.Errorf("%s seed %d: not a hermes call: %q", c.name, seed, got.Text)
			}
		}
	}

	// vLLM's hermes tag for a tool not strict, as a JSON string.
	var vtags []any
	for _, f := range [][2]string{{"<tool_call>\n{\"name\": \"", "}\n</tool_call>"}, {"<tool_call>{\"name\": \"", "}</tool_call>"}} {
		vtags = append(vtags, map[string]any{"type": "tag", "begin": f[0] + `weather", "arguments": `,
			"content": map[string]any{"type": "json_schema", "json_schema": true, "style": "json", "any_order": false,
				"max_whitespace_cnt": nil, "excludes": []string{}}, "end": f[1]})
	}
	vtag, _ := json.Marshal(map[string]any{"type": "structural_tag", "format": map[string]any{"type": "tags_with_separator",
		"tags": vtags, "separator": "", "at_least_one": true, "stop_after_first": true}})
	comp := map[string]any{"model": "tiny", "prompt": []int{1, 2, 3}, "temperature": 1, "seed": 3, "n": 4, "max_tokens": 300,
		"structured_outputs": map[string]any{"structural_tag": string(vtag)}}
	code, body := post(t, srv.URL+"/v1/completions", comp)
	var out struct {
		Choices []idsChoice `json:"choices"`
	}
	if code != 200 || json.Unmarshal(body, &out) != nil || len(out.Choices) != 4 {
		t.Fatalf("vLLM's tag: %d %s", code, body)
	}
	for i, ch := range out.Choices {
		if ch.FinishReason == "stop" && !strings.HasPrefix(ch.Text, "<tool_call>") {
			t.Errorf("vLLM's tag, choice %d: %q", i, ch.Text)
		}
	}

	for name, tag := range map[string]any{
		"triggered":  map[string]any{"type": "structural_tag", "format": map[string]any{"type": "triggered_tags", "triggers": []string{"<tool_call>"}}},
		"not a tag":  map[string]any{"type": "json"},
		"no tags":    map[string]any{"type": "structural_tag", "format": map[string]any{"type": "tags_with_separator"}},
		"xml style":  hermesStyle("qwen_xml"),
		"not json":   "{",
		"bad schema": hermesSchema(`{"type":"strin"}`),
		"excludes":   hermesExcludes("a\"b"),
		"mixed":      hermesMixedExcludes(),
	} {
		req := map[string]any{"model": "tiny", "prompt": []int{1, 2}, "structured_outputs": map[string]any{"structural_tag": tag}, "max_tokens": 5}
		code, body := post(t, srv.URL+"/v1/completions", req)
		if code != 400 || !strings.Contains(string(body), "structural_tag") {
			t.Errorf("%s: %d %s", name, code, body)
		}
	}
}

func hermesStyle(style string) map[string]any {
	tag := hermesTagFor(map[string]json.RawMessage{"f": json.RawMessage(`true`)}, true)
	tag["format"].(map[string]any)["tags"].([]any)[0].(map[string]any)["content"].(map[string]any)["style"] = style
	return tag
}

func hermesSchema(schema string) map[string]any {
	return hermesTagFor(map[string]json.RawMessage{"f": json.RawMessage(schema)}, true)
}

func hermesExcludes(ex string) map[string]any {
	tag := hermesTagFor(map[string]json.RawMessage{"f": json.RawMessage(`true`)}, true)
	tag["format"].(map[string]any)["tags"].([]any)[0].(map[string]any)["content"].(map[string]any)["excludes"] = []string{ex}
	return tag
}

// FuzzStructTag: any structured_outputs.structural_tag value is refused
// with an error or compiles; nothing panics.
func FuzzStructTag(f *testing.F) {
	for _, tag := range []any{hermesTagFor(map[string]json.RawMessage{"w": json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}}}`)}, false),
		hermesStyle("json"), hermesExcludes("</x>")} {
		b, _ := json.Marshal(tag)
		f.Add(b)
		s, _ := json.Marshal(string(b))
		f.Add(s)
	}
	f.Add([]byte(`{"type":"structural_tag","format":{"type":"tags_with_separator","tags":[{"type":"tag","begin":"","content":{"type":"json_schema","json_schema":{}},"end":""}]}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		tag, forbid, err := parseStructTag(raw)
		if err != nil {
			return
		}
		b := grammar.NewBuilder(grammar.Options{MaxDepth: guideDepth, Forbid: forbid})
		if fr, err := tag.build(b); err == nil {
			_, _ = b.Compile(fr)
		}
	})
}

// hermesMixedExcludes is a tag whose second tool excludes nothing while the
// first excludes "</tool_call>": one grammar-wide exclusion cannot say it.
func hermesMixedExcludes() map[string]any {
	tag := hermesTagFor(map[string]json.RawMessage{"f": json.RawMessage(`true`), "g": json.RawMessage(`true`)}, true)
	tag["format"].(map[string]any)["tags"].([]any)[1].(map[string]any)["content"].(map[string]any)["excludes"] = []string{}
	return tag
}
