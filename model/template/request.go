package template

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hone-rl/hone/internal/jsonwalk"
	"github.com/tidwall/gjson"
)

// RenderRequest renders an OpenAI /v1/chat/completions request body the way
// vLLM feeds it to the model's chat template (its "string" content format):
//   - content that is null or absent becomes "", an array of text parts
//     the texts joined with "\n" (other parts are an error: no multimodal);
//   - assistant tool calls keep their fields, with function.arguments
//     parsed from its JSON string (not valid JSON, not an object, or empty:
//     {}); an empty tool_calls list is dropped;
//   - reasoning (or else reasoning_content) on an assistant message is
//     passed as both reasoning and reasoning_content;
//   - tool_call_id (tool messages) and a string name are kept, other
//     message fields dropped;
//   - each tool becomes {"type", "function": {"name", "description",
//     "parameters", extra fields...}} with absent fields null, as vLLM's
//     tool.model_dump() writes it;
//   - add_generation_prompt (default true), continue_final_message,
//     documents and chat_template_kwargs are passed on.
func (m *Model) RenderRequest(body []byte) (string, error) {
	in, err := RequestInput(body)
	if err != nil {
		return "", err
	}
	return m.Render(in)
}

// RequestInput converts a chat completions request body into the
// template's Input as vLLM would (see RenderRequest).
func RequestInput(body []byte) (Input, error) {
	req, err := ParseRequest(body)
	if err != nil {
		return Input{}, err
	}
	msgs := make([]json.RawMessage, len(req.Raw))
	for i, raw := range req.Raw {
		if msgs[i], err = NormalizeMessage(raw); err != nil {
			return Input{}, fmt.Errorf("message %d: %w", i, err)
		}
	}
	req.Input.Messages = JoinMessages(msgs)
	return req.Input, nil
}

// Request is a chat completions request read for the template: Input with
// everything but Messages converted as RequestInput does, and the messages
// as sent. A caller that renders many requests of one conversation
// normalises each message once (NormalizeMessage) and joins the ones it
// renders (JoinMessages).
type Request struct {
	Input
	Raw []json.RawMessage // the messages as sent, not normalised
}

// ParseRequest reads a chat completions request body (see RequestInput);
// it does not look inside the messages, which alias body. A repeated
// top-level key keeps its last value, as Python's json.loads.
func ParseRequest(body []byte) (Request, error) {
	if !jsonwalk.ValidBytes(body) {
		return Request{}, errors.New("parse chat request: not valid JSON")
	}
	doc := gjson.ParseBytes(body)
	if !doc.IsObject() {
		return Request{}, errors.New("parse chat request: not a JSON object")
	}
	req := Request{Input: Input{AddGenerationPrompt: true}}
	var err error
	doc.ForEach(func(key, v gjson.Result) bool {
		switch key.Str {
		case "messages":
			req.Raw, err = rawList(v, "messages")
		case "tools":
			req.Tools, err = toolList(v)
		case "documents":
			req.Documents = json.RawMessage(v.Raw)
		case "add_generation_prompt":
			err = optionalBool(v, key.Str, &req.AddGenerationPrompt)
		case "continue_final_message":
			err = optionalBool(v, key.Str, &req.ContinueFinalMessage)
		case "chat_template_kwargs":
			req.Kwargs, err = kwargs(v)
		}
		return err == nil
	})
	if err != nil {
		return Request{}, fmt.Errorf("parse chat request: %w", err)
	}
	if len(req.Raw) == 0 {
		return Request{}, errors.New("chat request: no messages")
	}
	return req, nil
}

// rawList splits a JSON array (null: none).
func rawList(v gjson.Result, what string) ([]json.RawMessage, error) {
	if v.Type == gjson.Null {
		return nil, nil
	}
	if !v.IsArray() {
		return nil, fmt.Errorf("%s is not a list", what)
	}
	out := []json.RawMessage{}
	v.ForEach(func(_, item gjson.Result) bool {
		out = append(out, json.RawMessage(item.Raw))
		return true
	})
	return out, nil
}

