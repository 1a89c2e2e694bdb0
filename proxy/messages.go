package proxy

import (
	"bytes"
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/internal/jsonenc"
	"github.com/hone-rl/hone/internal/jsonwalk"
	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
)

// The Anthropic Messages API (POST /v1/messages), translated onto the
// engine's chat completions: system and content blocks become chat
// messages (text and images as content, tool_use blocks as tool calls,
// tool_result blocks as tool messages, thinking as reasoning_content),
// custom tools and the Anthropic-defined tools clients run become function
// tools, server tools are left out with a warning (messages_tools.go), and
// the answer, whole or streamed, becomes a Message or Anthropic's event
// sequence (messages_encode.go).
// POST /v1/messages/count_tokens translates the same way and asks the
// engine's /tokenize. Errors are Anthropic's {"type":"error","error":{...}}.

type messagesSurface struct{}

func (messagesSurface) label() string                                    { return "messages" }
func (messagesSurface) dialect() dialect                                 { return chatDialect }
func (messagesSurface) writeError(ctx *fasthttp.RequestCtx, e *apiError) { writeAnthropicError(ctx, e) }

func (messagesSurface) translate(_ *Server, owner string, body []byte) (*translation, *apiError) {
	req := gjson.ParseBytes(body)
	tr := &translation{path: "/v1/chat/completions"}
	chat, warns, err := messagesChatFrom(req, false, owner, (*anthBuilder).addConversation, &tr.in)
	if err != nil {
		return nil, err
	}
	enc := newMessagesEncoder(req.Get("model").String())
	enc.warns = warns
	tr.body, tr.enc = chat, enc
	return tr, nil
}

func badMessages(msg string) *apiError {
	return &apiError{400, "invalid_request_error", "invalid_request_error", clipTo(msg, maxEchoMessage), ""}
}

// messagesChat builds the engine's chat completions request from a Messages
// request. count is set for count_tokens, whose requests carry no
// max_tokens and never stream. owner is the caller's (anthToolsOf).
func messagesChat(req gjson.Result, count bool, owner string) ([]byte, *apiError) {
	chat, _, err := messagesChatWarn(req, count, owner)
	return chat, err
}

// messagesChatWarn is messagesChat with the warnings for X-Hone-Warning:
// what was left out of the engine's request.
func messagesChatWarn(doc gjson.Result, count bool, owner string) ([]byte, []string, *apiError) {
	return messagesChatFrom(doc, count, owner, (*anthBuilder).addConversation, nil)
}

