package continuity

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

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
// one call of a 20-turn, ~16k-token session in tokens mode:
//   - spliced: the steady state of a session, the call extends the last
//     served turn and the session's previous call (the same conversation
//     without the last answer and question) is known, so only the new
//     messages are normalised and only the conversation from the last
//     user query on is rendered (with the checks against a full rendering
//     that incremental rendering runs, amortised);
//   - spliced-cold: the same call with no previous call known (a restart),
//     every message normalised;
//   - rendered: no served turn found, the whole conversation rendered and
//     tokenized.
func BenchmarkContinuityPlan(b *testing.B) {
	k, err := New(tinyModel, nil, slog.Default())
	if err != nil {
		b.Fatal(err)
	}
	if k.inc.off.Load() {
		b.Fatal("incremental rendering failed its self-check on the tiny model's template")
	}
	body := benchSession()
	req, err := template.ParseRequest(body)
	if err != nil {
		b.Fatal(err)
	}
	full, err := k.conversation("", req)
	if err != nil {
		b.Fatal(err)
	}
	in := req.Input
	in.Messages = template.JoinMessages(full.norm)
	text, _ := k.tmpl.Render(in)
	ids := k.tok.Encode(text)
	// the served turn: the path up to the last answer's end-of-turn token
	// (the rendering's second-to-last one; the question after it is the last)
	var ends []int
	for i, id := range ids {
		if k.isEOS(id) {
			ends = append(ends, i+1)
		}
	}
	path := ids[:ends[len(ends)-2]]
	prevReq := req
	prevReq.Raw = req.Raw[:len(req.Raw)-2] // the previous call: before the last answer and question
	for _, name := range []string{"spliced", "spliced-cold", "rendered"} {
		b.Run(name, func(b *testing.B) {
			session := "bench-" + name
			var prev *convo
			if name == "spliced" {
				if prev, err = k.conversation(session, prevReq); err != nil {
					b.Fatal(err)
				}
			}
			if name != "rendered" {
				k.turns.Add(turnKey(session, full.hashes[len(full.msgs)-2]), &servedTurn{ids: path, ended: true})
			}
			b.ReportMetric(float64(len(ids)), "prompt-tokens")
			for b.Loop() {
				if prev != nil {
					k.convos.Add(session, prev)
				} else {
					k.convos.c.Remove(session)
				}
				p, err := k.plan(session, body, body)
				if err != nil || p.spliced != (name != "rendered") {
					b.Fatalf("plan: %v, spliced %v", err, p != nil && p.spliced)
				}
			}
			if k.inc.off.Load() {
				b.Fatal("an incremental rendering differed from the full one")
			}
		})
	}
}

// calcTool is the calculator tool the sessions offer.
const calcTool = `{"type":"function","function":{"name":"calculator","description":"Evaluate arithmetic",` +
	`"parameters":{"type":"object","properties":{"expression":{"type":"string"},"n":{"type":"integer"}},"required":["expression"]}}}`