// toolList normalises the tools (normalizeTool); null is none, [] stays [].
func toolList(v gjson.Result) (json.RawMessage, error) {
	raws, err := rawList(v, "tools")
	if err != nil || raws == nil {
		return nil, err
	}
	tools := make([]json.RawMessage, len(raws))
	for i, raw := range raws {
		if tools[i], err = normalizeTool(raw); err != nil {
			return nil, fmt.Errorf("tool %d: %w", i, err)
		}
	}
	return joinArray(tools), nil
}

// optionalBool sets *dst from a JSON bool; null leaves it.
func optionalBool(v gjson.Result, what string, dst *bool) error {
	switch v.Type {
	case gjson.Null:
	case gjson.True, gjson.False:
		*dst = v.Bool()
	default:
		return fmt.Errorf("%s is not a boolean", what)
	}
	return nil
}

// kwargs reads chat_template_kwargs, leaving out the variables the
// template's own arguments set.
func kwargs(v gjson.Result) (map[string]any, error) {
	if v.Type == gjson.Null {
		return nil, nil
	}
	if !v.IsObject() {
		return nil, errors.New("chat_template_kwargs is not an object")
	}
	var out map[string]any
	v.ForEach(func(k, val gjson.Result) bool {
		if !reserved[k.Str] {
			if out == nil {
				out = map[string]any{}
			}
			out[k.Str] = json.RawMessage(val.Raw)
		}
		return true
	})
	return out, nil
}

// NormalizeMessage converts one message as RequestInput does.
func NormalizeMessage(raw json.RawMessage) (json.RawMessage, error) { return normalizeMessage(raw) }

// JoinMessages makes Input.Messages from normalised messages.
func JoinMessages(msgs []json.RawMessage) json.RawMessage { return joinArray(msgs) }

// normalizeMessage rebuilds one message as vLLM's parse_chat_messages does.
func normalizeMessage(raw json.RawMessage) (json.RawMessage, error) {
	f, err := orderedFields(raw)
	if err != nil {
		return nil, err
	}
	var role string
	if json.Unmarshal(f.get("role"), &role) != nil || role == "" {
		return nil, errors.New("missing role")
	}
	content, err := contentText(f.get("content"))
	if err != nil {
		return nil, err
	}
	out := fields{{"role", f.get("role")}, {"content", mustJSON(content)}}
	switch role {
	case "assistant":
		if calls := f.get("tool_calls"); len(calls) > 0 && string(calls) != "null" {
			norm, keep, err := normalizeToolCalls(calls)
			if err != nil {
				return nil, err
			}
			if keep {
				out = append(out, field{"tool_calls", norm})
			}
		}
		reasoning := f.get("reasoning")
		if len(reasoning) == 0 || string(reasoning) == "null" {
			reasoning = f.get("reasoning_content")
		}
		if len(reasoning) > 0 && string(reasoning) != "null" {
			out = append(out, field{"reasoning", reasoning}, field{"reasoning_content", reasoning})
		}
	case "tool":
		if id := f.get("tool_call_id"); id != nil {
			out = append(out, field{"tool_call_id", id})
		}
	}
	var name string
	if json.Unmarshal(f.get("name"), &name) == nil && f.get("name") != nil {
		out = append(out, field{"name", f.get("name")})
	}
	return out.marshal(), nil
}

// contentText flattens string or array-of-text-parts content.
func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content is neither a string nor an array of parts: %w", err)
	}
	texts := make([]string, 0, len(parts))
	for j, p := range parts {
		if p.Type != "text" || p.Text == nil {
			return "", fmt.Errorf("content part %d: type %q is not supported (text only)", j, p.Type)
		}
		texts = append(texts, *p.Text)
	}
	return strings.Join(texts, "\n"), nil
}