// messagesChatFrom is messagesChatWarn with the conversation (system and
// messages) added by add (messages_ref_test.go passes gjson's reading) and,
// with in set, the request's inspection (marshalRequest).
func messagesChatFrom(doc gjson.Result, count bool, owner string,
	add func(b *anthBuilder, system, messages gjson.Result) *apiError, in *inspection) ([]byte, []string, *apiError) {
	req := readObject(doc)
	model := req.Get("model")
	if model.Type != gjson.String || model.String() == "" {
		return nil, nil, badMessages("model: Field required")
	}
	out := map[string]any{"model": model.String()}
	if !count {
		mt := req.Get("max_tokens")
		if !mt.Exists() {
			return nil, nil, badMessages("max_tokens: Field required")
		}
		n, ok := positiveInt(mt)
		if !ok {
			return nil, nil, badMessages("max_tokens: Input should be a positive integer")
		}
		out["max_tokens"] = n
	}
	b := &anthBuilder{calls: map[string]bool{}, skipped: map[string]int{}}
	if err := add(b, req.Get("system"), req.Get("messages")); err != nil {
		return nil, nil, err
	}
	out["messages"] = b.msgs
	if last := b.msgs[len(b.msgs)-1]; last.Role == "assistant" && len(last.ToolCalls) == 0 {
		// a final assistant message is a prefill: the model continues it
		out["continue_final_message"], out["add_generation_prompt"] = true, false
	}
	tools, err := anthToolsOf(req.Get("tools"), owner)
	if err != nil {
		return nil, nil, err
	}
	var warns []string
	if len(tools.chat) > 0 {
		out["tools"] = tools.json
	}
	if tc := req.Get("tool_choice"); tc.Exists() && tc.Type != gjson.Null {
		choice, parallel, err := anthToolChoice(tc)
		if err != nil {
			return nil, nil, err
		}
		if name := tc.Get("name").String(); tc.Get("type").String() == "tool" && tools.names[name] {
			choice = "auto"
			warns = append(warns, "tool_choice names '"+name+"', a tool left out of the engine's tools; auto used")
		}
		if len(tools.chat) > 0 { // engines refuse tool_choice without tools; Anthropic ignores it
			out["tool_choice"] = choice
			if parallel != nil {
				out["parallel_tool_calls"] = *parallel
			}
		}
	}
	for _, k := range []string{"temperature", "top_p"} {
		if v := req.Get(k); v.Exists() && v.Type != gjson.Null {
			if v.Type != gjson.Number {
				return nil, nil, badMessages(k + ": Input should be a valid number")
			}
			out[k] = json.RawMessage(v.Raw)
		}
	}
	if v := req.Get("top_k"); v.Exists() && v.Type != gjson.Null {
		n, ok := positiveInt(v)
		if !ok {
			return nil, nil, badMessages("top_k: Input should be a positive integer")
		}
		out["top_k"] = n
	}
	if v := req.Get("stop_sequences"); v.Exists() && v.Type != gjson.Null {
		stops := []string{}
		ok := v.IsArray()
		v.ForEach(func(_, s gjson.Result) bool {
			ok = ok && s.Type == gjson.String
			stops = append(stops, s.String())
			return ok
		})
		if !ok {
			return nil, nil, badMessages("stop_sequences: Input should be a list of strings")
		}
		if len(stops) > 0 {
			out["stop"] = stops
		}
	}
	if f := req.Get("output_config.format"); f.Get("type").String() == "json_schema" {
		out["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{
			"name": "output", "schema": rawOr(f.Get("schema"), "{}")}}
	}
	if !count && req.Get("stream").Bool() {
		out["stream"] = true
		out["stream_options"] = map[string]any{"include_usage": true}
	}
	body, merr := marshalRequest(out, in)
	if merr != nil {
		return nil, nil, badMessages("cannot build the engine request: " + merr.Error())
	}
	if w := leftOutWarning(tools.leftOut); w != "" {
		warns = append([]string{w}, warns...)
	}
	if len(b.skipped) > 0 {
		types := make([]string, 0, len(b.skipped))
		for t := range b.skipped {
			types = append(types, t)
		}
		sort.Strings(types)
		warns = append(warns, "content blocks left out (their tools are not the engine's): "+strings.Join(types, ", "))
	}
	return body, warns, nil
}

// positiveInt reads a JSON integer >= 1 (64.0 too, as the API's
// validation takes it).
func positiveInt(v gjson.Result) (int64, bool) {
	if v.Type != gjson.Number {
		return 0, false
	}
	f := v.Float()
	if f < 1 || f > 1<<53 || f != math.Trunc(f) {
		return 0, false
	}
	return int64(f), true
}

// anthBuilder turns Messages system and messages into chat messages. Every
// tool_result must answer a tool_use of an earlier assistant message. It
// reads the messages in one walk over their bytes (a coding agent's
// conversation is most of its call, sent again with every call):
// messages_ref_test.go keeps gjson's reading as the reference.
type anthBuilder struct {
	msgs    []chatMessage
	calls   map[string]bool // tool_use ids so far
	skipped map[string]int  // server tool blocks left out, by type
	blocks  []inBlock       // the message being added's, reused
}

// add appends m, whose content is in json.Marshal's form: every content
// the builder writes comes from contentString, jsonString or chatParts.
func (b *anthBuilder) add(m chatMessage) {
	m.encoded = true
	b.msgs = append(b.msgs, m)
}

// inMessage is an element of a request's messages as addMessages reads it.
type inMessage struct {
	object        bool
	role, content jval
	blocks        []inBlock // content's, when it is a list
}

// inBlock is a content block's members that a translation reads (the
// first of each name).
type inBlock struct {
	typ, text, thinking, id, name, input, toolUseID, content, source jval
}

