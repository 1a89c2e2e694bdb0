package proxy

import (
	"context"
	"fmt"
	"time"

	"github.com/hone-rl/hone/model/template"
	"github.com/tidwall/gjson"
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

// probe compares hone's rendering of the probe conversation with engine
// e's and records whether tokens mode runs for e.
func (s *Server) probe(ctx context.Context, e *engine) {
	k := s.cont
	st := k.probeEngine(ctx, s, e)
	prev := k.state(e.url)
	k.setState(e.url, st)
	if prev != nil && *prev == *st {
		return
	}
	if st.tokens {
		s.log.Info("continuity: tokens mode", "engine", e.url, "max_model_len", st.maxModelLen)
	} else {
		s.log.Warn("continuity: observing this engine", "engine", e.url, "why", st.reason)
	}
}

func (k *continuity) probeEngine(ctx context.Context, s *Server, e *engine) *engineContinuity {
	if e.kind == "sglang" {
		return &engineContinuity{reason: "SGLang engines are not covered (their completions answers differ from vLLM's)"}
	}
	in, err := template.RequestInput([]byte(probeConversation))
	if err != nil {
		return &engineContinuity{reason: "probe conversation: " + err.Error()}
	}
	text, err := k.tmpl.Render(in)
	if err != nil {
		return &engineContinuity{reason: "the chat template cannot render the probe conversation: " + err.Error()}
	}
	want := k.tok.Encode(text)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	status, reply, err := s.postTokenize(ctx, e, []byte(probeConversation))
	switch {
	case err != nil:
		return &engineContinuity{reason: "probe: POST /tokenize: " + err.Error()}
	case status != 200:
		return &engineContinuity{reason: fmt.Sprintf("probe: POST /tokenize answered %d: %.200s", status, reply)}
	}
	got, err := parseTokenizeReply(reply)
	if err != nil {
		return &engineContinuity{reason: "probe: /tokenize reply: " + err.Error()}
	}
	if i := firstDiff(want, got); i >= 0 {
		return &engineContinuity{reason: fmt.Sprintf("probe: the engine's prompt differs from hone's at token %d of %d/%d "+
			"(hone %q, engine %q)", i, len(want), len(got), k.around(want, i), k.around(got, i))}
	}
	return &engineContinuity{tokens: true, reason: "probe passed", maxModelLen: int(gjson.GetBytes(reply, "max_model_len").Int())}
}

// around decodes a few tokens around position i, for the log.
func (k *continuity) around(ids []int32, i int) string {
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

// probeAll probes every engine (at start).
func (s *Server) probeAll(ctx context.Context) {
	for _, e := range s.pool.engines {
		s.probe(ctx, e)
	}
}
