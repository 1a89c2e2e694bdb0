package capture

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
)

// Message is one chat message of an export row's prompt or response: the
// list of {role, content} records verl's RL datasets hand to the chat
// template (RLHFDataset's prompt column, MultiTurnSFTDataset's messages),
// with the fields chat templates read for tool use and reasoning. Fields a
// message lacks are null in Parquet and absent in JSONL.
type Message struct {
	Role    string `json:"role" parquet:"role"`
	Content string `json:"content" parquet:"content"` // text parts joined with "\n", as vLLM does
	// ReasoningContent is the reasoning a message carried (reasoning_content
	// or reasoning).
	ReasoningContent string            `json:"reasoning_content,omitempty" parquet:"reasoning_content,optional"`
	Name             string            `json:"name,omitempty" parquet:"name,optional"`
	ToolCallID       string            `json:"tool_call_id,omitempty" parquet:"tool_call_id,optional"`
	ToolCalls        []MessageToolCall `json:"tool_calls,omitempty" parquet:"tool_calls,list"`
}

// MessageToolCall is an assistant message's call of a function, as the OpenAI API
// writes it (arguments: the JSON text the model produced).
type MessageToolCall struct {
	ID       string       `json:"id" parquet:"id"`
	Type     string       `json:"type" parquet:"type"`
	Function FunctionCall `json:"function" parquet:"function"`
}

// FunctionCall is the function part of a MessageToolCall.
type FunctionCall struct {
	Name      string `json:"name" parquet:"name"`
	Arguments string `json:"arguments" parquet:"arguments"`
}

// callMessages returns a call's request messages followed by its reply for
// one choice.
func callMessages(c *Call, choice int) []Message {
	var out []Message
	gjson.GetBytes(c.Request, "messages").ForEach(func(_, v gjson.Result) bool {
		out = append(out, parseMessage(v))
		return true
	})
	if choice < len(c.Choices) {
		ch := &c.Choices[choice]
		m := Message{Role: "assistant", Content: ch.Content, ReasoningContent: ch.Reasoning}
		for _, tc := range ch.ToolCalls {
			m.ToolCalls = append(m.ToolCalls, MessageToolCall{ID: tc.ID, Type: "function",
				Function: FunctionCall{Name: tc.Name, Arguments: tc.Arguments}})
		}
		out = append(out, m)
	}
	return out
}

// parseMessage reads one OpenAI chat message as the agent sent it.
func parseMessage(v gjson.Result) Message {
	m := Message{Role: member(v, "role").String(), Content: textContent(member(v, "content")),
		Name: member(v, "name").String(), ToolCallID: member(v, "tool_call_id").String()}
	for _, k := range []string{"reasoning_content", "reasoning"} {
		if r := member(v, k); r.Type == gjson.String {
			m.ReasoningContent = r.String()
			break
		}
	}
	member(v, "tool_calls").ForEach(func(_, tc gjson.Result) bool {
		typ := member(tc, "type").String()
		if typ == "" {
			typ = "function"
		}
		args := memberPath(tc, "function", "arguments")
		a := args.Raw // an object (some clients send one) stays its JSON text
		if args.Type == gjson.String {
			a = args.String()
		}
		m.ToolCalls = append(m.ToolCalls, MessageToolCall{ID: member(tc, "id").String(), Type: typ,
			Function: FunctionCall{Name: memberPath(tc, "function", "name").String(), Arguments: a}})
		return true
	})
	return m
}

// textContent is a message's text: the string, or the text parts of a list
// joined with "\n" (other parts, such as images, are left out); null is "".
func textContent(c gjson.Result) string {
	if !c.IsArray() {
		return c.String()
	}
	var texts []string
	c.ForEach(func(_, p gjson.Result) bool {
		if t := member(p, "type").String(); t == "text" || t == "input_text" {
			texts = append(texts, member(p, "text").String())
		}
		return true
	})
	return strings.Join(texts, "\n")
}

// engineTools writes a request's tools with their keys in the order vLLM
// renders them (its pydantic model_dump(): "type" then "function", whose
// "name", "description" and "parameters" come first; other keys follow in
// the agent's order), so a consumer's chat template over the exported tools
// gives the prompt the engine rendered (key order shows in the prompt: an
// agent that sends "strict" before "parameters" otherwise re-renders to other
// tokens). Values are unchanged; anything but an array of objects is kept
// as sent.
func engineTools(raw []byte) string {
	arr := gjson.ParseBytes(raw)
	if !arr.IsArray() {
		return string(raw)
	}
	var b strings.Builder
	b.WriteByte('[')
	n := 0
	arr.ForEach(func(_, t gjson.Result) bool {
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		if !t.IsObject() || !member(t, "function").IsObject() {
			b.WriteString(t.Raw)
			return true
		}
		typ := member(t, "type").Raw
		if typ == "" {
			typ = `"function"`
		}
		fn := orderedObject(member(t, "function"), "name", "description", "parameters")
		writeObject(&b, append([][2]string{{"type", typ}, {"function", fn}}, otherKeys(t, "type", "function")...))
		return true
	})
	b.WriteByte(']')
	return b.String()
}

// orderedObject writes an object with the given keys first (those present),
// then the others in their order.
func orderedObject(o gjson.Result, first ...string) string {
	var kv [][2]string
	for _, k := range first {
		if v := member(o, k); v.Exists() {
			kv = append(kv, [2]string{k, v.Raw})
		}
	}
	var b strings.Builder
	writeObject(&b, append(kv, otherKeys(o, first...)...))
	return b.String()
}

// otherKeys are an object's members but the named ones, in order; a
// repeated key once, where it first came, with its last value (as a Python
// dict holds what json.loads read, and renders it).
func otherKeys(o gjson.Result, skip ...string) [][2]string {
	var kv [][2]string
	o.ForEach(func(k, v gjson.Result) bool {
		key := k.String()
		if slices.Contains(skip, key) {
			return true
		}
		if i := slices.IndexFunc(kv, func(p [2]string) bool { return p[0] == key }); i >= 0 {
			kv[i][1] = v.Raw
			return true
		}
		kv = append(kv, [2]string{key, v.Raw})
		return true
	})
	return kv
}

func writeObject(b *strings.Builder, kv [][2]string) {
	b.WriteByte('{')
	for i, p := range kv {
		if i > 0 {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(p[0])
		b.Write(key)
		b.WriteByte(':')
		b.WriteString(p[1])
	}
	b.WriteByte('}')
}
