package proxy

import (
	"encoding/json"
	"math"
	"strings"

	"github.com/google/uuid"
	"github.com/hone-rl/hone/internal/jsonenc"
	"github.com/hone-rl/hone/internal/jsonwalk"
	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
)

// The OpenAI Responses API (POST /v1/responses), translated onto the
// engine's chat completions: input items become chat messages, tools become
// chat function tools (function, custom and namespace tools; tools the
// engine cannot run are left out with a warning: responses_tools.go), and
// the answer (whole or streamed) becomes a Response object or the Responses
// event sequence (responses_encode.go). previous_response_id is served from
// the conversations hone keeps (responses_store.go), so it works against
// engines that keep no state. Fields that only OpenAI's servers act on
// (include, prompt_cache_key, client_metadata, service_tier, reasoning
// settings, encrypted reasoning) are accepted and not sent to the engine.

type responsesSurface struct{}

func (responsesSurface) label() string                                    { return "responses" }
func (responsesSurface) dialect() dialect                                 { return chatDialect }
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
	Reasoning          json.RawMessage `json:"reasoning"`
	Text               json.RawMessage `json:"text"`
	User               json.RawMessage `json:"user"`
}

func badResponses(param, msg string) *apiError {
	return &apiError{400, "invalid_request_error", "invalid_value", clipTo(msg, maxEchoMessage), param}
}

// errChainTooLarge refuses a Responses call whose conversation (the one
// previous_response_id continues, the items it references, its input)
// exceeds proxy.max_body_bytes: each call of a chain would otherwise bring
// the whole conversation again, growing without bound.
var errChainTooLarge = &apiError{413, "invalid_request_error", "request_too_large",
	"the conversation with previous_response_id, referenced items and input exceeds the size limit (proxy.max_body_bytes)",
	"previous_response_id"}

// maxEchoMessage bounds an error message that quotes the request (a type,
// a role, a call id): a 1 MiB type is not sent back whole.
const maxEchoMessage = 512

