package capture

import (
	"encoding/binary"
	"strings"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/hone-rl/hone/internal/jsonwalk"
	"github.com/tidwall/gjson"
)

// Session inference hashes conversations message by message: h(i) covers
// messages 0..i in canonical form, so "the messages of an earlier call plus
// its reply" is one hash the next call's prefix hashes can be looked up with.

// canonMessage is the normalised form of one chat message.
type canonMessage struct {
	role, content, name, toolCallID string
	toolCalls                       []canonToolCall
}

type canonToolCall struct{ name, args string }

// extend returns the rolling hash of prev followed by m, using d as scratch.
func (m *canonMessage) extend(d *xxhash.Digest, prev uint64) uint64 {
	d.Reset()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], prev)
	_, _ = d.Write(b[:])
	for _, s := range [...]string{m.role, m.content, m.name, m.toolCallID} {
		_, _ = d.WriteString(s)
		_, _ = d.Write(sepUnit)
	}
	for _, tc := range m.toolCalls {
		_, _ = d.WriteString(tc.name)
		_, _ = d.Write(sepRecord)
		_, _ = d.WriteString(tc.args)
		_, _ = d.Write(sepGroup)
	}
	return d.Sum64()
}

var sepUnit, sepRecord, sepGroup = []byte{0x1f}, []byte{0x1e}, []byte{0x1d}

// prefixHashes returns h(i) for every message of a chat request body and
// the hash up to the first user message (the conversation's opening, used as
// the selection key of inferred sessions). ok is false without messages.
func prefixHashes(body []byte) (hs []uint64, opening uint64, ok bool) {
	return conversationHashes(body, 0, nil)
}

// conversationHashes is prefixHashes that also hands text the canonical
// content of each user, system and developer message (requestTexts' texts)
// from the same pass; the strings may be views of body. It walks the body
// once with jsonwalk (long prompts are most of a call's bytes: gjson
// scanned each message three times, byte by byte) and stops after the
// messages; invalid JSON up to there is not ok.
func conversationHashes(body []byte, salt uint64, text func(string)) (hs []uint64, opening uint64, ok bool) {
	if len(body) == 0 {
		return nil, 0, false
	}
	w := jsonwalk.New(unsafe.String(&body[0], len(body)))
	if w.At() != '{' {
		return nil, 0, false
	}
	var h uint64
	openingSet := false
	d := xxhash.New()
	for key := range w.Members {
		if key != "messages" {
			w.Skip()
			continue
		}
		if w.At() != '[' {
			return nil, 0, false
		}
		for range w.Elements {
			m, isObject := canonMessageAt(&w, salt)
			h = m.extend(d, h)
			hs = append(hs, h)
			if !openingSet && m.role == "user" {
				opening, openingSet = h, true
			}
			if text != nil && isObject && summarised(m.role) {
				text(m.content)
			}
		}
		break // the first "messages", as gjson.Get finds it
	}
	if w.Bad() || len(hs) == 0 {
		return nil, 0, false
	}
	if !openingSet {
		opening = hs[len(hs)-1]
	}
	return hs, opening, true
}

// canonMessageAt reads the message at the walk's position (an element of
// messages) into its canonical form; isObject is false for an element that
// is not an object (it has no fields). canon_ref_test.go keeps gjson's
// reading as the reference.
func canonMessageAt(w *jsonwalk.Walker, salt uint64) (m canonMessage, isObject bool) {
	if w.At() != '{' {
		w.Skip()
		return m, false
	}
	for key := range w.Members {
		if key == "tool_calls" {
			m.toolCalls = appendToolCallsAt(m.toolCalls[:0], w, salt) // a repeated key: the last
			continue
		}
		raw, _ := w.Value()
		switch key {
		case "role":
			m.role = jsonwalk.AsString(raw)
		case "content":
			if raw != "" && raw[0] == '[' {
				m.content = canonContent(gjson.Parse(raw))
			} else {
				m.content = strings.TrimSpace(jsonwalk.AsString(raw))
			}
		case "name":
			m.name = jsonwalk.AsString(raw)
		case "tool_call_id":
			m.toolCallID = jsonwalk.AsString(raw)
		}
	}
	return m, true
}