// normalizeToolCalls parses each call's function.arguments into an object;
// keep is false for an empty list.
func normalizeToolCalls(raw json.RawMessage) (json.RawMessage, bool, error) {
	var calls []json.RawMessage
	if err := json.Unmarshal(raw, &calls); err != nil {
		return nil, false, errors.New("tool_calls is not a list")
	}
	if len(calls) == 0 {
		return nil, false, nil
	}
	out := make([]json.RawMessage, len(calls))
	for i, c := range calls {
		call, err := orderedFields(c)
		if err != nil {
			return nil, false, fmt.Errorf("tool call %d: assistant tool_calls entries must be objects", i)
		}
		var typ string
		if t := call.get("type"); t != nil && (json.Unmarshal(t, &typ) != nil || typ != "function") {
			return nil, false, fmt.Errorf("tool call %d: chat completions only support assistant tool_calls of type 'function'", i)
		}
		fn, err := orderedFields(call.get("function"))
		if err != nil {
			return nil, false, fmt.Errorf("tool call %d: function must be an object", i)
		}
		fn = fn.set("arguments", argumentsObject(fn.get("arguments")))
		out[i] = call.set("function", fn.marshal()).marshal()
	}
	return joinArray(out), true, nil
}

// argumentsObject is vLLM's reading of tool-call arguments: an object as
// it is, a JSON string holding an object parsed, anything else {}.
func argumentsObject(raw json.RawMessage) json.RawMessage {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = json.RawMessage(s)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '{' && json.Valid(raw) {
		return raw
	}
	return json.RawMessage("{}")
}

// normalizeTool rebuilds a tool in vLLM's model_dump() field order.
func normalizeTool(raw json.RawMessage) (json.RawMessage, error) {
	top, err := orderedFields(raw)
	if err != nil {
		return nil, err
	}
	fn, err := orderedFields(top.get("function"))
	if err != nil {
		return nil, fmt.Errorf("function: %w", err)
	}
	var name string
	if json.Unmarshal(fn.get("name"), &name) != nil {
		return nil, errors.New("function.name must be a string")
	}
	typ := top.get("type")
	if typ == nil {
		typ = json.RawMessage(`"function"`)
	}
	fnOut := fn.reorder([]string{"name", "description", "parameters"})
	return fields{{"type", typ}, {"function", fnOut.marshal()}}.merge(top).marshal(), nil
}

func joinArray(items []json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, it := range items {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(it)
	}
	buf.WriteByte(']')
	return buf.Bytes()
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// field is one key/value of a JSON object.
type field struct {
	key string
	val json.RawMessage
}

// fields is a JSON object with its key order kept.
type fields []field

// orderedFields parses a JSON object keeping key order (a repeated key
// keeps its first place and its last value, as Python's json.loads).
func orderedFields(raw json.RawMessage) (fields, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not a JSON object")
	}
	var out fields
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = out.set(k.(string), v)
	}
	return out, nil
}

// get returns the value of key, nil when absent.
func (fs fields) get(key string) json.RawMessage {
	for _, f := range fs {
		if f.key == key {
			return f.val
		}
	}
	return nil
}

// set replaces key's value in place or appends it.
func (fs fields) set(key string, val json.RawMessage) fields {
	for i := range fs {
		if fs[i].key == key {
			out := append(fields(nil), fs...)
			out[i].val = val
			return out
		}
	}
	return append(fs, field{key, val})
}

// reorder puts keys first (null when absent), then the other fields.
func (fs fields) reorder(keys []string) fields {
	out := make(fields, 0, len(fs)+len(keys))
	for _, k := range keys {
		v := fs.get(k)
		if v == nil {
			v = json.RawMessage("null")
		}
		out = append(out, field{key: k, val: v})
	}
	return out.merge(fs)
}

// merge appends the fields of other whose keys fs lacks.
func (fs fields) merge(other fields) fields {
	for _, f := range other {
		if fs.get(f.key) == nil {
			fs = append(fs, f)
		}
	}
	return fs
}

// marshal encodes the object.
func (fs fields) marshal() json.RawMessage {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, f := range fs {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(mustJSON(f.key))
		buf.WriteByte(':')
		buf.Write(f.val)
	}
	buf.WriteByte('}')
	return buf.Bytes()
}
