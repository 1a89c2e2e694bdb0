package proxy

import (
	"strings"
	"unsafe"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/internal/jsonwalk"
	"github.com/tidwall/gjson"
)

// dialect is the engine API a call's request goes to, one type per API
// (dialect_chat.go, dialect_completions.go, dialect_passthrough.go): how a
// request asks for logprobs, how the engine's choices and logprobs fold
// into a capture.Call, which stream chunks carry nothing for the agent, and
// the shape of an answer rebuilt from the capture. The agent-facing API is
// the surface (api.go); the translated surfaces speak the chat dialect.
type dialect interface {
	// route names the dialect in the capture (capture.Route*) and in
	// metrics.
	route() string
	// captured reports whether calls in this dialect are captured (the
	// passthrough of other inference routes is not).
	captured() bool
	// askedLogprobs reads the request's own logprobs value.
	askedLogprobs(v gjson.Result) bool
	// logprobsField is how capture asks for logprobs: the value to set
	// and the raw member to append.
	logprobsField() (v any, raw string)
	// addOutput folds a choice's output (or a stream delta of it) in:
	// the message or delta of a chat choice (msg: its raw JSON, "" when
	// absent), the text of a completion.
	// Stream deltas are appended through t.
	addOutput(ch *capture.Choice, t *texts, text string, msg string, delta bool)
	// addLogprobs folds in a choice's logprobs, the JSON object at lp's
	// position, which it consumes; withTokens also takes the completion
	// ids from vLLM's "token_id:N" token strings (tok, nil without
	// withTokens). The values are read as gjson's Result.ForEach and Get
	// would read them (accumulate_ref_test.go).
	addLogprobs(ch *capture.Choice, lp *jsonwalk.Walker, withTokens bool, tok func(*capture.Choice, string))
	// silentChunk reports whether the stream chunk a has just folded in
	// (the agent did not ask logprobs or token ids for it) carries
	// nothing else for the agent.
	silentChunk(a *accumulator) bool
	// answer is the object type and choice of an answer rebuilt from the
	// capture.
	answer() string
	answerChoice(c capture.Choice) aggChoice
	// rendersChat reports whether tokens-mode continuity can render this
	// dialect's prompts (chat messages through the model's template).
	rendersChat() bool
}

// Dialects.
var (
	chatDialect        dialect = chatAPI{}
	completionsDialect dialect = completionsAPI{}
	passthroughDialect dialect = passthroughAPI{}
)

// aggChoice is one choice of an answer rebuilt from the capture.
type aggChoice struct {
	Index        int         `json:"index"`
	Message      *aggMessage `json:"message,omitempty"`
	Text         string      `json:"text,omitempty"`
	FinishReason string      `json:"finish_reason"`
}

type aggMessage struct {
	Role      string    `json:"role"`
	Content   string    `json:"content"`
	Reasoning string    `json:"reasoning,omitempty"`
	ToolCalls []aggTool `json:"tool_calls,omitempty"`
}

type aggTool struct {
	ID       string      `json:"id,omitempty"`
	Type     string      `json:"type"`
	Function aggFunction `json:"function"`
}

type aggFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// texts grows the strings that a stream's deltas append to (content,
// reasoning, a tool call's name and arguments) in place, in one builder per
// string: old + s copied the whole string on every delta, quadratic in a
// long answer (a 4,000-token stream copied ~30 MB).
type texts struct{ m map[*string]*strings.Builder }

// set sets *dst to s, or with delta appends s to it.
func (t *texts) set(dst *string, s string, delta bool) {
	if !delta {
		*dst = s
		return
	}
	if s == "" {
		return
	}
	b := t.m[dst]
	if b == nil || b.Len() != len(*dst) || unsafe.StringData(b.String()) != unsafe.StringData(*dst) {
		// not a string this builder made (a first delta, or one set since)
		if t.m == nil {
			t.m = map[*string]*strings.Builder{}
		}
		b = &strings.Builder{}
		b.WriteString(*dst)
		t.m[dst] = b
	}
	b.WriteString(s)
	*dst = b.String()
}
