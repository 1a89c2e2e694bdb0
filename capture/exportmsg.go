package capture

import (
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
