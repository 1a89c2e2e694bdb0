package proxy

import (
	"encoding/json"
	"strings"

	"github.com/google/uuid"
	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
)

// The OpenAI Responses API (POST /v1/responses), translated onto the
// engine's chat completions: input items become chat messages, function
// tools become chat tools, and the answer (whole or streamed) becomes a
// Response object or the Responses event sequence (responses_encode.go).
// previous_response_id is served from the conversations hone keeps
// (responses_store.go), so it works against engines that keep no state.

type responsesSurface struct{}

func (responsesSurface) label() string                                    { return "responses" }
func (responsesSurface) engineRoute() string                              { return "chat" }
func (responsesSurface) writeError(ctx *fasthttp.RequestCtx, e *apiError) { writeError(ctx, e) }

// respRequest is what the Response object echoes of the request.
type respRequest struct {
	Model              string          `json:"model"`
	Instructions       json.RawMessage `json:"instructions"`
	MaxOutputTokens    json.RawMessage `json:"max_output_tokens"`
	ParallelToolCalls  bool            `json:"parallel_tool_calls"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Store              bool            `json:"store"`
	Temperature        json.RawMessage `json:"temperature"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	Tools              json.RawMessage `json:"tools"`
	TopP               json.RawMessage `json:"top_p"`
	Metadata           json.RawMessage `json:"metadata"`
	Text               json.RawMessage `json:"text"`
	User               json.RawMessage `json:"user"`
}

func badResponses(param, msg string) *apiError {
	return &apiError{400, "invalid_request_error", "invalid_value", msg, param}
}

func (responsesSurface) translate(s *Server, owner string, body []byte) (*translation, *apiError) {
	req := gjson.ParseBytes(body)
	echo := respRequest{Model: req.Get("model").String(), ParallelToolCalls: true, Store: true,
		Instructions: rawOr(req.Get("instructions"), "null"), MaxOutputTokens: rawOr(req.Get("max_output_tokens"), "null"),
		Temperature: rawOr(req.Get("temperature"), "1"), TopP: rawOr(req.Get("top_p"), "1"),
		ToolChoice: rawOr(req.Get("tool_choice"), `"auto"`), Metadata: rawOr(req.Get("metadata"), "{}"),
		Text: rawOr(req.Get("text"), `{"format":{"type":"text"}}`), User: rawOr(req.Get("user"), "null")}
	if v := req.Get("parallel_tool_calls"); v.Exists() {
		echo.ParallelToolCalls = v.Bool()
	}
	if v := req.Get("store"); v.Exists() {
		echo.Store = v.Bool()
	}
	if echo.Model == "" {
		return nil, badResponses("model", "model is required")
	}
	b := &chatBuilder{calls: map[string]bool{}}
	if prev := req.Get("previous_response_id"); prev.Exists() && prev.Type != gjson.Null {
		id := prev.String()
		conv, ok := s.responses.get(owner, id)
		if !ok {
			return nil, &apiError{404, "invalid_request_error", "previous_response_not_found",
				"Previous response with id '" + id + "' not found.", "previous_response_id"}
		}
		echo.PreviousResponseID = &id
		if err := b.addConversation(conv); err != nil {
			return nil, err
		}
	}
	if err := b.addInput(req.Get("input")); err != nil {
		return nil, err
	}
	if len(b.msgs) == 0 {
		return nil, badResponses("input", "input is required")
	}
	tools, err := chatTools(req.Get("tools"))
	if err != nil {
		return nil, err
	}
	echo.Tools = tools.echo
	chat, err := chatRequest(req, echo, b, tools.chat)
	if err != nil {
		return nil, err
	}
	conv, _ := json.Marshal(b.msgs)
	enc := newResponsesEncoder(s, owner, echo, conv)
	return &translation{body: chat, path: "/v1/chat/completions", enc: enc}, nil
}

func rawOr(v gjson.Result, def string) json.RawMessage {
	if !v.Exists() {
		return json.RawMessage(def)
	}
	return json.RawMessage(v.Raw)
}

