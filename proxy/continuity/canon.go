package continuity

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/model/template"
)

// A conversation is matched against the turns hone served by meaning, not
// by bytes: each message is reduced to what the chat template renders of it
// and what the client may not change without changing the conversation.
// Assistant turns keep their visible text (after any </think>, without the
// surrounding whitespace templates strip) and their tool calls' names and
// arguments as JSON values (key order and spacing do not count); reasoning
// and tool-call ids do not count. Other messages keep role, name and text.
// prefixHash chains these forms, so equal hashes mean equal conversations
// up to that message, with equal tools and template arguments.

// prefixHash identifies a conversation prefix by meaning.
type prefixHash [16]byte

// normMsg is one message as template.RequestInput normalises it.
type normMsg struct {
	Role      string          `json:"role"`
	Content   string          `json:"content"`
	Name      *string         `json:"name"`
	ToolCalls []normToolCall  `json:"tool_calls"`
	Reasoning json.RawMessage `json:"reasoning"`
	Raw       json.RawMessage `json:"-"`
}

type normToolCall struct {
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// parseMessages splits the normalised messages of a template Input.
func parseMessages(in template.Input) ([]normMsg, error) {
	var raws []json.RawMessage
	if err := json.Unmarshal(in.Messages, &raws); err != nil {
		return nil, err
	}
	msgs := make([]normMsg, len(raws))
	for i, raw := range raws {
		if err := json.Unmarshal(raw, &msgs[i]); err != nil {
			return nil, err
		}
		msgs[i].Raw = raw
	}
	return msgs, nil
}

// seedHash covers what renders every prompt besides the messages: tools,
// documents and template arguments.
func seedHash(in template.Input) prefixHash {
	var b bytes.Buffer
	b.WriteString("hone-continuity-1\x00")
	b.Write(canonValue(in.Tools))
	b.WriteByte(0)
	b.Write(canonValue(in.Documents))
	b.WriteByte(0)
	keys := make([]string, 0, len(in.Kwargs))
	for k := range in.Kwargs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v, _ := json.Marshal(in.Kwargs[k])
		if raw, ok := in.Kwargs[k].(json.RawMessage); ok {
			v = canonValue(raw)
		}
		b.WriteString(k)
		b.WriteByte(0)
		b.Write(v)
		b.WriteByte(0)
	}
	sum := sha256.Sum256(b.Bytes())
	var h prefixHash
	copy(h[:], sum[:])
	return h
}

// chain extends a prefix hash with one message's canonical form.
func (h prefixHash) chain(canon []byte) prefixHash {
	d := sha256.New()
	d.Write(h[:])
	d.Write(canon)
	var out prefixHash
	copy(out[:], d.Sum(nil))
	return out
}

// prefixHashes returns, for each message j, the hash of the conversation up
// to and including it.
func prefixHashes(seed prefixHash, msgs []normMsg) []prefixHash {
	out := make([]prefixHash, len(msgs))
	h := seed
	var buf []byte
	for i := range msgs {
		buf = msgs[i].canon(buf[:0])
		h = h.chain(buf)
		out[i] = h
	}
	return out
}

// canon appends the message's canonical form to dst.
func (m *normMsg) canon(dst []byte) []byte {
	dst = append(dst, m.Role...)
	dst = append(dst, 0)
	if m.Name != nil {
		dst = append(dst, *m.Name...)
	}
	dst = append(dst, 0)
	if m.Role != "assistant" {
		dst = append(dst, m.Content...)
		return append(dst, 0x1e)
	}
	dst = append(dst, visibleText(m.Content)...)
	dst = append(dst, 0)
	for _, tc := range m.ToolCalls {
		dst = appendCall(dst, tc.Function.Name, tc.Function.Arguments)
	}
	return append(dst, 0x1e)
}

// replyCanon is the canonical form of a served choice as the client will
// send it back: an assistant message with its visible text and tool calls.
func replyCanon(dst []byte, ch *capture.Choice) []byte {
	dst = append(dst, "assistant\x00\x00"...)
	dst = append(dst, visibleText(ch.Content)...)
	dst = append(dst, 0)
	for _, tc := range ch.ToolCalls {
		dst = appendCall(dst, tc.Name, argumentsJSON(tc.Arguments))
	}
	return append(dst, 0x1e)
}

func appendCall(dst []byte, name string, args json.RawMessage) []byte {
	dst = append(dst, name...)
	dst = append(dst, 0)
	dst = append(dst, canonValue(args)...)
	return append(dst, 0)
}

// visibleText is an assistant text as chat templates render earlier turns:
// what follows the last </think>, without surrounding whitespace.
func visibleText(s string) string {
	if i := strings.LastIndex(s, "</think>"); i >= 0 {
		s = s[i+len("</think>"):]
	} else if strings.HasPrefix(strings.TrimSpace(s), "<think>") {
		s = "" // generation stopped while thinking: no visible text
	}
	return strings.TrimSpace(s)
}

// argumentsJSON reads tool-call arguments as vLLM renders them: a JSON
// object, anything else {}.
func argumentsJSON(s string) json.RawMessage {
	raw := bytes.TrimSpace([]byte(s))
	if len(raw) > 0 && raw[0] == '{' && json.Valid(raw) {
		return raw
	}
	return json.RawMessage("{}")
}

// canonValue re-encodes a JSON value with sorted keys, no spacing and
// numbers by value (canonNumbers); what is not JSON is returned as it is.
func canonValue(raw json.RawMessage) []byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return raw
	}
	out, err := json.Marshal(canonNumbers(v))
	if err != nil {
		return raw
	}
	return out
}

// canonNumbers writes the numbers of a decoded JSON value by value: 2.50,
// 2.5 and 25e-1 alike, 1.0 as 1 (Python writes floats one way, JavaScript
// another); integers without a fraction or exponent keep their digits, so
// large ones lose nothing.
func canonNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = canonNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = canonNumbers(e)
		}
	case json.Number:
		s := string(x)
		if !strings.ContainsAny(s, ".eE") {
			return x
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return x
		}
		if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return json.Number(strconv.FormatInt(int64(f), 10))
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
	}
	return v
}
