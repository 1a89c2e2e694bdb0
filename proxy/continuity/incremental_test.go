package continuity

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/hone-rl/hone/model/template"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// templateContinuity is continuity over one of model/template's test
// templates, with the given end-of-turn texts (no tokenizer: the tests
// compare rendered text).
func templateContinuity(t *testing.T, family string, eos ...string) *Continuity {
	t.Helper()
	clock := template.WithClock(func() time.Time { return time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC) })
	tm, err := template.Load("../../model/template/testdata/models/"+family, clock)
	if family == "numbered" {
		tm, err = template.Parse([]byte(`{"chat_template": "{% for m in messages %}<|im_start|>{{ loop.index }} {{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"}`), nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	k := &Continuity{tmpl: tm, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for i, e := range eos {
		k.eos = append(k.eos, eosToken{id: int32(i + 1), text: e})
	}
	if k.convos, err = newSizedCache(continuityConvos, continuityConvoBytes, (*convo).bytes); err != nil {
		t.Fatal(err)
	}
	k.inc.init(k)
	return k
}

// TestIncrementalSelfCheck: templates that render each message from its
// neighbours, the system message and the last user query pass the
// self-check (incremental rendering on; Mistral's writes the tools and the
// system message into the last user message, which the short conversation
// keeps); a template that numbers the turns fails it, and every call then
// renders the whole conversation.
func TestIncrementalSelfCheck(t *testing.T) {
	for _, c := range []struct {
		family string
		eos    []string
		on     bool
	}{
		{"qwen3", []string{"<|im_end|>"}, true},
		{"qwen2.5", []string{"<|im_end|>"}, true},
		{"llama3.1", []string{"<|eot_id|>", "<|eom_id|>"}, true},
		{"llama3.2", []string{"<|eot_id|>", "<|eom_id|>"}, true},
		{"hermes2pro-named", []string{"<|im_end|>"}, true},
		{"mistral-nemo", []string{"</s>"}, true},
		{"numbered", []string{"<|im_end|>"}, false},
	} {
		t.Run(c.family, func(t *testing.T) {
			k := templateContinuity(t, c.family, c.eos...)
			if on := !k.inc.off.Load(); on != c.on {
				t.Errorf("incremental rendering on: %v, want %v (%v)", on, c.on, k.selfCheck())
			}
		})
	}
}

// TestIncrementalEqualsFull renders random tool-using conversations with
// reasoning both ways, for every served assistant turn, with the Qwen3,
// Qwen2.5 and Llama 3.1 templates: the text after the turn is the same.
func TestIncrementalEqualsFull(t *testing.T) {
	for _, c := range []struct {
		family   string
		eos      []string
		parallel int // tool calls per assistant turn, at most
	}{
		{"qwen3", []string{"<|im_end|>"}, 2},
		{"qwen2.5", []string{"<|im_end|>"}, 2},
		{"llama3.1", []string{"<|eot_id|>", "<|eom_id|>"}, 1},
	} {
		t.Run(c.family, func(t *testing.T) {
			k := templateContinuity(t, c.family, c.eos...)
			rng := rand.New(rand.NewPCG(7, 8))
			for trial := 0; trial < 40; trial++ {
				req := template.Request{Input: template.Input{AddGenerationPrompt: true, Tools: json.RawMessage(selfCheckTools)},
					Raw: randomConversation(rng, c.parallel)}
				conv, err := k.conversation("", req)
				if err != nil {
					t.Fatal(err)
				}
				for hit, m := range conv.msgs[:len(conv.msgs)-1] {
					if m.Role != "assistant" {
						continue
					}
					head := req.Input
					head.Messages, head.AddGenerationPrompt = template.JoinMessages(conv.norm[:hit+1]), false
					text, err := k.tmpl.Render(head)
					if err != nil {
						t.Fatal(err)
					}
					turn := &servedTurn{ids: make([]int32, k.countEOS(text)), ended: true}
					for i := range turn.ids {
						turn.ids[i] = 1
					}
					full, _, ok := k.tailFull(req.Input, conv.norm, turn)
					tail, _, err := k.tailIncremental(req.Input, conv, hit)
					if err != nil || !ok || tail != full {
						t.Fatalf("trial %d, turn %d of %d: incremental %q (%v), full %q", trial, hit, len(conv.msgs), tail, err, full)
					}
				}
			}
		})
	}
}

// randomConversation is a system prompt and 1-5 user turns, each answered
// by 0-3 tool rounds (1 to parallel calls, their results) and an answer, with or
// without reasoning, ending with a user message.
func randomConversation(rng *rand.Rand, parallel int) []json.RawMessage {
	var msgs []map[string]any
	if rng.IntN(2) == 0 {
		msgs = append(msgs, map[string]any{"role": "system", "content": "You are a calculator agent."})
	}
	call := 0
	for u := 0; u < 1+rng.IntN(5); u++ {
		msgs = append(msgs, map[string]any{"role": "user", "content": fmt.Sprintf("Question %d?", u)})
		for r := rng.IntN(4); r > 0; r-- {
			var calls []any
			n := 1 + rng.IntN(parallel)
			for i := 0; i < n; i++ {
				call++
				calls = append(calls, map[string]any{"id": fmt.Sprint("c", call), "type": "function", "function": map[string]any{
					"name": "calculator", "arguments": fmt.Sprintf(`{"expression": "%d * 2"}`, call)}})
			}
			m := map[string]any{"role": "assistant", "content": "", "tool_calls": calls}
			if rng.IntN(2) == 0 {
				m["reasoning_content"] = "Call the tool."
			}
			msgs = append(msgs, m)
			for i := 0; i < n; i++ {
				msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": fmt.Sprint("c", call-n+1+i), "content": "42"})
			}
		}
		answer := map[string]any{"role": "assistant", "content": strings.Repeat("So it is 42. ", 1+rng.IntN(3))}
		if rng.IntN(2) == 0 {
			answer["reasoning_content"] = "Done."
		}
		msgs = append(msgs, answer)
	}
	if rng.IntN(2) == 0 {
		msgs = append(msgs, map[string]any{"role": "user", "content": "Thanks."})
	} else { // mid tool loop: the last user query is earlier, later turns keep their reasoning
		msgs = append(msgs, map[string]any{"role": "assistant", "content": "", "reasoning_content": "Check.",
			"tool_calls": []any{map[string]any{"id": "c0", "type": "function", "function": map[string]any{
				"name": "calculator", "arguments": `{"expression": "1 + 1"}`}}}},
			map[string]any{"role": "tool", "tool_call_id": "c0", "content": "2"})
	}
	out := make([]json.RawMessage, len(msgs))
	for i, m := range msgs {
		out[i], _ = json.Marshal(m)
	}
	return out
}

// TestIncrementalMismatchTurnsOff: when a checked incremental rendering
// differs from the full one (here: a served path that closed one turn less
// than the template does), the full rendering is used, the difference is
// counted, and incremental rendering stays off.
func TestIncrementalMismatchTurnsOff(t *testing.T) {
	k := templateContinuity(t, "qwen3", "<|im_end|>")
	if k.inc.off.Load() {
		t.Fatal("off after the self-check")
	}
	var raws []json.RawMessage
	if err := json.Unmarshal([]byte(selfCheckConversations[0]), &raws); err != nil {
		t.Fatal(err)
	}
	req := template.Request{Input: template.Input{AddGenerationPrompt: true, Tools: json.RawMessage(selfCheckTools)}, Raw: raws}
	conv, err := k.conversation("s", req)
	if err != nil {
		t.Fatal(err)
	}
	hit := len(conv.msgs) - 2
	short := &servedTurn{ids: []int32{1, 1, 1}, ended: true} // the template closes 5 turns up to there
	want, _, ok := k.tailFull(req.Input, conv.norm, short)
	if !ok {
		t.Fatal("full rendering found no cut")
	}
	got, _, ok := k.spliceTail(req.Input, conv, hit, short)
	if !ok || got != want {
		t.Errorf("spliceTail %q, want the full rendering's %q", got, want)
	}
	if !k.inc.off.Load() || testutil.ToFloat64(k.inc.checks.WithLabelValues("different")) != 1 {
		t.Errorf("off %v, differences counted %v", k.inc.off.Load(), testutil.ToFloat64(k.inc.checks.WithLabelValues("different")))
	}
}

// TestConversationReuse: a session's next call normalises only the
// messages it adds (the earlier ones are the previous call's, shared), and
// a changed earlier message is normalised again.
func TestConversationReuse(t *testing.T) {
	k := templateContinuity(t, "qwen3", "<|im_end|>")
	rng := rand.New(rand.NewPCG(1, 1))
	raws := randomConversation(rng, 2)
	first := template.Request{Input: template.Input{AddGenerationPrompt: true}, Raw: raws[:len(raws)-1]}
	a, err := k.conversation("s", first)
	if err != nil {
		t.Fatal(err)
	}
	b, err := k.conversation("s", template.Request{Input: first.Input, Raw: raws})
	if err != nil {
		t.Fatal(err)
	}
	for i := range a.norm {
		if &a.norm[i][0] != &b.norm[i][0] || a.hashes[i] != b.hashes[i] {
			t.Fatalf("message %d normalised again", i)
		}
	}
	edited := append([]json.RawMessage{}, raws...)
	edited[0] = json.RawMessage(`{"role":"user","content":"Something else"}`)
	c, err := k.conversation("s", template.Request{Input: first.Input, Raw: edited})
	if err != nil {
		t.Fatal(err)
	}
	fresh, _ := k.conversation("", template.Request{Input: first.Input, Raw: edited})
	for i := range c.hashes {
		if c.hashes[i] == b.hashes[i] || c.hashes[i] != fresh.hashes[i] {
			t.Fatalf("message %d: hash kept from before the edit, or not the fresh one", i)
		}
	}
}
