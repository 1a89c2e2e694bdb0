package capture

import (
	"encoding/json"
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
	m := Message{Role: v.Get("role").String(), Content: textContent(v.Get("content")),
		Name: v.Get("name").String(), ToolCallID: v.Get("tool_call_id").String()}
	for _, k := range []string{"reasoning_content", "reasoning"} {
		if r := v.Get(k); r.Type == gjson.String {
			m.ReasoningContent = r.String()
			break
		}
	}
	v.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		typ := tc.Get("type").String()
		if typ == "" {
			typ = "function"
		}
		args := tc.Get("function.arguments")
		a := args.Raw // an object (some clients send one) stays its JSON text
		if args.Type == gjson.String {
			a = args.String()
		}
		m.ToolCalls = append(m.ToolCalls, MessageToolCall{ID: tc.Get("id").String(), Type: typ,
			Function: FunctionCall{Name: tc.Get("function.name").String(), Arguments: a}})
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
		if t := p.Get("type").String(); t == "text" || t == "input_text" {
			texts = append(texts, p.Get("text").String())
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
		if !t.IsObject() || !t.Get("function").IsObject() {
			b.WriteString(t.Raw)
			return true
		}
		typ := t.Get("type").Raw
		if typ == "" {
			typ = `"function"`
		}
		fn := orderedObject(t.Get("function"), "name", "description", "parameters")
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
		if v := o.Get(gjson.Escape(k)); v.Exists() {
			kv = append(kv, [2]string{k, v.Raw})
		}
	}
	var b strings.Builder
	writeObject(&b, append(kv, otherKeys(o, first...)...))
	return b.String()
}

// otherKeys are an object's members but the named ones, in order.
func otherKeys(o gjson.Result, skip ...string) [][2]string {
	var kv [][2]string
	o.ForEach(func(k, v gjson.Result) bool {
		for _, s := range skip {
			if k.String() == s {
				return true
			}
		}
		kv = append(kv, [2]string{k.String(), v.Raw})
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