// readBlock reads the block at the walk's position; a value that is not an
// object has no members.
func readBlock(w *jsonwalk.Walker) inBlock {
	var bl inBlock
	if w.At() != '{' {
		w.Skip()
		return bl
	}
	for key := range w.Members {
		switch key {
		case "type":
			setFirst(&bl.typ, w)
		case "text":
			setFirst(&bl.text, w)
		case "thinking":
			setFirst(&bl.thinking, w)
		case "id":
			setFirst(&bl.id, w)
		case "name":
			setFirst(&bl.name, w)
		case "input":
			setFirst(&bl.input, w)
		case "tool_use_id":
			setFirst(&bl.toolUseID, w)
		case "content":
			setFirst(&bl.content, w)
		case "source":
			setFirst(&bl.source, w)
		default:
			w.Skip()
		}
	}
	return bl
}

// readBlocks appends the blocks of the list at the walk's position to dst.
func readBlocks(w *jsonwalk.Walker, dst []inBlock) []inBlock {
	for range w.Elements {
		dst = append(dst, readBlock(w))
	}
	return dst
}

// blocksOf reads the blocks of the list v.
func blocksOf(v jval, dst []inBlock) []inBlock {
	w := jsonwalk.New(string(v))
	return readBlocks(&w, dst)
}

func (b *anthBuilder) addSystem(sys jval) *apiError {
	switch {
	case sys.isNull():
		return nil
	case sys.isString():
		if c := contentString(string(sys)); string(c) != `""` {
			b.add(chatMessage{Role: "system", Content: c})
		}
		return nil
	case sys.isArray():
		c, err := textOnly(blocksOf(sys, nil), "system")
		if err != nil {
			return err
		}
		if c != nil {
			b.add(chatMessage{Role: "system", Content: c})
		}
		return nil
	}
	return badMessages("system: Input should be a string or a list of text blocks")
}

// addConversation adds the system prompt and the messages.
func (b *anthBuilder) addConversation(system, messages gjson.Result) *apiError {
	if err := b.addSystem(jval(system.Raw)); err != nil {
		return err
	}
	return b.addMessages(jval(messages.Raw))
}

// addMessages adds the messages of the list msgs, each read as it is
// walked over.
func (b *anthBuilder) addMessages(msgs jval) *apiError {
	if !msgs.isArray() {
		return errNoMessages
	}
	w := jsonwalk.New(string(msgs))
	n := 0
	for i := range w.Elements {
		m := b.readMessage(&w)
		if err := b.addMessage(i, &m); err != nil {
			return err
		}
		n++
	}
	if w.Bad() {
		return errBadJSON
	}
	if n == 0 {
		return errNoMessages
	}
	return nil
}

var errNoMessages = badMessages("messages: Field required (a non-empty list)")

// readMessage reads the message at the walk's position: its role, and its
// content, whose blocks when it is a list are read in the same pass.
func (b *anthBuilder) readMessage(w *jsonwalk.Walker) inMessage {
	var m inMessage
	if w.At() != '{' {
		w.Skip()
		return m
	}
	m.object = true
	b.blocks = b.blocks[:0]
	for key := range w.Members {
		switch {
		case key == "role":
			setFirst(&m.role, w)
		case key == "content" && m.content == "" && w.At() == '[':
			start := w.Pos()
			b.blocks = readBlocks(w, b.blocks)
			m.content, m.blocks = jval(w.Doc()[start:w.Pos()]), b.blocks
		case key == "content":
			setFirst(&m.content, w)
		default:
			w.Skip()
		}
	}
	return m
}

func (b *anthBuilder) addMessage(i int, m *inMessage) *apiError {
	where := func() string { return "messages." + strconv.Itoa(i) }
	if !m.object {
		return badMessages(where() + ": Input should be an object")
	}
	role := m.role.String()
	if m.content.isString() {
		switch role {
		case "user", "assistant", "system":
			b.add(chatMessage{Role: role, Content: contentString(string(m.content))})
			return nil
		}
	} else if !m.content.isArray() {
		return badMessages(where() + ".content: Input should be a string or a list of content blocks")
	}
	switch role {
	case "user":
		return b.addUser(where, m.blocks)
	case "assistant":
		return b.addAssistant(where, m.blocks)
	case "system":
		content, err := textOnly(m.blocks, where()+".content")
		if err != nil {
			return err
		}
		if content == nil {
			content = jsonString("")
		}
		b.add(chatMessage{Role: "system", Content: content})
		return nil
	}
	return badMessages(where() + ".role: Input should be 'user' or 'assistant'")
}

