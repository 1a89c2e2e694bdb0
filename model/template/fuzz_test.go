package template

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/hone-rl/hone/model/chat"
)

// FuzzRenderRequest feeds arbitrary request bodies (and so arbitrary
// messages JSON) to the loader-built Qwen3 template: no panic, a prompt or
// an error. Where model/chat's hand-written Qwen3 renderer also renders the
// body after hone's vLLM normalisation, both prompts are equal.
func FuzzRenderRequest(f *testing.F) {
	_, bodies, _ := chatGoldenBodies(f)
	for i, b := range bodies {
		if i%4 == 0 {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`))
	f.Add([]byte(`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"f","arguments":"{\"a\":1}"}}]}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":"x"}],"continue_final_message":true,"add_generation_prompt":false}`))
	m := qwen3(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := m.RenderRequest(body)
		if err != nil || duplicateKeys(body) {
			return // repeated keys: Python keeps the last, model/chat all
		}
		in, err := RequestInput(body)
		if err != nil {
			t.Fatalf("rendered, but RequestInput fails: %v", err)
		}
		norm := map[string]any{"messages": in.Messages, "add_generation_prompt": in.AddGenerationPrompt,
			"continue_final_message": in.ContinueFinalMessage}
		if len(in.Tools) > 0 {
			norm["tools"] = in.Tools
		}
		if v, ok := in.Kwargs["enable_thinking"]; ok {
			norm["chat_template_kwargs"] = map[string]any{"enable_thinking": v}
		}
		nb, err := json.Marshal(norm)
		if err != nil {
			t.Fatal(err)
		}
		want, err := chat.RenderRequest(nb, chat.Options{})
		if err != nil {
			return // outside the hand-written renderer's domain
		}
		if got != want {
			t.Fatalf("Jinja and hand-written Qwen3 renderers differ\nbody %s\njinja %q\nchat  %q", body, got, want)
		}
	})
}

// FuzzTemplate compiles and renders arbitrary template text over a fixed
// conversation: no panic and no hang, a prompt or an error.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{
		"{% for m in messages %}{{ m.role }}{% endfor %}",
		"{{ messages[0].content.split()|tojson(indent=2) }}",
		"{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}",
		"{% set ns = namespace(a=1) %}{% set ns.a = ns.a + 1 %}{{ ns.a }}",
		"{{ raise_exception('x') }}", "{% include 'x' %}", "{{ range(100001)|length }}",
		"{% for k, v in messages[0]|items if k != 'role' %}{{ k }}{% endfor %}",
		"{{ strftime_now('%d %b %Y') }}{{ none }}{{ None is none }}",
	} {
		f.Add(s)
	}
	msgs := json.RawMessage(`[{"role":"system","content":"s"},{"role":"user","content":"hi there","x":null},` +
		`{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"f","arguments":{"a":[1,2.5,"x"]}}}]}]`)
	f.Fuzz(func(t *testing.T, src string) {
		tpl, err := Compile(src)
		if err != nil {
			return
		}
		_, _ = tpl.Render(Input{Messages: msgs, Tools: json.RawMessage(`[{"type":"function","function":{"name":"f"}}]`),
			AddGenerationPrompt: true})
	})
}

// duplicateKeys reports whether some JSON object in raw repeats a key.
func duplicateKeys(raw []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	var stack []map[string]bool
	expectKey := func() bool { return len(stack) > 0 && stack[len(stack)-1] != nil }
	var keyNext []bool
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, map[string]bool{})
				keyNext = append(keyNext, true)
				continue
			case '[':
				stack = append(stack, nil)
				keyNext = append(keyNext, false)
				continue
			default:
				stack, keyNext = stack[:len(stack)-1], keyNext[:len(keyNext)-1]
			}
		case string:
			if expectKey() && keyNext[len(keyNext)-1] {
				if stack[len(stack)-1][v] {
					return true
				}
				stack[len(stack)-1][v] = true
				keyNext[len(keyNext)-1] = false
				continue
			}
		}
		if expectKey() {
			keyNext[len(keyNext)-1] = true
		}
	}
}
