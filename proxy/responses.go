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
	return translateInput(s, owner, body, (*chatBuilder).addInput)
}

// translateInput is the translation with the input added by add:
// responses_ref_test.go passes gjson's reading.
func translateInput(s *Server, owner string, body []byte, add func(*chatBuilder, gjson.Result) *apiError) (*translation, *apiError) {
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
	if err := add(b, req.Get("input")); err != nil {
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
	tr := &translation{path: "/v1/chat/completions"}
	chat, choiceWarn, err := chatRequest(req, echo, b, tools, &tr.in)
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
	tr.body, tr.enc = chat, enc
	return tr, nil
}

func rawOr(v gjson.Result, def string) json.RawMessage {
	if !v.Exists() {
		return json.RawMessage(def)
	}
	return json.RawMessage(v.Raw)
}

// chatRequest assembles the engine's chat completions request, read into
// in as it is written; it returns a warning when tool_choice named a tool
// the engine is not offered.
func chatRequest(req object, echo respRequest, b *chatBuilder, ts *respToolSet, in *inspection) ([]byte, string, *apiError) {
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
	body, err := marshalRequest(out, in)
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
		w := jsonwalk.New(in.Raw)
		for range w.Elements {
			it := readItem(&w)
			if err := b.addItem(&it); err != nil {
				return err
			}
		}
		return nil
	case !in.Exists():
		return nil
	}
	return badResponses("input", "input must be a string or a list of items")
}

// inItem is an input item's members that the translation reads (the
// first of each name), read in one pass: Codex sends its whole input with
// every call.
type inItem struct {
	object                                         bool
	typ, role, content, namespace, name, arguments jval
	input, callID, output, summary, id, tools      jval
	execution                                      jval
}

// readItem reads the item at the walk's position; a value that is not an
// object has no members.
func readItem(w *jsonwalk.Walker) inItem {
	var it inItem
	if w.At() != '{' {
		w.Skip()
		return it
	}
	it.object = true
	for key := range w.Members {
		if dst := it.member(key); dst != nil {
			setFirst(dst, w)
		} else {
			w.Skip()
		}
	}
	return it
}

// member is where readItem keeps the member named key (nil: not read).
func (it *inItem) member(key string) *jval {
	switch key {
	case "type":
		return &it.typ
	case "role":
		return &it.role
	case "content":
		return &it.content
	case "namespace":
		return &it.namespace
	case "name":
		return &it.name
	case "arguments":
		return &it.arguments
	case "input":
		return &it.input
	case "call_id":
		return &it.callID
	case "output":
		return &it.output
	case "summary":
		return &it.summary
	case "id":
		return &it.id
	case "tools":
		return &it.tools
	case "execution":
		return &it.execution
	}
	return nil
}

func (b *chatBuilder) addItem(it *inItem) *apiError {
	if !it.object {
		return badResponses("input", "every input item must be an object")
	}
	typ := it.typ.String()
	if typ == "" && it.role != "" {
		typ = "message"
	}
	switch typ {
	case "message":
		return b.addMessage(it)
	case "function_call":
		return b.addFunctionCall(it, flatToolName(it.namespace.String(), it.name.String()), it.arguments.String())
	case "custom_tool_call":
		return b.addFunctionCall(it, flatToolName(it.namespace.String(), it.name.String()), customArguments(it.input.String()))
	case "function_call_output", "custom_tool_call_output":
		id := it.callID.String()
		if !b.calls[id] {
			return badResponses("input", "No tool call found for function call output with call_id "+id+".")
		}
		b.add(chatMessage{Role: "tool", ToolCallID: id, Content: outputContent(it.output)})
	case "reasoning":
		b.reasoning += reasoningText(it) // encrypted_content is for OpenAI's models: left out
	case "item_reference":
		return b.addReference(it.id.String())
	case "additional_tools":
		return b.ts.addList(it.tools.result(), "input")
	case "tool_search_call", "tool_search_output":
		return b.addToolSearch(typ, it)
	default:
		if respSkippedItems[typ] {
			b.skipped[typ]++
			return nil
		}
		return badResponses("input", "input item type '"+typ+"' is not supported by hone")
	}
	return nil
}

// outputContent is a tool call output (a string, or a list of parts whose
// texts are joined) as chat content.
func outputContent(out jval) json.RawMessage {
	switch {
	case out.isString():
		return contentString(string(out))
	case out.isArray():
		return jsonString(joinTexts(out))
	}
	return jsonString(out.String())
}

// reasoningText is a reasoning item's text: its content's parts, or else
// its summary's, one per line.
func reasoningText(it *inItem) string {
	var parts []string
	for _, list := range []jval{it.content, it.summary} {
		if !list.isArray() { // lists of parts; a null content (Codex's) is none
			continue
		}
		w := jsonwalk.New(string(list))
		for range w.Elements {
			parts = append(parts, textOf(&w).String())
		}
		if len(parts) > 0 {
			break
		}
	}
	return strings.Join(parts, "\n")
}