// chatRequest assembles the engine's chat completions request.
func chatRequest(req gjson.Result, echo respRequest, b *chatBuilder, tools []json.RawMessage) ([]byte, *apiError) {
	msgs := b.msgs
	if ins := req.Get("instructions"); ins.Exists() && ins.Type != gjson.Null {
		if ins.Type != gjson.String {
			return nil, badResponses("instructions", "instructions must be a string")
		}
		msgs = append([]chatMessage{{Role: "system", Content: jsonString(ins.String())}}, msgs...)
	}
	out := map[string]any{"model": echo.Model, "messages": msgs}
	if len(tools) > 0 {
		out["tools"] = tools
	}
	if tc := req.Get("tool_choice"); tc.Exists() {
		v, err := chatToolChoice(tc)
		if err != nil {
			return nil, err
		}
		out["tool_choice"] = v
	}
	if v := req.Get("parallel_tool_calls"); v.Exists() {
		out["parallel_tool_calls"] = v.Bool()
	}
	for from, to := range map[string]string{"max_output_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p"} {
		if v := req.Get(from); v.Exists() && v.Type != gjson.Null {
			if v.Type != gjson.Number {
				return nil, badResponses(from, from+" must be a number")
			}
			out[to] = json.RawMessage(v.Raw)
		}
	}
	if f := req.Get("text.format"); f.Exists() {
		switch f.Get("type").String() {
		case "json_schema":
			out["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{
				"name": f.Get("name").String(), "schema": json.RawMessage(rawOr(f.Get("schema"), "{}")),
				"strict": f.Get("strict").Bool()}}
		case "json_object":
			out["response_format"] = map[string]any{"type": "json_object"}
		}
	}
	if req.Get("stream").Bool() {
		out["stream"] = true
		out["stream_options"] = map[string]any{"include_usage": true}
	}
	body, err := json.Marshal(out)
	if err != nil {
		return nil, badResponses("", "cannot build the engine request: "+err.Error())
	}
	return body, nil
}

// chatMessage is one chat completions message.
type chatMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content,omitempty"`
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	ToolCalls        []chatToolCall  `json:"tool_calls,omitempty"`
	ToolCallID       string          `json:"tool_call_id,omitempty"`
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// chatBuilder turns Responses input items into chat messages: consecutive
// function calls join one assistant message (parallel tool calls), reasoning
// rides on the assistant message that follows it, and every tool result
// must answer a call made earlier in the conversation.
type chatBuilder struct {
	msgs      []chatMessage
	reasoning string          // reasoning text waiting for its assistant message
	calls     map[string]bool // call ids of the function calls so far
}

// addConversation starts from a stored conversation (chat messages).
func (b *chatBuilder) addConversation(conv []byte) *apiError {
	if err := json.Unmarshal(conv, &b.msgs); err != nil {
		return badResponses("previous_response_id", "stored conversation unreadable")
	}
	for _, m := range b.msgs {
		for _, tc := range m.ToolCalls {
			b.calls[tc.ID] = true
		}
	}
	return nil
}

func (b *chatBuilder) addInput(in gjson.Result) *apiError {
	switch {
	case in.Type == gjson.String:
		b.msgs = append(b.msgs, chatMessage{Role: "user", Content: jsonString(in.String())})
		return nil
	case in.IsArray():
		var err *apiError
		in.ForEach(func(_, item gjson.Result) bool {
			err = b.addItem(item)
			return err == nil
		})
		return err
	case !in.Exists():
		return nil
	}
	return badResponses("input", "input must be a string or a list of items")
}

func (b *chatBuilder) addItem(it gjson.Result) *apiError {
	if !it.IsObject() {
		return badResponses("input", "every input item must be an object")
	}
	typ := it.Get("type").String()
	if typ == "" && it.Get("role").Exists() {
		typ = "message"
	}
	switch typ {
	case "message":
		return b.addMessage(it)
	case "function_call":
		return b.addFunctionCall(it)
	case "function_call_output":
		id := it.Get("call_id").String()
		if !b.calls[id] {
			return badResponses("input", "No tool call found for function call output with call_id "+id+".")
		}
		out := it.Get("output")
		text := out.String()
		if out.IsArray() {
			text = joinTextParts(out)
		}
		b.msgs = append(b.msgs, chatMessage{Role: "tool", ToolCallID: id, Content: jsonString(text)})
	case "reasoning":
		var parts []string
		for _, key := range []string{"content", "summary"} {
			it.Get(key).ForEach(func(_, p gjson.Result) bool {
				parts = append(parts, p.Get("text").String())
				return true
			})
			if len(parts) > 0 {
				break
			}
		}
		b.reasoning += strings.Join(parts, "\n")
	default:
		return badResponses("input", "input item type '"+typ+"' is not supported by hone")
	}
	return nil
}

