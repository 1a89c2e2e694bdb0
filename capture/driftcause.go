package capture

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
)

// A call drifts when its prompt tokens extend no earlier path of its
// session. Why is read from the messages: the call is compared with the
// closest earlier conversation of the session (an earlier call's messages
// followed by the reply hone served it), message by message, and the
// first difference names the cause.

// Drift causes, the values of hone_trajectory_drift_total's cause label.
const (
	// DriftToolArguments: an earlier tool call came back with the same
	// JSON value in other bytes (key order, escapes, spacing), as most
	// agent frameworks re-serialise arguments. vLLM and hone's engine parse
	// arguments and render them with the template's tojson, so other
	// spacing alone renders alike: it is named only when nothing else
	// explains the drift (the model then wrote spacing tojson does not).
	DriftToolArguments = "tool_arguments"
	// DriftReasoning: earlier reasoning was dropped or changed, by the
	// client or by the chat template (Qwen3's drops the <think> blocks of
	// earlier turns, and the empty one enable_thinking=false prompts with).
	DriftReasoning = "reasoning"
	// DriftEdited: the client changed, dropped or reordered earlier
	// messages, or the tools or template arguments, so the conversation is
	// really a new one from there.
	DriftEdited = "edited"
	// DriftUnknown: the messages say nothing (completions calls, or the
	// same conversation rendered to other tokens).
	DriftUnknown = "unknown"
)

// DriftCauses lists every cause.
var DriftCauses = []string{DriftToolArguments, DriftReasoning, DriftEdited, DriftUnknown}

// Drift records one call that extended no earlier path of its session.
type Drift struct {
	Call string `json:"call"`
	Seq  uint64 `json:"seq"`
	// Against is the earlier call whose conversation (its messages and the
	// reply hone served it) is closest to this call's messages.
	Against string `json:"against,omitempty"`
	// Message is the index, in this call's messages, of the message that
	// caused the drift (-1: none; for a dropped message, the index it had).
	Message int    `json:"message"`
	Role    string `json:"role,omitempty"`
	Cause   string `json:"cause"`
	Detail  string `json:"detail,omitempty"`
}

// SessionDrifts stitches a session's calls (in seq order) and returns where
// and why calls drifted.
func SessionDrifts(calls []*Call) []Drift {
	_, drifts := buildTrie(calls)
	return drifts
}

// DriftsOf returns where and why the session's calls drifted: stitched
// from calls when they are all still stored (an open session's too), else
// as recorded at the session's last build.
func (s *Session) DriftsOf(calls []*Call) []Drift {
	if len(calls) < s.Calls {
		return s.Drifts
	}
	return SessionDrifts(calls)
}

// driftCounts counts drifts per cause.
func driftCounts(ds []Drift) map[string]int {
	n := map[string]int{}
	for _, d := range ds {
		n[d.Cause]++
	}
	return n
}

// driftMsg is what of a chat message decides a drift's cause.
type driftMsg struct {
	role, name string
	text       string // content without a leading reasoning block, trimmed
	reasoning  string // reasoning field, or the content's <think> block
	calls      []driftCall
}

type driftCall struct{ name, args string }

func msgFromJSON(v gjson.Result) driftMsg {
	m := driftMsg{role: member(v, "role").String(), name: member(v, "name").String()}
	m.text, m.reasoning = splitThink(canonContent(member(v, "content")))
	for _, k := range []string{"reasoning_content", "reasoning"} {
		if r := member(v, k); r.Exists() && r.String() != "" {
			m.reasoning = r.String()
		}
	}
	member(v, "tool_calls").ForEach(func(_, tc gjson.Result) bool {
		fn := member(tc, "function")
		m.calls = append(m.calls, driftCall{name: member(fn, "name").String(), args: strings.TrimSpace(member(fn, "arguments").String())})
		return true
	})
	return m
}

