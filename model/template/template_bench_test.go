package template

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/hone-rl/hone/model/chat"
	"github.com/hone-rl/hone/model/tokenizer"
)

// benchSession is a 20-turn tool-using session of about 16k Qwen3 tokens
// (issue 13's continuity target): each turn a user question, an assistant
// turn with reasoning and a tool call, the tool's result and an answer.
func benchSession() []byte {
	words := strings.Fields("the quick brown fox jumps over a lazy dog while agents call tools and read results " +
		"before writing their final answer with care and some numbers like 42 or 3.14 in it")
	text := func(seed, n int) string {
		var sb strings.Builder
		for i := range n {
			if i > 0 {
				sb.WriteByte(' ')
			}
			sb.WriteString(words[(seed*7+i*3)%len(words)])
		}
		return sb.String()
	}
	msgs := []map[string]any{{"role": "system", "content": "You are a careful assistant. " + text(0, 60)}}
	for t := range 20 {
		msgs = append(msgs,
			map[string]any{"role": "user", "content": fmt.Sprintf("Question %d: ", t) + text(t, 150)},
			map[string]any{"role": "assistant", "content": "Let me check.", "reasoning_content": text(t+1, 420),
				"tool_calls": []any{map[string]any{"id": fmt.Sprintf("call%05d", t), "type": "function",
					"function": map[string]any{"name": "search", "arguments": fmt.Sprintf(`{"q": "city %d", "n": %d}`, t, t%5+1)}}}},
			map[string]any{"role": "tool", "tool_call_id": fmt.Sprintf("call%05d", t), "content": text(t+2, 240)},
			map[string]any{"role": "assistant", "content": text(t+3, 180)})
	}
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "search",
		"description": "Search the web.", "parameters": map[string]any{"type": "object",
			"properties": map[string]any{"q": map[string]any{"type": "string"}, "n": map[string]any{"type": "integer"}},
			"required":   []string{"q"}}}}}
	body, err := json.Marshal(map[string]any{"messages": msgs, "tools": tools})
	if err != nil {
		panic(err)
	}
	return body
}

func qwen3Tokenizer(b *testing.B) tokenizer.Tokenizer {
	f, err := os.Open("../tokenizer/testdata/qwen3/tokenizer.json.gz")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		b.Fatal(err)
	}
	tj, err := io.ReadAll(zr)
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := os.ReadFile("../tokenizer/testdata/qwen3/tokenizer_config.json")
	if err != nil {
		b.Fatal(err)
	}
	tok, err := tokenizer.Parse(tj, cfg)
	if err != nil {
		b.Fatal(err)
	}
	return tok
}

// BenchmarkRender20Turns renders the same 20-turn, ~16k-token session with
// Qwen3's real chat template through hone's Jinja renderer (jinja) and
// through model/chat's hand-written Qwen3 renderer (handwritten), both from
// the request body, and the hand-written one from parsed messages
// (handwritten_parsed); tokens/op is the prompt's length in Qwen3 tokens.
func BenchmarkRender20Turns(b *testing.B) {
	body := benchSession()
	m, err := Load("testdata/models/qwen3")
	if err != nil {
		b.Fatal(err)
	}
	want, err := chat.RenderRequest(body, chat.Options{AddGenerationPrompt: true})
	if err != nil {
		b.Fatal(err)
	}
	got, err := m.RenderRequest(body)
	if err != nil {
		b.Fatal(err)
	}
	if got != want {
		b.Fatalf("renderers differ at byte %d", diffAt(got, want))
	}
	tokens := float64(len(qwen3Tokenizer(b).Encode(want)))
	var req struct {
		Messages []json.RawMessage `json:"messages"`
		Tools    []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		b.Fatal(err)
	}
	msgs, err := chat.ParseMessages(req.Messages)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range []struct {
		name string
		fn   func() (string, error)
	}{
		{"jinja", func() (string, error) { return m.RenderRequest(body) }},
		{"handwritten", func() (string, error) { return chat.RenderRequest(body, chat.Options{AddGenerationPrompt: true}) }},
		// The hand-written renderer on already parsed messages: what is
		// left once the body's JSON is decoded.
		{"handwritten_parsed", func() (string, error) {
			return chat.Render(msgs, req.Tools, chat.Options{AddGenerationPrompt: true})
		}},
	} {
		b.Run(r.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := r.fn(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(tokens, "tokens/op")
		})
	}
}

// BenchmarkRenderFamilies renders each golden family's 20-turn agent case
// (long_agent_20_turns) with its own template.
func BenchmarkRenderFamilies(b *testing.B) {
	for _, family := range goldenFamilies(b) {
		g, m := loadGolden(b, family)
		for _, c := range g.Cases {
			if c.Name != "long_agent_20_turns" || c.Prompt == nil {
				continue
			}
			in := c.input()
			b.Run(family, func(b *testing.B) {
				b.ReportAllocs()
				for range b.N {
					if _, err := m.Render(in); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