func (b *chatBuilder) addMessage(it gjson.Result) *apiError {
	role := it.Get("role").String()
	switch role {
	case "developer":
		role = "system"
	case "user", "system", "assistant":
	default:
		return badResponses("input", "message role '"+role+"' is not one of user, system, developer, assistant")
	}
	content, err := chatContent(it.Get("content"))
	if err != nil {
		return err
	}
	m := chatMessage{Role: role, Content: content}
	if role == "assistant" {
		m.ReasoningContent, b.reasoning = b.reasoning, ""
	}
	b.msgs = append(b.msgs, m)
	return nil
}

func (b *chatBuilder) addFunctionCall(it gjson.Result) *apiError {
	var tc chatToolCall
	tc.ID, tc.Type = it.Get("call_id").String(), "function"
	tc.Function.Name, tc.Function.Arguments = it.Get("name").String(), it.Get("arguments").String()
	if tc.ID == "" || tc.Function.Name == "" {
		return badResponses("input", "a function_call item needs call_id and name")
	}
	b.calls[tc.ID] = true
	if n := len(b.msgs); n > 0 && b.msgs[n-1].Role == "assistant" && b.reasoning == "" {
		b.msgs[n-1].ToolCalls = append(b.msgs[n-1].ToolCalls, tc)
		return nil
	}
	m := chatMessage{Role: "assistant", ToolCalls: []chatToolCall{tc}}
	m.ReasoningContent, b.reasoning = b.reasoning, ""
	b.msgs = append(b.msgs, m)
	return nil
}

// chatContent turns a Responses message content (a string or a list of
// parts) into chat content: a string when it is all text, else parts.
func chatContent(c gjson.Result) (json.RawMessage, *apiError) {
	if c.Type == gjson.String {
		return jsonString(c.String()), nil
	}
	if !c.IsArray() {
		return nil, badResponses("input", "message content must be a string or a list of parts")
	}
	var parts []map[string]any
	allText := true
	var err *apiError
	c.ForEach(func(_, p gjson.Result) bool {
		switch p.Get("type").String() {
		case "input_text", "output_text", "text", "refusal":
			parts = append(parts, map[string]any{"type": "text", "text": p.Get("text").String()})
		case "input_image":
			allText = false
			parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]any{"url": p.Get("image_url").String()}})
		default:
			err = badResponses("input", "content part type '"+p.Get("type").String()+"' is not supported by hone")
		}
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	if allText {
		return jsonString(joinTextParts(c)), nil
	}
	b, _ := json.Marshal(parts)
	return b, nil
}

func joinTextParts(parts gjson.Result) string {
	var sb strings.Builder
	parts.ForEach(func(_, p gjson.Result) bool {
		sb.WriteString(p.Get("text").String())
		return true
	})
	return sb.String()
}

type toolsOut struct {
	chat []json.RawMessage
	echo json.RawMessage
}

// chatTools turns Responses function tools into chat tools.
func chatTools(tools gjson.Result) (toolsOut, *apiError) {
	out := toolsOut{echo: json.RawMessage("[]")}
	if !tools.Exists() || tools.Type == gjson.Null {
		return out, nil
	}
	if !tools.IsArray() {
		return out, badResponses("tools", "tools must be a list")
	}
	out.echo = json.RawMessage(tools.Raw)
	var err *apiError
	tools.ForEach(func(_, t gjson.Result) bool {
		if t.Get("type").String() != "function" {
			err = badResponses("tools", "tool type '"+t.Get("type").String()+"' is not supported by hone (function tools only)")
			return false
		}
		fn := map[string]any{"name": t.Get("name").String(), "parameters": json.RawMessage(rawOr(t.Get("parameters"), "{}"))}
		if d := t.Get("description"); d.Exists() && d.Type != gjson.Null {
			fn["description"] = d.String()
		}
		b, _ := json.Marshal(map[string]any{"type": "function", "function": fn})
		out.chat = append(out.chat, b)
		return true
	})
	return out, err
}

func chatToolChoice(tc gjson.Result) (any, *apiError) {
	if tc.Type == gjson.String {
		switch tc.String() {
		case "auto", "none", "required":
			return tc.String(), nil
		}
	} else if tc.Get("type").String() == "function" && tc.Get("name").String() != "" {
		return map[string]any{"type": "function", "function": map[string]any{"name": tc.Get("name").String()}}, nil
	}
	return nil, badResponses("tool_choice", "tool_choice must be auto, none, required or a function")
}

func newID(prefix string) string {
	return prefix + strings.ReplaceAll(uuid.NewString(), "-", "")
}
