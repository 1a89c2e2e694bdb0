package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/hone-rl/hone/model/chat"
	"github.com/tidwall/gjson"
)

// Forced tool calls in continuity mode tokens: tool_choice "required" or a
// named function, done on /v1/completions as vLLM 0.32's chat endpoint does
// them with its JSON tool-call parsing (vllm/tool_parsers/utils.py
// get_json_schema_from_tools, vllm/parser/abstract_parser.py
// _extract_tool_calls): the token-id request carries structured_outputs
// {"json": schema}, the schema an array (at least one item, at most one when
// parallel_tool_calls is false) of {"name": one of the tools, "parameters":
// its parameters schema} for required, the named function's parameters
// schema for a named one (a missing or empty schema: any object); the
// output becomes tool calls: for required the array's items, arguments
// re-serialised as Python's json.dumps(parameters, ensure_ascii=False);
// for named the output itself as the arguments. The message's content is
// "" (vLLM's `content or ""`), the finish reason "tool_calls" for required
// when the engine stopped, the engine's otherwise (named: "stop").
//
// vLLM 0.32 by default (VLLM_ENFORCE_STRICT_TOOL_CALLING=1, hermes tool
// parser) constrains the chat endpoint's forced calls with a structural tag
// in the hermes format instead; the token-id path samples the JSON form, so
// the text sampled differs from what that chat endpoint would sample (both
// are valid calls; the client sees the same shape of answer).

// forced is a plan's forced tool call.
type forced struct {
	named  string // the named function; "" for required
	schema []byte // structured_outputs.json
}