func msgFromChoice(ch *Choice) driftMsg {
	m := driftMsg{role: "assistant"}
	m.text, m.reasoning = splitThink(strings.TrimSpace(ch.Content))
	if ch.Reasoning != "" {
		m.reasoning = ch.Reasoning
	}
	for _, tc := range ch.ToolCalls {
		m.calls = append(m.calls, driftCall{name: tc.Name, args: strings.TrimSpace(tc.Arguments)})
	}
	return m
}

// splitThink splits an assistant text into what follows its last </think>
// and the reasoning before it.
func splitThink(s string) (text, reasoning string) {
	i := strings.LastIndex(s, "</think>")
	if i < 0 {
		return strings.TrimSpace(s), ""
	}
	r := strings.TrimPrefix(strings.TrimSpace(s[:i]), "<think>")
	return strings.TrimSpace(s[i+len("</think>"):]), strings.TrimSpace(r)
}

// respaced is diff's cause for tool-call arguments that differ from the
// sampled ones in spacing only (walk reports it as DriftToolArguments
// when nothing else explains the drift).
const respaced = "respaced"

// diff compares a message the client sent with the one at the same place
// of an earlier conversation: "" when equal for drift's purposes, else a
// cause and what differs. Tool-call ids do not count (templates rarely
// render them, frameworks rewrite them).
func diff(sent, orig *driftMsg) (cause, detail string) {
	if sent.role != orig.role {
		return DriftEdited, fmt.Sprintf("role %s where the conversation had %s", sent.role, orig.role)
	}
	if sent.text != orig.text || sent.name != orig.name {
		return DriftEdited, "text differs"
	}
	if len(sent.calls) != len(orig.calls) {
		return DriftEdited, fmt.Sprintf("%d tool calls where the conversation had %d", len(sent.calls), len(orig.calls))
	}
	reserialised, spacing := "", ""
	for i := range sent.calls {
		s, o := sent.calls[i], orig.calls[i]
		if s.name != o.name || canonArgs(s.args) != canonArgs(o.args) {
			if s.name == o.name && !json.Valid([]byte(o.args)) {
				return DriftEdited, fmt.Sprintf("tool call %d (%s): the sampled arguments are not JSON (cut by max_tokens?) and came back as %s",
					i, o.name, clip(s.args))
			}
			return DriftEdited, fmt.Sprintf("tool call %d (%s) differs", i, o.name)
		}
		switch {
		case s.args == o.args || reserialised != "":
		case sameCompact(s.args, o.args):
			if spacing == "" {
				spacing = fmt.Sprintf("arguments of %s sent back as %s, sampled as %s (spacing only)", o.name, clip(s.args), clip(o.args))
			}
		default:
			reserialised = fmt.Sprintf("arguments of %s sent back as %s, sampled as %s", o.name, clip(s.args), clip(o.args))
		}
	}
	if reserialised != "" {
		return DriftToolArguments, reserialised
	}
	if sent.role == "assistant" && strings.TrimSpace(sent.reasoning) != strings.TrimSpace(orig.reasoning) {
		if sent.reasoning == "" {
			return DriftReasoning, "reasoning dropped"
		}
		return DriftReasoning, "reasoning changed"
	}
	if spacing != "" {
		return respaced, spacing
	}
	return "", ""
}

// sameCompact reports whether two JSON texts differ in insignificant
// whitespace only (key order and escapes count).
func sameCompact(a, b string) bool {
	var x, y bytes.Buffer
	return json.Compact(&x, []byte(a)) == nil && json.Compact(&y, []byte(b)) == nil && bytes.Equal(x.Bytes(), y.Bytes())
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}

