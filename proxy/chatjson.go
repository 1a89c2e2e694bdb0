package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hone-rl/hone/internal/jsonenc"
	"github.com/hone-rl/hone/internal/jsonwalk"
	"github.com/tidwall/gjson"
)

// The chat requests hone builds from Messages and Responses calls carry the
// whole conversation, every call: json.Marshal validated and compacted
// each message's content again (a quarter of hone's CPU on a coding agent's
// 80 KB Messages call). These write the same bytes (chatjson_test.go holds
// them to json.Marshal), copying content that is already compact.

// marshalRequest writes out as json.Marshal writes a map[string]any (keys
// sorted), with a []chatMessage value written by appendChatMessages and a
// marshaled one copied. With in set, it reads the request as inspect would
// (chat dialect) while it writes it.
func marshalRequest(out map[string]any, in *inspection) ([]byte, error) {
	keys := make([]string, 0, len(out))
	for k := range out {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b := append(make([]byte, 0, sizeHint(out)), '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(jsonenc.AppendString(b, k), ':')
		at := len(b)
		var err error
		switch v := out[k].(type) {
		case []chatMessage:
			b, err = appendChatMessages(b, v)
		case marshaled:
			b = append(b, v...)
		default:
			var enc []byte
			enc, err = json.Marshal(v)
			b = append(b, enc...)
		}
		if err != nil {
			return nil, err
		}
		if in != nil {
			if key := in.key(k); key != "" {
				in.value(key, string(b[at:]), at, chatDialect)
			}
		}
	}
	return append(b, '}'), nil
}

// sizeHint is about the bytes marshalRequest writes for out, so that the
// request (a whole conversation) is not copied again as it grows.
func sizeHint(out map[string]any) int {
	n := 2
	for k, v := range out {
		n += len(k) + 4
		switch v := v.(type) {
		case []chatMessage:
			for i := range v {
				m := &v[i]
				n += 48 + len(m.Content) + len(m.ReasoningContent) + len(m.ToolCallID)
				for j := range m.ToolCalls {
					f := &m.ToolCalls[j].Function
					n += 64 + len(m.ToolCalls[j].ID) + len(f.Name) + len(f.Arguments)
				}
			}
		case marshaled:
			n += len(v)
		default:
			n += 32
		}
	}
	return n
}

// verifyEncoded makes appendChatMessage check, under go test, that a
// content marked encoded is what AppendRaw would write: every test that
// translates a request then holds the builders to their word.
var verifyEncoded = testing.Testing()

// mustInspectAs panics unless inspect reads body as a translation's
// inspection did: under go test, every translated call holds
// marshalRequest's reading to inspect's.
func mustInspectAs(body []byte, d dialect, a asked, model string) {
	ra, rmodel, ok := inspect(body, d)
	if !ok || rmodel != model || fmt.Sprintf("%+v", ra) != fmt.Sprintf("%+v", a) {
		panic(fmt.Sprintf("translated request read as %q %+v, inspect reads %v %q %+v: %s", model, a, ok, rmodel, ra, body))
	}
}

func mustBeEncoded(c json.RawMessage) {
	if out, err := jsonenc.AppendRaw(nil, c); err != nil || !bytes.Equal(out, c) {
		panic(fmt.Sprintf("content marked encoded is not json.Marshal's form: %q (%v)", c, err))
	}
}

// marshaled is a value already written by json.Marshal.
type marshaled []byte

// appendChatMessages appends msgs as json.Marshal writes them.
func appendChatMessages(b []byte, msgs []chatMessage) ([]byte, error) {
	if msgs == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '[')
	for i := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendChatMessage(b, &msgs[i]); err != nil {
			return nil, err
		}
	}
	return append(b, ']'), nil
}

// appendChatMessage writes chatMessage's fields in their order, leaving out
// the empty ones its omitempty tags leave out.
func appendChatMessage(b []byte, m *chatMessage) ([]byte, error) {
	b = jsonenc.AppendString(append(b, `{"role":`...), m.Role)
	if len(m.Content) > 0 && m.encoded {
		if verifyEncoded {
			mustBeEncoded(m.Content)
		}
		b = append(append(b, `,"content":`...), m.Content...)
	} else if len(m.Content) > 0 {
		var err error
		if b, err = jsonenc.AppendRaw(append(b, `,"content":`...), m.Content); err != nil {
			return nil, err
		}
	}
	if m.ReasoningContent != "" {
		b = jsonenc.AppendString(append(b, `,"reasoning_content":`...), m.ReasoningContent)
	}
	if len(m.ToolCalls) > 0 {
		calls, err := json.Marshal(m.ToolCalls)
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"tool_calls":`...), calls...)
	}
	if m.ToolCallID != "" {
		b = jsonenc.AppendString(append(b, `,"tool_call_id":`...), m.ToolCallID)
	}
	return append(b, '}'), nil
}

// object is a JSON object whose members are read once: Get returns the
// first member of a name, as gjson.Result.Get does for a plain key, without
// scanning the object again. Messages and Responses requests are read for a
// dozen keys, each of which gjson found by skipping the conversation before
// it. Only the keys of requestKeys are kept, so a body of a million keys
// costs no map of a million entries.
type object struct {
	gjson.Result
	members map[string]gjson.Result
}

// requestKeys are the top-level keys the Messages and Responses
// translations read.
var requestKeys = func() map[string]bool {
	keys := map[string]bool{}
	for _, k := range strings.Fields(`input instructions max_output_tokens max_tokens messages metadata model output_config
		parallel_tool_calls previous_response_id reasoning stop_sequences store stream system temperature text
		tool_choice tools top_k top_p user`) {
		keys[k] = true
	}
	return keys
}()

func readObject(r gjson.Result) object {
	o := object{Result: r, members: make(map[string]gjson.Result, 16)}
	if !r.IsObject() {
		return o
	}
	w := jsonwalk.New(r.Raw) // faster than gjson's ForEach over the conversation
	for key := range w.Members {
		if _, seen := o.members[key]; seen || !requestKeys[key] {
			w.Skip()
			continue
		}
		raw, _ := w.Value()
		o.members[key] = gjson.Parse(raw) // what ForEach gives, but its Index
	}
	return o
}

// Get returns the member named by path's first dot-separated part, and the
// rest of path within it as gjson reads it; a key outside requestKeys is
// looked up in the object as gjson does.
func (o object) Get(path string) gjson.Result {
	key, rest, nested := strings.Cut(path, ".")
	if !requestKeys[key] {
		return o.Result.Get(path)
	}
	v := o.members[key]
	if nested {
		return v.Get(rest)
	}
	return v
}

// contentString is a JSON string value (raw: its text) as chat content:
// json.Marshal's bytes for the string it holds, written from raw without
// decoding it (the runs already in that form, most of a conversation, are
// copied whole).
func contentString(raw string) json.RawMessage {
	return jsonenc.AppendLiteral(make([]byte, 0, len(raw)+8), raw)
}