// appendToolCallsAt appends the canonical form of each tool call of the
// value at the walk's position (a message's tool_calls), read as
// canon_ref_test.go's appendToolCalls reads it: each element of an array,
// each member's value of an object (gjson's ForEach), a scalar as one call;
// a call's last "function" member and that object's last "name" and
// "arguments", as the engine reads a repeated key (member.go).
func appendToolCallsAt(dst []canonToolCall, w *jsonwalk.Walker, salt uint64) []canonToolCall {
	switch w.At() {
	case '[':
		for range w.Elements {
			dst = append(dst, toolCallAt(w, salt))
		}
	case '{':
		for range w.Members {
			dst = append(dst, toolCallAt(w, salt))
		}
	default:
		w.Skip()
		dst = append(dst, canonToolCall{})
	}
	return dst
}

// toolCallAt reads one tool call at the walk's position.
func toolCallAt(w *jsonwalk.Walker, salt uint64) canonToolCall {
	var tc canonToolCall
	if w.At() != '{' {
		w.Skip()
		return tc
	}
	for key := range w.Members {
		if key != "function" {
			w.Skip()
			continue
		}
		tc = canonToolCall{} // a later "function" replaces an earlier one
		if w.At() != '{' {
			w.Skip()
			continue
		}
		for k := range w.Members {
			raw, _ := w.Value()
			switch k {
			case "name":
				tc.name = jsonwalk.AsString(raw)
			case "arguments":
				tc.args = argumentsOf(raw, salt)
			}
		}
	}
	return tc
}

// argumentsOf returns canonArgs of the arguments whose raw JSON is raw,
// from argsMemo when the same owner (salt: ownerSalt) sent those bytes
// before: an agent sends each earlier tool call again, in the same bytes,
// with every call.
func argumentsOf(raw string, salt uint64) string {
	if len(raw) > maxMemoArgs || raw == "" || raw[0] != '"' {
		return canonArgs(jsonwalk.AsString(raw))
	}
	if c, ok := argsMemo.Get(memoKey{salt, raw}); ok {
		return c
	}
	c := canonArgs(jsonwalk.AsString(raw))
	if len(c) <= maxMemoArgs {
		// raw, and c when it is not JSON (canonArgs gives it back trimmed),
		// are views of the agent's request, whose buffer is reused.
		argsMemo.Add(memoKey{salt, strings.Clone(raw)}, strings.Clone(c))
	}
	return c
}

// argsMemo maps tool-call arguments as written (a JSON string) by an owner
// to their canonical form. Keys are whole texts, not hashes, so no input
// can stand for another's; and the owner's, so a hit (a microsecond
// sooner) tells no client what another sent.
var argsMemo, _ = lru.New[memoKey, string](2048)

type memoKey struct {
	salt uint64
	raw  string
}

// maxMemoArgs bounds the arguments argsMemo keeps, and their canonical
// forms (2048 of each: 16 MiB at most).
const maxMemoArgs = 4 << 10

// canonContent flattens string or parts content; text parts concatenate,
// other parts keep their raw JSON.
func canonContent(c gjson.Result) string {
	if !c.IsArray() {
		return strings.TrimSpace(c.String())
	}
	var sb strings.Builder
	c.ForEach(func(_, p gjson.Result) bool {
		if t, text := member(p, "type").String(), member(p, "text"); t == "text" || t == "" && text.Exists() {
			sb.WriteString(text.String())
		} else {
			sb.WriteString(p.Raw)
		}
		return true
	})
	return strings.TrimSpace(sb.String())
}

// replyMessage is the assistant message an agent appends for a choice.
func replyMessage(c *Choice) canonMessage {
	m := canonMessage{role: "assistant", content: strings.TrimSpace(c.Content)}
	for _, tc := range c.ToolCalls {
		m.toolCalls = append(m.toolCalls, canonToolCall{name: tc.Name, args: canonArgs(tc.Arguments)})
	}
	return m
}

// gjsonLen is the number of messages of a chat request body.
func gjsonLen(req []byte) int { return int(gjson.GetBytes(req, "messages.#").Int()) }