// blockAt names a block in an error: where it is, then .content.<j>.
func blockAt(where func() string, j int) string {
	return where() + ".content." + strconv.Itoa(j)
}

// textOnly is the chat content of a list of text blocks (nil when empty).
func textOnly(blocks []inBlock, where string) (json.RawMessage, *apiError) {
	var parts chatParts
	for i := range blocks {
		if typ := blocks[i].typ.String(); typ != "text" {
			return nil, badMessages(where + "." + strconv.Itoa(i) + ": block type '" + typ + "' is not supported here (text only)")
		}
		parts.text(blocks[i].text)
	}
	if parts.n == 0 {
		return nil, nil
	}
	return parts.content(), nil
}

// addUser adds a user turn: its tool results first, as tool messages right
// after the assistant's tool calls (Anthropic puts tool_result blocks first
// in the turn), then its text and images as one user message.
func (b *anthBuilder) addUser(where func() string, blocks []inBlock) *apiError {
	var parts chatParts
	nMsgs := len(b.msgs)
	for j := range blocks {
		bl := &blocks[j]
		switch typ := bl.typ.String(); typ {
		case "text", "image":
			if err := parts.add(bl, func() string { return blockAt(where, j) }); err != nil {
				return err
			}
		case "tool_result":
			id := bl.toolUseID.String()
			if !b.calls[id] {
				return badMessages(blockAt(where, j) + ": unexpected `tool_use_id` found in `tool_result` blocks: " + id +
					". Each `tool_result` block must have a corresponding `tool_use` block in a previous message.")
			}
			content, err := toolResultContent(func() string { return blockAt(where, j) }, bl.content)
			if err != nil {
				return err
			}
			b.add(chatMessage{Role: "tool", ToolCallID: id, Content: content})
		default:
			if anthServerBlocks[typ] {
				b.skipped[typ]++
				continue
			}
			return badMessages(blockAt(where, j) + ": content block type '" + typ + "' is not supported by hone in a user message")
		}
	}
	if parts.n > 0 || len(b.msgs) == nMsgs {
		b.add(chatMessage{Role: "user", Content: parts.content()})
	}
	return nil
}

// chatParts builds chat content from text and image parts as json.Marshal
// writes a []map[string]any of them: a string for one text part, the list
// otherwise (engines join text parts with "\n", as for any chat request),
// "" for none.
type chatParts struct {
	n     int
	first jval   // the first part's text, while it is the only part
	list  []byte // the list so far, once there are two parts or an image
}

// text adds a text part with the text v.
func (p *chatParts) text(v jval) {
	if p.n == 0 {
		p.n, p.first = 1, v
		return
	}
	p.open()
	p.list = append(textContent(append(p.list, `{"text":`...), v), `,"type":"text"}`...)
}

// image adds an image part whose url is url.
func (p *chatParts) image(url string) {
	p.open()
	p.list = append(jsonenc.AppendString(append(p.list, `{"image_url":{"url":`...), url), `},"type":"image_url"}`...)
}

// open starts the list, with the first part when it was held back.
func (p *chatParts) open() {
	if p.list == nil {
		p.list = append(make([]byte, 0, 256), '[')
		if p.n == 1 {
			p.list = append(textContent(append(p.list, `{"text":`...), p.first), `,"type":"text"}`...)
		}
	}
	if p.n > 0 {
		p.list = append(p.list, ',')
	}
	p.n++
}

// content is the parts as chat content.
func (p *chatParts) content() json.RawMessage {
	switch {
	case p.list != nil:
		return append(p.list, ']')
	case p.n == 1:
		return textContent(nil, p.first)
	}
	return jsonString("")
}

