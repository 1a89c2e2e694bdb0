package template

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// chatGolden is a case of model/chat's goldens (Qwen3's template rendered
// by @huggingface/jinja, with Python Jinja2's prompt where they differ).
type chatGolden struct {
	Name                string            `json:"name"`
	Messages            []json.RawMessage `json:"messages"`
	Tools               []json.RawMessage `json:"tools"`
	AddGenerationPrompt bool              `json:"add_generation_prompt"`
	EnableThinking      *bool             `json:"enable_thinking"`
	Prompt              string            `json:"prompt"`
	PromptJinja2        string            `json:"prompt_jinja2"`
}

func chatGoldenBodies(t testing.TB) (names []string, bodies [][]byte, want []string) {
	raw, err := os.ReadFile("../chat/testdata/chat_golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var gs []chatGolden
	if err := json.Unmarshal(raw, &gs); err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		body := map[string]any{"messages": g.Messages, "add_generation_prompt": g.AddGenerationPrompt}
		if g.Tools != nil {
			body["tools"] = g.Tools
		}
		if g.EnableThinking != nil {
			body["chat_template_kwargs"] = map[string]any{"enable_thinking": *g.EnableThinking}
		}
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		w := g.Prompt
		if g.PromptJinja2 != "" {
			w = g.PromptJinja2
		}
		names, bodies, want = append(names, g.Name), append(bodies, b), append(want, w)
	}
	return names, bodies, want
}

func qwen3(t testing.TB) *Model {
	m, err := Load("testdata/models/qwen3")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRenderRequestMatchesChatGoldens: Qwen3's real template through hone's
// Jinja renderer gives model/chat's 219 golden prompts.
func TestRenderRequestMatchesChatGoldens(t *testing.T) {
	m := qwen3(t)
	names, bodies, want := chatGoldenBodies(t)
	for i, body := range bodies {
		got, err := m.RenderRequest(body)
		if err != nil {
			t.Errorf("%s: %v", names[i], err)
			continue
		}
		if got != want[i] {
			at := diffAt(got, want[i])
			t.Errorf("%s: differs at %d\n got %q\nwant %q", names[i], at, around(got, at), around(want[i], at))
		}
	}
}

func TestRenderRequestNormalizesLikeVLLM(t *testing.T) {
	m := qwen3(t)
	body := `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"x\":1.50,\"y\":\"é\"}"}},` +
		`{"id":"c2","type":"function","function":{"name":"g","arguments":"not json"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"ok"}]},` +
		`{"role":"assistant","content":"done","reasoning_content":"R","tool_calls":[]}],` +
		`"add_generation_prompt":false,` +
		`"tools":[{"function":{"parameters":{"type":"object"},"name":"f","strict":true},"type":"function"}]}`
	got, err := m.RenderRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`{"type": "function", "function": {"name": "f", "description": null, "parameters": {"type": "object"}, "strict": true}}`,
		"<|im_start|>user\na\nb<|im_end|>",
		"<|im_start|>assistant\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1.5, \"y\": \"é\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call><|im_end|>",
		"<|im_start|>user\n<tool_response>\nok\n</tool_response><|im_end|>\n",
		"<|im_start|>assistant\n<think>\nR\n</think>\n\ndone<|im_end|>\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("prompt lacks %q:\n%s", want, got)
		}
	}
	for _, bad := range []string{
		`not json`, `{}`, `{"messages":[]}`, `{"messages":[{"content":"no role"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`,
		`{"messages":[{"role":"user","content":42}]}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"type":"other","function":{"name":"f"}}]}]}`,
		`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"description":"no name"}}]}`,
		`{"messages":[{"role":"user","content":"x"}],"tools":["not an object"]}`,
	} {
		if _, err := m.RenderRequest([]byte(bad)); err == nil {
			t.Errorf("RenderRequest(%s): want error", bad)
		}
	}
}

// TestDeepNesting: a request, or tool arguments inside one, nested millions
// deep is refused as invalid JSON, not walked until the stack runs out.
func TestDeepNesting(t *testing.T) {
	deep := strings.Repeat("[", 10_000_000)
	if _, err := ParseRequest([]byte(`{"messages":` + deep)); err == nil {
		t.Error("ParseRequest took a body nested 10,000,000 deep")
	}
	if _, err := decodeJSON([]byte(deep)); err == nil {
		t.Error("decodeJSON took arguments nested 10,000,000 deep")
	}
}