func (responsesSurface) translate(s *Server, owner string, body []byte) (*translation, *apiError) {
	req := readObject(gjson.ParseBytes(body))
	echo := respRequest{Model: req.Get("model").String(), ParallelToolCalls: true, Store: true,
		Instructions: rawOr(req.Get("instructions"), "null"), MaxOutputTokens: rawOr(req.Get("max_output_tokens"), "null"),
		Temperature: rawOr(req.Get("temperature"), "1"), TopP: rawOr(req.Get("top_p"), "1"),
		ToolChoice: rawOr(req.Get("tool_choice"), `"auto"`), Metadata: rawOr(req.Get("metadata"), "{}"),
		Reasoning: rawOr(req.Get("reasoning"), `{"effort":null,"summary":null}`),
		Text:      rawOr(req.Get("text"), `{"format":{"type":"text"}}`), User: rawOr(req.Get("user"), "null")}
	if v := req.Get("parallel_tool_calls"); v.Exists() {
		echo.ParallelToolCalls = v.Bool()
	}
	if v := req.Get("store"); v.Exists() {
		echo.Store = v.Bool()
	}
	if echo.Model == "" {
		return nil, badResponses("model", "model is required")
	}
	tools := newRespToolSet()
	if err := tools.addList(req.Get("tools"), "tools"); err != nil {
		return nil, err
	}
	b := &chatBuilder{calls: map[string]bool{}, skipped: map[string]int{}, ts: tools,
		ref: func(id string) ([]byte, bool) { return s.responses.get(owner, id) }, refRoom: s.opts.MaxBodyBytes}
	if b.refRoom <= 0 {
		b.refRoom = math.MaxInt
	}
	if prev := req.Get("previous_response_id"); prev.Exists() && prev.Type != gjson.Null {
		id := prev.String()
		conv, ok := s.responses.get(owner, id)
		if !ok || len(conv) == 0 || conv[0] != '[' { // an output item's id names no conversation
			return nil, &apiError{404, "invalid_request_error", "previous_response_not_found",
				"Previous response with id '" + clip(id) + "' not found.", "previous_response_id"}
		}
		echo.PreviousResponseID = &id
		if b.refRoom -= len(conv); b.refRoom < 0 {
			return nil, errChainTooLarge
		}
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
	if t := req.Get("tools"); t.IsArray() {
		echo.Tools = json.RawMessage(t.Raw)
	} else {
		echo.Tools = json.RawMessage("[]")
	}
	chat, choiceWarn, err := chatRequest(req, echo, b, tools)
	if err != nil {
		return nil, err
	}
	if limit := s.opts.MaxBodyBytes; limit > 0 && len(chat) > limit {
		return nil, errChainTooLarge // what the engine would get: the conversation, references and input
	}
	var warns []string
	for _, w := range []string{leftOutWarning(tools.leftOut), skippedWarning(b.skipped), choiceWarn} {
		if w != "" {
			warns = append(warns, w)
		}
	}
	var conv []chatMessage
	if echo.Store {
		conv = b.msgs
	}
	enc := newResponsesEncoder(s, owner, echo, conv)
	enc.ts, enc.warns = tools, warns
	return &translation{body: chat, path: "/v1/chat/completions", enc: enc}, nil
}

func rawOr(v gjson.Result, def string) json.RawMessage {
	if !v.Exists() {
		return json.RawMessage(def)
	}
	return json.RawMessage(v.Raw)
}

// chatRequest assembles the engine's chat completions request; it returns
// a warning when tool_choice named a tool the engine is not offered.
func chatRequest(req object, echo respRequest, b *chatBuilder, ts *respToolSet) ([]byte, string, *apiError) {
	msgs := b.msgs
	if ins := req.Get("instructions"); ins.Exists() && ins.Type != gjson.Null {
		if ins.Type != gjson.String {
			return nil, "", badResponses("instructions", "instructions must be a string")
		}
		msgs = append([]chatMessage{{Role: "system", Content: contentString(ins.Raw), encoded: true}}, msgs...)
	}
	msgs = mergeLeadingSystem(msgs)
	out := map[string]any{"model": echo.Model, "messages": msgs}
	var choice any
	var keep map[string]bool
	warn := ""
	if tc := req.Get("tool_choice"); tc.Exists() && tc.Type != gjson.Null {
		var err *apiError
		if choice, keep, warn, err = ts.choice(tc); err != nil {
			return nil, "", err
		}
	}
	var tools []json.RawMessage
	for _, t := range ts.chat {
		if keep == nil || keep[t.name] {
			tools = append(tools, t.raw)
		}
	}
	if len(tools) > 0 { // engines refuse tool_choice without tools
		out["tools"] = tools
		if choice != nil {
			out["tool_choice"] = choice
		}
	}
	if v := req.Get("parallel_tool_calls"); v.Exists() && v.Type != gjson.Null {
		out["parallel_tool_calls"] = v.Bool()
	}
	for from, to := range map[string]string{"max_output_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p"} {
		if v := req.Get(from); v.Exists() && v.Type != gjson.Null {
			if v.Type != gjson.Number {
				return nil, "", badResponses(from, from+" must be a number")
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
	body, err := marshalRequest(out)
	if err != nil {
		return nil, "", badResponses("", "cannot build the engine request: "+err.Error())
	}
	return body, warn, nil
}

// mergeLeadingSystem joins the system messages that open a conversation
// (instructions, then developer and system items, as Codex sends several)
// into one, separated by a blank line: many chat templates take a single
// leading system message only. System messages later on stay as they are.
func mergeLeadingSystem(msgs []chatMessage) []chatMessage {
	n := 0
	for n < len(msgs) && msgs[n].Role == "system" && len(msgs[n].Content) > 0 && msgs[n].Content[0] == '"' { // compact JSON
		n++
	}
	if n < 2 {
		return msgs
	}
	parts := make([]string, n)
	for i := range parts {
		parts[i] = jsonwalk.AsString(string(msgs[i].Content))
	}
	merged := chatMessage{Role: "system", Content: jsonString(strings.Join(parts, "\n\n")), encoded: true}
	return append([]chatMessage{merged}, msgs[n:]...)
}

// chatMessage is one chat completions message.
type chatMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content,omitempty"`
	ReasoningContent string          `json:"reasoning_content,omitempty"`
	ToolCalls        []chatToolCall  `json:"tool_calls,omitempty"`
	ToolCallID       string          `json:"tool_call_id,omitempty"`
	// encoded says Content is already in json.Marshal's form (compact,
	// its strings as AppendString writes them): appendChatMessage copies it.
	encoded bool
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// jsonString is s as a JSON string, as json.Marshal writes it.
func jsonString(s string) json.RawMessage { return jsonenc.AppendString(nil, s) }

// chatBuilder turns Responses input items into chat messages: consecutive
// function calls join one assistant message (parallel tool calls), reasoning
// rides on the assistant message that follows it, and every tool result
// must answer a call made earlier in the conversation.
type chatBuilder struct {
	msgs      []chatMessage
	reasoning string          // reasoning text waiting for its assistant message
	calls     map[string]bool // call ids of the function calls so far
	ts        *respToolSet    // the request's tools; additional_tools and tool_search_output add to it
	skipped   map[string]int  // input items left out, by type
	// ref returns the output item an item_reference names, as hone sent it
	// (the agent's own earlier responses, kept with their conversations)
	ref func(id string) ([]byte, bool)
	// refs are the items referenced so far; refRoom the bytes their items
	// may still add (proxy.max_body_bytes in all: a few bytes of reference
	// stand for a whole answer)
	refs    map[string]bool
	refRoom int
}

// add appends m, whose content is in json.Marshal's form: every content
// the builder writes comes from contentString, jsonString or chatContent
// (a stored conversation's, read by addConversation, is not assumed so).
func (b *chatBuilder) add(m chatMessage) {
	m.encoded = true
	b.msgs = append(b.msgs, m)
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
		b.add(chatMessage{Role: "user", Content: contentString(in.Raw)})
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
		return b.addFunctionCall(it, flatToolName(it.Get("namespace").String(), it.Get("name").String()),
			it.Get("arguments").String())
	case "custom_tool_call":
		return b.addFunctionCall(it, flatToolName(it.Get("namespace").String(), it.Get("name").String()),
			customArguments(it.Get("input").String()))
	case "function_call_output", "custom_tool_call_output":
		id := it.Get("call_id").String()
		if !b.calls[id] {
			return badResponses("input", "No tool call found for function call output with call_id "+id+".")
		}
		out := it.Get("output")
		text := out.String()
		if out.IsArray() {
			text = joinTextParts(out)
		}
		b.add(chatMessage{Role: "tool", ToolCallID: id, Content: jsonString(text)})
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
		b.reasoning += strings.Join(parts, "\n") // encrypted_content is for OpenAI's models: left out
	case "item_reference":
		return b.addReference(it.Get("id").String())
	case "additional_tools":
		return b.ts.addList(it.Get("tools"), "input")
	case "tool_search_call", "tool_search_output":
		if it.Get("execution").String() == "server" { // OpenAI's own search: nothing the engine did
			b.skipped[typ]++
			return nil
		}
		if typ == "tool_search_call" {
			args := it.Get("arguments")
			a := args.Raw
			if args.Type == gjson.String {
				a = args.String()
			} else if !args.Exists() {
				a = "{}"
			}
			return b.addFunctionCall(it, "tool_search", a)
		}
		id := it.Get("call_id").String()
		if !b.calls[id] {
			return badResponses("input", "No tool call found for tool search output with call_id "+id+".")
		}
		loaded, err := b.ts.load(it.Get("tools"))
		if err != nil {
			return err
		}
		b.add(chatMessage{Role: "tool", ToolCallID: id, Content: jsonString(string(loaded))})
	default:
		if respSkippedItems[typ] {
			b.skipped[typ]++
			return nil
		}
		return badResponses("input", "input item type '"+typ+"' is not supported by hone")
	}
	return nil
}

// addReference adds the output item of an earlier response that id names,
// as the agent would have sent it back in full: the AI SDK's Responses
// provider sends its earlier answers as references unless store is false.
// An item hone does not keep (another owner's, expired, or of a response
// made with store false) is answered as OpenAI answers it.
func (b *chatBuilder) addReference(id string) *apiError {
	if b.refs[id] {
		return badResponses("input", "Duplicate item found with id "+clip(id)+".")
	}
	if b.refs == nil {
		b.refs = map[string]bool{}
	}
	b.refs[id] = true
	var item gjson.Result
	if raw, ok := b.ref(id); ok && id != "" {
		if b.refRoom -= len(raw); b.refRoom < 0 {
			return &apiError{413, "invalid_request_error", "request_too_large",
				"the items input references exceed the size limit (proxy.max_body_bytes)", "input"}
		}
		item = gjson.ParseBytes(raw)
	}
	if !item.IsObject() || item.Get("type").String() == "item_reference" {
		return &apiError{404, "invalid_request_error", "", "Item with id '" + clip(id) + "' not found. Items are not " +
			"persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input.",
			"input"}
	}
	return b.addItem(item)
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
	b.add(m)
	return nil
}

// addFunctionCall adds a function or custom tool call (name: the engine's
// function name, args: its arguments).
func (b *chatBuilder) addFunctionCall(it gjson.Result, name, args string) *apiError {
	var tc chatToolCall
	tc.ID, tc.Type = it.Get("call_id").String(), "function"
	tc.Function.Name, tc.Function.Arguments = name, args
	if tc.ID == "" || (it.Get("name").String() == "" && name != "tool_search") {
		return badResponses("input", "a "+it.Get("type").String()+" item needs call_id and name")
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
		return contentString(c.Raw), nil
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

func newID(prefix string) string {
	return prefix + strings.ReplaceAll(uuid.NewString(), "-", "")
}