// textContent appends the text v as a JSON string, as json.Marshal writes
// gjson's String of it.
func textContent(b []byte, v jval) []byte {
	if v.isString() {
		return append(b, contentString(string(v))...)
	}
	return jsonenc.AppendString(b, v.String())
}

// add adds a text or image block as a part.
func (p *chatParts) add(bl *inBlock, at func() string) *apiError {
	if bl.typ.String() == "text" {
		p.text(bl.text)
		return nil
	}
	src := bl.source
	switch typ := src.get("type").String(); typ {
	case "base64":
		p.image("data:" + src.get("media_type").String() + ";base64," + src.get("data").String())
	case "url":
		p.image(src.get("url").String())
	default:
		return badMessages(at() + ".source: image source type '" + typ + "' is not supported by hone (base64 or url)")
	}
	return nil
}

// toolResultContent is a tool_result's content (a string or text and image
// blocks) as chat content.
func toolResultContent(at func() string, c jval) (json.RawMessage, *apiError) {
	switch {
	case c.isNull():
		return jsonString(""), nil
	case c.isString():
		return contentString(string(c)), nil
	case !c.isArray():
		return nil, badMessages(at() + ".content: Input should be a string or a list of content blocks")
	}
	var parts chatParts
	blocks := blocksOf(c, nil)
	for k := range blocks {
		in := func() string { return at() + ".content." + strconv.Itoa(k) }
		switch typ := blocks[k].typ.String(); typ {
		case "text", "image":
			if err := parts.add(&blocks[k], in); err != nil {
				return nil, err
			}
		default:
			return nil, badMessages(in() + ": content block type '" + typ + "' is not supported by hone in a tool_result")
		}
	}
	return parts.content(), nil
}

// addAssistant adds an assistant turn: text as content, thinking as
// reasoning_content, tool_use blocks as tool calls. redacted_thinking is
// accepted and left out: its data is encrypted for another model.
func (b *anthBuilder) addAssistant(where func() string, blocks []inBlock) *apiError {
	var parts chatParts
	m := chatMessage{Role: "assistant"}
	for j := range blocks {
		bl := &blocks[j]
		switch typ := bl.typ.String(); typ {
		case "text":
			parts.text(bl.text)
		case "thinking":
			m.ReasoningContent += bl.thinking.String()
		case "redacted_thinking":
		case "tool_use":
			var tc chatToolCall
			tc.ID, tc.Type = bl.id.String(), "function"
			tc.Function.Name = bl.name.String()
			if tc.ID == "" || tc.Function.Name == "" {
				return badMessages(blockAt(where, j) + ": a tool_use block needs id and name")
			}
			tc.Function.Arguments = toolArguments(bl.input)
			b.calls[tc.ID] = true
			m.ToolCalls = append(m.ToolCalls, tc)
		default:
			if anthServerBlocks[typ] {
				b.skipped[typ]++
				continue
			}
			return badMessages(blockAt(where, j) + ": content block type '" + typ + "' is not supported by hone in an assistant message")
		}
	}
	if parts.n > 0 || len(m.ToolCalls) == 0 {
		m.Content = parts.content()
	}
	b.add(m)
	return nil
}

// toolArguments is the chat arguments string of a tool_use input: the
// input's JSON, compacted; a string input is the model's own arguments
// that were not a JSON object (see anthInput), passed back as they were.
func toolArguments(in jval) string {
	switch {
	case in.isNull():
		return "{}"
	case in.isString():
		return in.String()
	}
	var buf bytes.Buffer
	if json.Compact(&buf, []byte(in)) != nil {
		return string(in)
	}
	return buf.String()
}

// anthToolChoice maps tool_choice: auto, any (required), tool (a named
// function), none; disable_parallel_tool_use turns parallel tool calls off.
func anthToolChoice(tc gjson.Result) (any, *bool, *apiError) {
	var parallel *bool
	if d := tc.Get("disable_parallel_tool_use"); d.Exists() {
		p := !d.Bool()
		parallel = &p
	}
	switch tc.Get("type").String() {
	case "auto":
		return "auto", parallel, nil
	case "any":
		return "required", parallel, nil
	case "none":
		return "none", nil, nil
	case "tool":
		if name := tc.Get("name").String(); name != "" {
			return map[string]any{"type": "function", "function": map[string]any{"name": name}}, parallel, nil
		}
	}
	return nil, nil, badMessages("tool_choice: Input should be auto, any, tool (with a name) or none")
}