// classifyDrift explains why c extended no path of the calls before it.
func classifyDrift(c *Call, earlier []*Call) Drift {
	d := Drift{Call: c.ID, Seq: c.Seq, Message: -1, Cause: DriftUnknown}
	msgs := gjson.GetBytes(c.Request, "messages")
	if !msgs.IsArray() {
		d.Detail = "no messages to compare"
		return d
	}
	var sent []driftMsg
	msgs.ForEach(func(_, v gjson.Result) bool {
		sent = append(sent, msgFromJSON(v))
		return true
	})
	best := -1
	var closest *Call
	for _, e := range earlier {
		em := gjson.GetBytes(e.Request, "messages")
		if !em.IsArray() {
			continue
		}
		var conv []driftMsg
		em.ForEach(func(_, v gjson.Result) bool {
			conv = append(conv, msgFromJSON(v))
			return true
		})
		for i := range e.Choices {
			w := walk(sent, append(conv, msgFromChoice(&e.Choices[i])), e)
			if w.matched >= best { // ties: the later call
				best, d.Against, d.Message, d.Cause, d.Detail = w.matched, e.ID, w.at, w.cause, w.detail
				closest = e
			}
		}
	}
	if closest != nil && d.Cause != DriftEdited {
		// what renders every prompt besides the messages
		for _, k := range []string{"tools", "chat_template_kwargs", "documents"} {
			if a, b := gjson.GetBytes(c.Request, k), gjson.GetBytes(closest.Request, k); canonArgs(a.Raw) != canonArgs(b.Raw) {
				d.Message, d.Cause, d.Detail = -1, DriftEdited, k+" differ from the earlier call's"
				break
			}
		}
	}
	if d.Message >= 0 && d.Message < len(sent) {
		d.Role = sent[d.Message].role
	}
	return d
}

type walked struct {
	matched       int // messages of the conversation the call repeats (up to tolerated differences)
	at            int
	cause, detail string
	spacedAt      int // the first message whose tool arguments differ in spacing only (-1: none)
	spaced        string
}

// walk compares a call's messages with an earlier conversation conv (whose
// last message is the reply hone served call e). An edit decides the cause even
// after a tolerated difference: in tokens mode only an edit breaks the path.
func walk(sent, conv []driftMsg, e *Call) walked {
	w := walked{at: -1, spacedAt: -1}
	for i := range conv {
		if i >= len(sent) {
			return walked{matched: i, at: i, cause: DriftEdited, detail: fmt.Sprintf("message %d (%s) dropped", i, conv[i].role)}
		}
		cause, detail := diff(&sent[i], &conv[i])
		if cause == DriftEdited {
			return walked{matched: i, at: i, cause: cause, detail: detail}
		}
		switch {
		case cause == respaced:
			if w.spacedAt < 0 {
				w.spacedAt, w.spaced = i, detail
			}
		case cause != "" && w.cause == "":
			w.at, w.cause, w.detail = i, cause, detail
		}
	}
	w.matched = len(conv)
	if w.cause != "" {
		return w
	}
	// Same messages, other tokens: what the template renders of the reply
	// now is not what was sampled.
	reply := len(conv) - 1
	switch {
	case conv[reply].reasoning != "":
		return walked{matched: w.matched, at: reply, cause: DriftReasoning, detail: "the chat template drops the reasoning of earlier turns"}
	case gjson.GetBytes(e.Request, "chat_template_kwargs.enable_thinking").Type == gjson.False:
		return walked{matched: w.matched, at: reply, cause: DriftReasoning,
			detail: "the chat template drops the empty think block enable_thinking=false prompted with"}
	case w.spacedAt >= 0:
		return walked{matched: w.matched, at: w.spacedAt, cause: DriftToolArguments, detail: w.spaced}
	}
	detail := "same messages rendered to other tokens"
	if tc := gjson.GetBytes(e.Request, "tool_choice"); len(conv[reply].calls) > 0 && (tc.IsObject() || tc.String() == "required") {
		detail = "a forced tool call, sampled as a JSON list, rendered by the chat template in its own format"
	}
	return walked{matched: w.matched, at: -1, cause: DriftUnknown, detail: detail}
}
