package continuity

import (
	"context"
	"fmt"
	"time"

	"github.com/hone-rl/hone/model/template"
)

// probeConversation is rendered by hone and by each engine's /tokenize: a
// system prompt, tools, a served turn with reasoning and a tool call, its
// result, an answer and a new question. Tokens mode runs for an engine only
// when both give the same ids, so hone's prompts are the engine's own.
const probeConversation = `{"messages":[` +
	`{"role":"system","content":"You are a careful assistant."},` +
	`{"role":"user","content":"What is 17 * 23? Use the calculator."},` +
	`{"role":"assistant","content":"","reasoning_content":"I should call the tool.","tool_calls":[{"id":"call_probe","type":"function","function":{"name":"calculator","arguments":"{\"expression\": \"17 * 23\"}"}}]},` +
	`{"role":"tool","tool_call_id":"call_probe","content":"391"},` +
	`{"role":"assistant","content":"17 * 23 = 391."},` +
	`{"role":"user","content":"Thanks! And 2 + 2, émoji 🙂?"}],` +
	`"tools":[{"type":"function","function":{"name":"calculator","description":"Evaluate arithmetic","parameters":{"type":"object","properties":{"expression":{"type":"string"}},"required":["expression"]}}}],` +
	`"add_generation_prompt":true}`

// Tokenize posts a chat request to an engine's /tokenize and returns the
// prompt ids and max_model_len of its reply. Its errors say what failed
// (the post, the status, the reply).
type Tokenize func(ctx context.Context, body []byte) (ids []int32, maxModelLen int, err error)

// Probe compares hone's rendering of the probe conversation with the
// engine's at url (of the given kind) and records whether tokens mode runs
// for it. changed is false when the result is the one recorded before.
func (k *Continuity) Probe(ctx context.Context, url, kind string, tokenize Tokenize) (st *EngineState, changed bool) {
	st = k.probe(ctx, kind, tokenize)
	prev := k.State(url)
	k.setState(url, st)
	return st, prev == nil || *prev != *st
}

func (k *Continuity) probe(ctx context.Context, kind string, tokenize Tokenize) *EngineState {
	if kind == "sglang" {
		return &EngineState{Reason: "SGLang engines are not covered (their completions answers differ from vLLM's)"}
	}
	in, err := template.RequestInput([]byte(probeConversation))
	if err != nil {
		return &EngineState{Reason: "probe conversation: " + err.Error()}
	}
	text, err := k.tmpl.Render(in)
	if err != nil {
		return &EngineState{Reason: "the chat template cannot render the probe conversation: " + err.Error()}
	}
	want := k.tok.Encode(text)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	got, maxLen, err := tokenize(ctx, []byte(probeConversation))
	if err != nil {
		return &EngineState{Reason: "probe: " + err.Error()}
	}
	if i := firstDiff(want, got); i >= 0 {
		return &EngineState{Reason: fmt.Sprintf("probe: the engine's prompt differs from hone's at token %d of %d/%d "+
			"(hone %q, engine %q)", i, len(want), len(got), k.around(want, i), k.around(got, i))}
	}
	return &EngineState{Tokens: true, Reason: "probe passed", MaxModelLen: maxLen}
}

// around decodes a few tokens around position i, for the log.
func (k *Continuity) around(ids []int32, i int) string {
	lo, hi := max(0, i-3), min(len(ids), i+4)
	if lo >= hi {
		return ""
	}
	return k.tok.Decode(ids[lo:hi])
}

// firstDiff is the first index where a and b differ, -1 when equal.
func firstDiff(a, b []int32) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}
