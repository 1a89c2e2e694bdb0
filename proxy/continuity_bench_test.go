package proxy

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/model/template"
)

// benchSession is a 20-turn tool-using session of about 16k characters
// (tokens, with the tiny model's character tokenizer): each turn a user
// question, an assistant tool call, its result and an answer.
func benchSession() []byte {
	var msgs []any
	msgs = append(msgs, map[string]any{"role": "system", "content": "You are a calculator agent."})
	filler := strings.Repeat("word ", 70)
	for i := 0; i < 20; i++ {
		msgs = append(msgs,
			map[string]any{"role": "user", "content": "Question " + filler},
			map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": "call_1", "type": "function",
				"function": map[string]any{"name": "calculator", "arguments": `{"expression":"17 * 23"}`}}}},
			map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "391"},
			map[string]any{"role": "assistant", "content": "Answer " + filler})
	}
	msgs = append(msgs, map[string]any{"role": "user", "content": "Next?"})
	b, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs, "tools": []json.RawMessage{json.RawMessage(calcTool)},
		"max_tokens": 16})
	return b
}

// BenchmarkContinuityPlan is the time hone spends rendering and tokenizing
// one call of a 20-turn, ~16k-token session in tokens mode: with the last
// served turn found (two renderings and the tokens after the turn), and
// without (one rendering, the whole prompt tokenized).
func BenchmarkContinuityPlan(b *testing.B) {
	k, err := newContinuity(tinyModel, nil, slog.Default())
	if err != nil {
		b.Fatal(err)
	}
	s := &Server{cont: k}
	body := benchSession()
	in, err := template.RequestInput(body)
	if err != nil {
		b.Fatal(err)
	}
	msgs, _ := parseMessages(in)
	hs := prefixHashes(seedHash(in), msgs)
	text, _ := k.tmpl.Render(in)
	ids := k.tok.Encode(text)
	for _, found := range []bool{true, false} {
		name := map[bool]string{true: "spliced", false: "rendered"}[found]
		b.Run(name, func(b *testing.B) {
			session := "bench-" + name
			if found {
				k.turns.Add(turnKey(session, hs[len(msgs)-2]), &servedTurn{ids: ids[:len(ids)-40], ended: true})
			}
			c := &call{verdict: capture.Verdict{Session: session, Capture: true}}
			b.ReportMetric(float64(len(ids)), "prompt-tokens")
			for b.Loop() {
				p, err := s.planCall(c, body, body)
				if err != nil || p.spliced != found {
					b.Fatalf("plan: %v, spliced %v", err, p != nil && p.spliced)
				}
			}
		})
	}
}