// textOf reads the part at the walk's position and returns its text.
func textOf(w *jsonwalk.Walker) jval {
	var text jval
	if w.At() != '{' {
		w.Skip()
		return ""
	}
	for key := range w.Members {
		if key == "text" {
			setFirst(&text, w)
		} else {
			w.Skip()
		}
	}
	return text
}

// joinTexts joins the texts of a list of parts.
func joinTexts(parts jval) string {
	var sb strings.Builder
	w := jsonwalk.New(string(parts))
	for range w.Elements {
		sb.WriteString(textOf(&w).String())
	}
	return sb.String()
}

// addToolSearch adds a client-side tool search call (as a call of the
// tool_search function) or its output (the tools it loaded); OpenAI's own
// searches are left out.
func (b *chatBuilder) addToolSearch(typ string, it *inItem) *apiError {
	if it.execution.String() == "server" { // OpenAI's own search: nothing the engine did
		b.skipped[typ]++
		return nil
	}
	if typ == "tool_search_call" {
		a := string(it.arguments)
		if it.arguments.isString() {
			a = it.arguments.String()
		} else if it.arguments == "" {
			a = "{}"
		}
		return b.addFunctionCall(it, "tool_search", a)
	}
	id := it.callID.String()
	if !b.calls[id] {
		return badResponses("input", "No tool call found for tool search output with call_id "+id+".")
	}
	loaded, err := b.ts.load(it.tools.result())
	if err != nil {
		return err
	}
	b.add(chatMessage{Role: "tool", ToolCallID: id, Content: jsonString(string(loaded))})
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
	var it inItem
	if raw, ok := b.ref(id); ok && id != "" {
		if b.refRoom -= len(raw); b.refRoom < 0 {
			return &apiError{413, "invalid_request_error", "request_too_large",
				"the items input references exceed the size limit (proxy.max_body_bytes)", "input"}
		}
		w := jsonwalk.New(string(raw))
		it = readItem(&w)
	}
	if !it.object || it.typ.String() == "item_reference" {
		return &apiError{404, "invalid_request_error", "", "Item with id '" + clip(id) + "' not found. Items are not " +
			"persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input.",
			"input"}
	}
	return b.addItem(&it)
}

func (b *chatBuilder) addMessage(it *inItem) *apiError {
	role := it.role.String()
	switch role {
	case "developer":
		role = "system"
	case "user", "system", "assistant":
	default:
		return badResponses("input", "message role '"+role+"' is not one of user, system, developer, assistant")
	}
	content, err := chatContent(it.content)
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
func (b *chatBuilder) addFunctionCall(it *inItem, name, args string) *apiError {
	var tc chatToolCall
	tc.ID, tc.Type = it.callID.String(), "function"
	tc.Function.Name, tc.Function.Arguments = name, args
	if tc.ID == "" || (it.name.String() == "" && name != "tool_search") {
		return badResponses("input", "a "+it.typ.String()+" item needs call_id and name")
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
func chatContent(c jval) (json.RawMessage, *apiError) {
	if c.isString() {
		return contentString(string(c)), nil
	}
	if !c.isArray() {
		return nil, badResponses("input", "message content must be a string or a list of parts")
	}
	var parts []map[string]any
	var text strings.Builder
	var first jval // the first part's text
	allText := true
	w := jsonwalk.New(string(c))
	for range w.Elements {
		var p struct{ typ, text, url jval }
		if w.At() == '{' {
			for key := range w.Members {
				switch key {
				case "type":
					setFirst(&p.typ, &w)
				case "text":
					setFirst(&p.text, &w)
				case "image_url":
					setFirst(&p.url, &w)
				default:
					w.Skip()
				}
			}
		} else {
			w.Skip()
		}
		switch typ := p.typ.String(); typ {
		case "input_text", "output_text", "text", "refusal":
			parts = append(parts, map[string]any{"type": "text", "text": p.text.String()})
		case "input_image":
			allText = false
			parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]any{"url": p.url.String()}})
		default:
			return nil, badResponses("input", "content part type '"+typ+"' is not supported by hone")
		}
		if len(parts) == 1 {
			first = p.text
		}
		text.WriteString(p.text.String())
	}
	switch {
	case allText && len(parts) == 1 && first.isString():
		return contentString(string(first)), nil // the same bytes, without decoding and encoding again
	case allText:
		return jsonString(text.String()), nil
	}
	b, _ := json.Marshal(parts)
	return b, nil
}

func newID(prefix string) string {
	return prefix + strings.ReplaceAll(uuid.NewString(), "-", "")
}