// anthropicErrorType is Anthropic's error type for an HTTP status.
func anthropicErrorType(status int) string {
	switch {
	case status == 401:
		return "authentication_error"
	case status == 402:
		return "billing_error"
	case status == 403:
		return "permission_error"
	case status == 404:
		return "not_found_error"
	case status == 413:
		return "request_too_large"
	case status == 429:
		return "rate_limit_error"
	case status == 503:
		return "overloaded_error"
	case status == 504:
		return "timeout_error"
	case status >= 500:
		return "api_error"
	}
	return "invalid_request_error"
}

// appendAnthropicError is an error body in Anthropic's shape.
func appendAnthropicError(b []byte, status int, msg string) []byte {
	b = append(b, `{"type":"error","error":{"type":"`...)
	b = append(b, anthropicErrorType(status)...)
	b = append(b, `","message":`...)
	b = append(b, jsonString(msg)...) // JSON's escapes (invalid UTF-8 becomes U+FFFD), not Go's
	return append(b, "}}"...)
}

// writeAnthropicError answers ctx with an Anthropic-style JSON error.
func writeAnthropicError(ctx *fasthttp.RequestCtx, e *apiError) {
	ctx.Response.Reset()
	ctx.SetStatusCode(e.status)
	ctx.SetContentType("application/json")
	ctx.SetBody(appendAnthropicError(nil, e.status, e.msg))
}

// handleCountTokens serves POST /v1/messages/count_tokens: the request is
// translated as for /v1/messages and tokenized by an engine serving the
// model (vLLM's /tokenize renders the chat template, tools included, as
// generation would). Nothing is captured.
func (s *Server) handleCountTokens(ctx *fasthttp.RequestCtx) {
	const label = "messages_count_tokens"
	fail := func(e *apiError) {
		writeAnthropicError(ctx, e)
		s.m.requests.WithLabelValues(label, strconv.Itoa(e.status)).Inc()
	}
	body := ctx.PostBody()
	if !jsonwalk.IsObject(body) {
		fail(errBadJSON)
		return
	}
	owner, _ := ctx.UserValue(ownerKey{}).(string)
	chat, aerr := messagesChat(gjson.ParseBytes(body), true, owner)
	if aerr != nil {
		fail(aerr)
		return
	}
	target := gjson.GetBytes(chat, "model").String()
	if p, release, ok := s.aliases.acquire(target); ok {
		target = p.Target
		release()
	}
	e := s.pool.pick(target, "", nil)
	if e == nil {
		fail(errNoEngine)
		return
	}
	tb, err := tokenizeBody(&capture.Call{Route: capture.RouteChat, Upstream: target, Request: chat})
	if err != nil {
		fail(badMessages("cannot build the tokenize request: " + err.Error()))
		return
	}
	st, reply, err := s.postTokenize(ctx, e, tb)
	if err != nil {
		s.log.Warn("count_tokens: engine /tokenize failed", "engine", e.url, "err", err)
		fail(errUnreachable)
		return
	}
	if st != 200 {
		msg := gjson.GetBytes(reply, "error.message").String()
		if msg == "" {
			msg = gjson.GetBytes(reply, "message").String()
		}
		if msg == "" {
			msg = "the engine could not tokenize the request (status " + strconv.Itoa(st) + ")"
		}
		if st < 400 {
			st = 502
		}
		fail(&apiError{status: st, msg: msg})
		return
	}
	rb := gjson.ParseBytes(reply)
	n := rb.Get("count").Int()
	if !rb.Get("count").Exists() {
		n = int64(len(rb.Get("tokens").Array()))
	}
	ctx.SetStatusCode(200)
	ctx.SetContentType("application/json")
	ctx.SetBody(strconv.AppendInt([]byte(`{"input_tokens":`), n, 10))
	ctx.Response.AppendBodyString("}")
	s.m.requests.WithLabelValues(label, "200").Inc()
}