// forcedCall reads a covered request's forced tool call: nil when
// tool_choice does not force one; an error when tokens mode leaves the call
// to the chat endpoint (no tools, an unknown name). Streamed calls are
// covered by continuity_forced_stream.go.
func forcedCall(doc gjson.Result) (*forced, error) {
	tc := doc.Get("tool_choice")
	named := ""
	switch {
	case tc.Type == gjson.String && tc.Str == "required":
	case tc.IsObject() && tc.Get("function.name").Type == gjson.String:
		named = tc.Get("function.name").Str
	case tc.IsObject():
		return nil, errors.New("tool_choice " + tc.Raw)
	default:
		return nil, nil
	}
	tools := doc.Get("tools")
	if !tools.IsArray() || len(tools.Array()) == 0 {
		return nil, errors.New("forced tool call without tools")
	}
	params := func(t gjson.Result) string {
		p := t.Get("function.parameters")
		if !p.IsObject() || len(p.Map()) == 0 {
			return `{"type":"object","properties":{}}`
		}
		return p.Raw
	}
	if named != "" {
		for _, t := range tools.Array() {
			if t.Get("function.name").String() == named {
				return &forced{named: named, schema: []byte(params(t))}, nil
			}
		}
		return nil, errors.New("tool_choice names no tool of the request")
	}
	var b bytes.Buffer
	b.WriteString(`{"type":"array","minItems":1,"items":{"type":"object","anyOf":[`)
	defs := map[string]string{}
	var defOrder []string
	n := 0
	for _, t := range tools.Array() {
		if t.Get("type").Exists() && t.Get("type").String() != "function" {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		name, _ := json.Marshal(t.Get("function.name").String())
		p := params(t)
		if d := gjson.Get(p, "$defs"); d.IsObject() {
			// vLLM moves the tools' $defs to the top of the schema
			d.ForEach(func(k, v gjson.Result) bool {
				if old, ok := defs[k.Str]; ok && old != v.Raw {
					n = -1 << 30
					return false
				}
				if _, ok := defs[k.Str]; !ok {
					defOrder = append(defOrder, k.Str)
				}
				defs[k.Str] = v.Raw
				return true
			})
			p = withoutKey(p, "$defs")
		}
		b.WriteString(`{"properties":{"name":{"type":"string","enum":[`)
		b.Write(name)
		b.WriteString(`]},"parameters":`)
		b.WriteString(p)
		b.WriteString(`},"required":["name","parameters"]}`)
	}
	if n <= 0 {
		return nil, errors.New("forced tool call without function tools, or with conflicting $defs")
	}
	b.WriteString(`]}`)
	if doc.Get("parallel_tool_calls").Type == gjson.False {
		b.WriteString(`,"maxItems":1`)
	}
	if len(defOrder) > 0 {
		b.WriteString(`,"$defs":{`)
		for i, k := range defOrder {
			if i > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteByte(':')
			b.WriteString(defs[k])
		}
		b.WriteByte('}')
	}
	b.WriteByte('}')
	return &forced{schema: b.Bytes()}, nil
}

// withoutKey returns the JSON object obj without key k.
func withoutKey(obj, k string) string {
	var b strings.Builder
	b.WriteByte('{')
	gjson.Parse(obj).ForEach(func(key, v gjson.Result) bool {
		if key.Str == k {
			return true
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(key.Raw)
		b.WriteByte(':')
		b.WriteString(v.Raw)
		return true
	})
	b.WriteByte('}')
	return b.String()
}

// calls turns the constrained output (after any reasoning) into the tool
// calls vLLM's chat endpoint returns; id makes each call's id.
func (f *forced) calls(content *string, id func() string) []contToolCall {
	text := ""
	if content != nil {
		text = *content
	}
	if f.named != "" {
		if strings.TrimSpace(text) == "" {
			return nil
		}
		return []contToolCall{{ID: id(), Type: "function", Function: contFunction{Name: f.named, Arguments: text}}}
	}
	// pydantic's TypeAdapter(list[FunctionDefinition]).validate_json: a
	// list of objects with a string name and an object (or null/absent)
	// parameters; anything else gives no calls
	v := strings.TrimSpace(text)
	if !gjson.Valid(v) {
		return nil
	}
	arr := gjson.Parse(v)
	if !arr.IsArray() {
		return nil
	}
	var out []contToolCall
	for _, it := range arr.Array() {
		name, params := it.Get("name"), it.Get("parameters")
		if !it.IsObject() || name.Type != gjson.String || (params.Exists() && params.Type != gjson.Null && !params.IsObject()) {
			return nil
		}
		args := "null"
		if params.IsObject() {
			args = pyDumps(params)
		}
		out = append(out, contToolCall{ID: id(), Type: "function", Function: contFunction{Name: name.Str, Arguments: args}})
	}
	return out
}

// forcedFinish is vLLM's chat finish reason for a forced call: tool_calls
// for required when the engine stopped, else the engine's.
func (f *forced) finish(v gjson.Result) *string {
	if v.Type != gjson.String {
		return nil
	}
	s := v.Str
	if f.named == "" && s == "stop" {
		s = "tool_calls"
	}
	return &s
}

// forcedID makes a tool-call id as the engine's chat endpoint would:
// vLLM's "chatcmpl-tool-" and 16 hex digits, the embedded engine's "call_"
// ids.
func (p *plan) forcedID() string {
	if p.sentTo != nil && p.sentTo.kind == "embedded" {
		return chat.NewCallID()
	}
	return p.toolCallID("")
}

// pyDumps writes a JSON value as Python's json.dumps(ensure_ascii=False)
// writes what json.loads read from it: ", " and ": " separators, keys in
// order (a repeated key keeps its last value at its first place), integers
// as written, other numbers as Python's float repr, strings with only the
// escapes Python writes.
func pyDumps(v gjson.Result) string {
	var b strings.Builder
	pyWrite(&b, v)
	return b.String()
}

func pyWrite(b *strings.Builder, v gjson.Result) {
	switch {
	case v.IsObject():
		var keys []string
		vals := map[string]gjson.Result{}
		v.ForEach(func(k, val gjson.Result) bool {
			if _, ok := vals[k.Str]; !ok {
				keys = append(keys, k.Str)
			}
			vals[k.Str] = val
			return true
		})
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			pyString(b, k)
			b.WriteString(": ")
			pyWrite(b, vals[k])
		}
		b.WriteByte('}')
	case v.IsArray():
		b.WriteByte('[')
		for i, e := range v.Array() {
			if i > 0 {
				b.WriteString(", ")
			}
			pyWrite(b, e)
		}
		b.WriteByte(']')
	case v.Type == gjson.String:
		pyString(b, v.Str)
	case v.Type == gjson.Number:
		b.WriteString(pyNumber(v.Raw))
	case v.Type == gjson.True:
		b.WriteString("true")
	case v.Type == gjson.False:
		b.WriteString("false")
	default:
		b.WriteString("null")
	}
}

// pyNumber is how Python writes a JSON number it parsed: an integer as
// its digits, anything with a fraction or exponent as a float's repr.
func pyNumber(raw string) string {
	if !strings.ContainsAny(raw, ".eE") {
		if n, ok := strings.CutPrefix(raw, "-"); ok && strings.Trim(n, "0") == "" {
			return "0"
		}
		return raw
	}
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil || math.IsInf(f, 0) {
		if math.IsInf(f, 1) {
			return "Infinity"
		} else if math.IsInf(f, -1) {
			return "-Infinity"
		}
		return raw
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX, shortest
	i := strings.IndexByte(e, 'e')
	exp, _ := strconv.Atoi(e[i+1:])
	if exp >= -4 && exp < 16 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.ContainsAny(s, ".") {
			s += ".0"
		}
		return s
	}
	mant := e[:i]
	sign := "+"
	if exp < 0 {
		sign, exp = "-", -exp
	}
	es := strconv.Itoa(exp)
	if len(es) < 2 {
		es = "0" + es
	}
	return mant + "e" + sign + es
}

// pyString writes s quoted as Python's json.dumps(ensure_ascii=False).
func pyString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte("0123456789abcdef"[r>>4])
				b.WriteByte("0123456789abcdef"[r&15])
				continue
			}
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}
