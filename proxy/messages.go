package proxy

import (
	"bytes"
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/hone-rl/hone/capture"
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

func (messagesSurface) translate(_ *Server, _ string, body []byte) (*translation, *apiError) {
	req := gjson.ParseBytes(body)
	chat, warns, err := messagesChatWarn(req, false)
	if err != nil {
		return nil, err
	}
	enc := newMessagesEncoder(req.Get("model").String())
	enc.warns = warns
	return &translation{body: chat, path: "/v1/chat/completions", enc: enc}, nil
}

func badMessages(msg string) *apiError {
	return &apiError{400, "invalid_request_error", "invalid_request_error", clipTo(msg, maxEchoMessage), ""}
}

// messagesChat builds the engine's chat completions request from a Messages
// request. count is set for count_tokens, whose requests carry no
// max_tokens and never stream.
func messagesChat(req gjson.Result, count bool) ([]byte, *apiError) {
	chat, _, err := messagesChatWarn(req, count)
	return chat, err
}

// messagesChatWarn is messagesChat with the warnings for X-Hone-Warning:
// what was left out of the engine's request.
func messagesChatWarn(doc gjson.Result, count bool) ([]byte, []string, *apiError) {
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
	if err := b.addSystem(req.Get("system")); err != nil {
		return nil, nil, err
	}
	msgs := req.Get("messages")
	if !msgs.IsArray() || len(msgs.Array()) == 0 {
		return nil, nil, badMessages("messages: Field required (a non-empty list)")
	}
	var err *apiError
	i := 0
	msgs.ForEach(func(_, m gjson.Result) bool {
		err = b.addMessage(i, m)
		i++
		return err == nil
	})
	if err != nil {
		return nil, nil, err
	}
	out["messages"] = b.msgs
	if last := b.msgs[len(b.msgs)-1]; last.Role == "assistant" && len(last.ToolCalls) == 0 {
		// a final assistant message is a prefill: the model continues it
		out["continue_final_message"], out["add_generation_prompt"] = true, false
	}
	tools, err := anthTools(req.Get("tools"))
	if err != nil {
		return nil, nil, err
	}
	var warns []string
	if len(tools.chat) > 0 {
		out["tools"] = tools.chat
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
	body, merr := marshalRequest(out)
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
// tool_result must answer a tool_use of an earlier assistant message.
type anthBuilder struct {
	msgs    []chatMessage
	calls   map[string]bool // tool_use ids so far
	skipped map[string]int  // server tool blocks left out, by type
}

func (b *anthBuilder) addSystem(sys gjson.Result) *apiError {
	switch {
	case !sys.Exists() || sys.Type == gjson.Null:
		return nil
	case sys.Type == gjson.String:
		if sys.String() != "" {
			b.msgs = append(b.msgs, chatMessage{Role: "system", Content: contentString(sys)})
		}
		return nil
	case sys.IsArray():
		c, err := textOnly(sys, "system")
		if err != nil {
			return err
		}
		if c != nil {
			b.msgs = append(b.msgs, chatMessage{Role: "system", Content: c})
		}
		return nil
	}
	return badMessages("system: Input should be a string or a list of text blocks")
}

// textOnly is the chat content of a list of text blocks (nil when empty).
func textOnly(blocks gjson.Result, where string) (json.RawMessage, *apiError) {
	var parts []map[string]any
	var err *apiError
	i := 0
	blocks.ForEach(func(_, bl gjson.Result) bool {
		if typ := bl.Get("type").String(); typ != "text" {
			err = badMessages(where + "." + strconv.Itoa(i) + ": block type '" + typ + "' is not supported here (text only)")
			return false
		}
		parts = append(parts, map[string]any{"type": "text", "text": bl.Get("text").String()})
		i++
		return true
	})
	if err != nil || len(parts) == 0 {
		return nil, err
	}
	return partsContent(parts), nil
}

// partsContent is chat content for parts: a string for one text part, the
// parts otherwise (engines join text parts with "\n", as for any chat request).
func partsContent(parts []map[string]any) json.RawMessage {
	if len(parts) == 0 {
		return jsonString("")
	}
	if len(parts) == 1 && parts[0]["type"] == "text" {
		return jsonString(parts[0]["text"].(string))
	}
	b, _ := json.Marshal(parts)
	return b
}

func (b *anthBuilder) addMessage(i int, m gjson.Result) *apiError {
	where := "messages." + strconv.Itoa(i)
	if !m.IsObject() {
		return badMessages(where + ": Input should be an object")
	}
	role := m.Get("role").String()
	c := m.Get("content")
	if c.Type == gjson.String {
		switch role {
		case "user", "assistant", "system":
			b.msgs = append(b.msgs, chatMessage{Role: role, Content: contentString(c)})
			return nil
		}
	} else if !c.IsArray() {
		return badMessages(where + ".content: Input should be a string or a list of content blocks")
	}
	switch role {
	case "user":
		return b.addUser(where, c)
	case "assistant":
		return b.addAssistant(where, c)
	case "system":
		content, err := textOnly(c, where+".content")
		if err != nil {
			return err
		}
		if content == nil {
			content = jsonString("")
		}
		b.msgs = append(b.msgs, chatMessage{Role: "system", Content: content})
		return nil
	}
	return badMessages(where + ".role: Input should be 'user' or 'assistant'")
}

// addUser adds a user turn: its tool results first, as tool messages right
// after the assistant's tool calls (Anthropic puts tool_result blocks first
// in the turn), then its text and images as one user message.
func (b *anthBuilder) addUser(where string, blocks gjson.Result) *apiError {
	var parts []map[string]any
	var results []chatMessage
	var err *apiError
	j := 0
	blocks.ForEach(func(_, bl gjson.Result) bool {
		at := where + ".content." + strconv.Itoa(j)
		j++
		switch typ := bl.Get("type").String(); typ {
		case "text", "image":
			var p map[string]any
			if p, err = contentPart(at, bl); err == nil {
				parts = append(parts, p)
			}
		case "tool_result":
			id := bl.Get("tool_use_id").String()
			if !b.calls[id] {
				err = badMessages(at + ": unexpected `tool_use_id` found in `tool_result` blocks: " + id +
					". Each `tool_result` block must have a corresponding `tool_use` block in a previous message.")
				return false
			}
			var content json.RawMessage
			if content, err = toolResultContent(at, bl.Get("content")); err == nil {
				results = append(results, chatMessage{Role: "tool", ToolCallID: id, Content: content})
			}
		default:
			if anthServerBlocks[typ] {
				b.skipped[typ]++
				return true
			}
			err = badMessages(at + ": content block type '" + typ + "' is not supported by hone in a user message")
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	b.msgs = append(b.msgs, results...)
	if len(parts) > 0 || len(results) == 0 {
		b.msgs = append(b.msgs, chatMessage{Role: "user", Content: partsContent(parts)})
	}
	return nil
}

// contentPart turns a text or image block into a chat content part.
func contentPart(at string, bl gjson.Result) (map[string]any, *apiError) {
	if bl.Get("type").String() == "text" {
		return map[string]any{"type": "text", "text": bl.Get("text").String()}, nil
	}
	src := bl.Get("source")
	var url string
	switch src.Get("type").String() {
	case "base64":
		url = "data:" + src.Get("media_type").String() + ";base64," + src.Get("data").String()
	case "url":
		url = src.Get("url").String()
	default:
		return nil, badMessages(at + ".source: image source type '" + src.Get("type").String() +
			"' is not supported by hone (base64 or url)")
	}
	return map[string]any{"type": "image_url", "image_url": map[string]any{"url": url}}, nil
}

// toolResultContent is a tool_result's content (a string or text and image
// blocks) as chat content.
func toolResultContent(at string, c gjson.Result) (json.RawMessage, *apiError) {
	switch {
	case !c.Exists() || c.Type == gjson.Null:
		return jsonString(""), nil
	case c.Type == gjson.String:
		return contentString(c), nil
	case !c.IsArray():
		return nil, badMessages(at + ".content: Input should be a string or a list of content blocks")
	}
	var parts []map[string]any
	var err *apiError
	k := 0
	c.ForEach(func(_, bl gjson.Result) bool {
		in := at + ".content." + strconv.Itoa(k)
		k++
		switch typ := bl.Get("type").String(); typ {
		case "text", "image":
			var p map[string]any
			if p, err = contentPart(in, bl); err == nil {
				parts = append(parts, p)
			}
		default:
			err = badMessages(in + ": content block type '" + typ + "' is not supported by hone in a tool_result")
		}
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	return partsContent(parts), nil
}

// addAssistant adds an assistant turn: text as content, thinking as
// reasoning_content, tool_use blocks as tool calls. redacted_thinking is
// accepted and left out: its data is encrypted for another model.
func (b *anthBuilder) addAssistant(where string, blocks gjson.Result) *apiError {
	var parts []map[string]any
	m := chatMessage{Role: "assistant"}
	var err *apiError
	j := 0
	blocks.ForEach(func(_, bl gjson.Result) bool {
		at := where + ".content." + strconv.Itoa(j)
		j++
		switch typ := bl.Get("type").String(); typ {
		case "text":
			parts = append(parts, map[string]any{"type": "text", "text": bl.Get("text").String()})
		case "thinking":
			m.ReasoningContent += bl.Get("thinking").String()
		case "redacted_thinking":
		case "tool_use":
			var tc chatToolCall
			tc.ID, tc.Type = bl.Get("id").String(), "function"
			tc.Function.Name = bl.Get("name").String()
			if tc.ID == "" || tc.Function.Name == "" {
				err = badMessages(at + ": a tool_use block needs id and name")
				return false
			}
			tc.Function.Arguments = toolArguments(bl.Get("input"))
			b.calls[tc.ID] = true
			m.ToolCalls = append(m.ToolCalls, tc)
		default:
			if anthServerBlocks[typ] {
				b.skipped[typ]++
				return true
			}
			err = badMessages(at + ": content block type '" + typ + "' is not supported by hone in an assistant message")
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	if len(parts) > 0 || len(m.ToolCalls) == 0 {
		m.Content = partsContent(parts)
	}
	b.msgs = append(b.msgs, m)
	return nil
}

// toolArguments is the chat arguments string of a tool_use input: the
// input's JSON, compacted; a string input is the model's own arguments
// that were not a JSON object (see anthInput), passed back as they were.
func toolArguments(in gjson.Result) string {
	switch {
	case !in.Exists() || in.Type == gjson.Null:
		return "{}"
	case in.Type == gjson.String:
		return in.String()
	}
	var buf bytes.Buffer
	if json.Compact(&buf, []byte(in.Raw)) != nil {
		return in.Raw
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
	chat, aerr := messagesChat(gjson.ParseBytes(body), true)
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
