package proxy

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/tidwall/gjson"
)

// responsesEncoder turns the engine's chat completions answer into a
// Response object, or its stream into the Responses event sequence:
// response.created, response.in_progress, then per output item
// output_item.added, content_part.added, *.delta ..., *.done,
// content_part.done, output_item.done, and response.completed (or
// response.incomplete), each with its sequence_number. Output items come in
// the order the model wrote them: reasoning, message text, tool calls. A
// call of a namespaced tool is a function_call with the namespace and name
// the client declared; a call of a custom tool is a custom_tool_call whose
// input (the engine's "input" argument) is sent whole when the call ends.
type responsesEncoder struct {
	s      *Server
	owner  string // the client whose conversation this is
	echo   respRequest
	conv   []chatMessage // the conversation so far, for previous_response_id (nil unless echo.Store)
	ts     *respToolSet
	warns  []string // for X-Hone-Warning
	id     string
	create int64
	seq    int

	items    []*respItem // output items, in order
	open     *respItem   // the reasoning or message item receiving deltas
	tools    map[int]*respItem
	finish   string
	usage    gjson.Result
	started  bool
	finished bool
	// transient: capture skips the call's session, so its conversation is
	// kept in memory only (a skipped session stores no content)
	transient bool
}

func (e *responsesEncoder) admitted(captured bool) { e.transient = !captured }

// respItem is one output item being built.
type respItem struct {
	index  int
	kind   string // reasoning, message, function_call, custom_tool_call
	id     string
	callID string
	name   string     // the engine's function name
	tool   clientTool // the client's tool of that name
	text   []byte     // text, reasoning text or the engine's arguments
	closed bool
}

// warnings are what the translation left out, for X-Hone-Warning.
func (e *responsesEncoder) warnings() []string { return e.warns }

// toolItem adds the output item of an engine tool call.
func (e *responsesEncoder) toolItem(name string) *respItem {
	ct := e.ts.lookup(name)
	it := e.item(ct.callItem())
	it.name, it.tool = name, ct
	return it
}

func newResponsesEncoder(s *Server, owner string, echo respRequest, conv []chatMessage) *responsesEncoder {
	return &responsesEncoder{s: s, owner: owner, echo: echo, conv: conv, id: newID("resp_"), create: time.Now().Unix(),
		tools: map[int]*respItem{}}
}

// named makes the Response id from the call's: resp_<call id>.
func (e *responsesEncoder) named(callID string) string { e.id = "resp_" + callID; return e.id }

// body re-encodes a whole chat completion as a Response object.
func (e *responsesEncoder) body(chat []byte, status int) []byte {
	if status >= 400 {
		return chat // the engine's OpenAI-style error is the Responses API's too
	}
	doc := gjson.ParseBytes(chat)
	ch := doc.Get("choices.0")
	msg := ch.Get("message")
	if r := reasoningOf(msg); r != "" {
		e.item("reasoning").text = []byte(r)
	}
	if c := msg.Get("content"); c.String() != "" {
		e.item("message").text = []byte(c.String())
	}
	msg.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		it := e.toolItem(tc.Get("function.name").String())
		it.callID = tc.Get("id").String()
		if it.callID == "" {
			it.callID = newID("call_")
		}
		it.text = []byte(tc.Get("function.arguments").String())
		return true
	})
	e.finish, e.usage = ch.Get("finish_reason").String(), doc.Get("usage")
	for _, it := range e.items {
		it.closed = true
	}
	e.keep()
	out := marshalUnescaped(e.response(e.status()))
	return out
}

func reasoningOf(m gjson.Result) string {
	if r := m.Get("reasoning_content"); r.String() != "" {
		return r.String()
	}
	return m.Get("reasoning").String()
}

func (e *responsesEncoder) item(kind string) *respItem {
	prefix := map[string]string{"reasoning": "rs_", "message": "msg_", "function_call": "fc_", "custom_tool_call": "ctc_",
		"tool_search_call": "tsc_"}[kind]
	it := &respItem{index: len(e.items), kind: kind, id: newID(prefix)}
	e.items = append(e.items, it)
	return it
}

func (e *responsesEncoder) status() string {
	if e.finish == "length" {
		return "incomplete"
	}
	return "completed"
}

// event re-encodes one chat completion chunk.
func (e *responsesEncoder) event(chunk []byte) []byte {
	var out []byte
	if !e.started {
		e.started = true
		out = e.emit(out, "response.created", map[string]any{"response": e.response("in_progress")})
		out = e.emit(out, "response.in_progress", map[string]any{"response": e.response("in_progress")})
	}
	doc := gjson.ParseBytes(chunk)
	if u := doc.Get("usage"); u.IsObject() {
		e.usage = gjson.Parse(u.Raw)
	}
	ch := doc.Get("choices.0")
	if !ch.Exists() {
		return out
	}
	d := ch.Get("delta")
	if r := reasoningOf(d); r != "" {
		out = e.delta(out, "reasoning", r)
	}
	if c := d.Get("content"); c.String() != "" {
		out = e.delta(out, "message", c.String())
	}
	d.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		out = e.toolDelta(out, tc)
		return true
	})
	if f := ch.Get("finish_reason"); f.Exists() && f.Type != gjson.Null {
		e.finish = f.String()
	}
	return out
}

// delta appends text to the open reasoning or message item, opening it
// (and closing the other) first when needed.
func (e *responsesEncoder) delta(out []byte, kind, text string) []byte {
	if e.open == nil || e.open.kind != kind {
		out = e.closeOpen(out)
		e.open = e.item(kind)
		out = e.emit(out, "response.output_item.added", map[string]any{"output_index": e.open.index,
			"item": e.itemJSON(e.open, "in_progress")})
		out = e.emit(out, "response.content_part.added", e.partEvent(e.open, e.part(e.open, "")))
	}
	e.open.text = append(e.open.text, text...)
	typ := "response.output_text.delta"
	ev := map[string]any{"item_id": e.open.id, "output_index": e.open.index, "content_index": 0, "delta": text}
	if kind == "reasoning" {
		typ = "response.reasoning_text.delta"
	} else {
		ev["logprobs"] = []any{}
	}
	return e.emit(out, typ, ev)
}

// toolDelta opens a function call item for a new tool call index, or
// streams its argument fragment.
func (e *responsesEncoder) toolDelta(out []byte, tc gjson.Result) []byte {
	i := int(tc.Get("index").Int())
	it, ok := e.tools[i]
	if !ok {
		out = e.closeOpen(out)
		it = e.toolItem(tc.Get("function.name").String())
		it.callID = tc.Get("id").String()
		if it.callID == "" {
			it.callID = newID("call_")
		}
		e.tools[i] = it
		out = e.emit(out, "response.output_item.added", map[string]any{"output_index": it.index,
			"item": e.itemJSON(it, "in_progress")})
	}
	if a := tc.Get("function.arguments").String(); a != "" {
		it.text = append(it.text, a...)
		if it.kind == "function_call" { // a custom tool's input is sent whole at the end
			out = e.emit(out, "response.function_call_arguments.delta", map[string]any{"item_id": it.id,
				"output_index": it.index, "delta": a})
		}
	}
	return out
}

// closeOpen ends the open reasoning or message item.
func (e *responsesEncoder) closeOpen(out []byte) []byte {
	it := e.open
	if it == nil {
		return out
	}
	e.open = nil
	return e.closeItem(out, it)
}

func (e *responsesEncoder) closeItem(out []byte, it *respItem) []byte {
	if it.closed {
		return out
	}
	it.closed = true
	switch it.kind {
	case "function_call":
		out = e.emit(out, "response.function_call_arguments.done", map[string]any{"item_id": it.id,
			"output_index": it.index, "name": it.tool.name, "arguments": string(it.text)})
	case "custom_tool_call":
		in := customInput(string(it.text))
		if in != "" {
			out = e.emit(out, "response.custom_tool_call_input.delta", map[string]any{"item_id": it.id,
				"output_index": it.index, "delta": in})
		}
		out = e.emit(out, "response.custom_tool_call_input.done", map[string]any{"item_id": it.id,
			"output_index": it.index, "input": in})
	case "tool_search_call": // its arguments come whole in output_item.done
	case "reasoning":
		out = e.emit(out, "response.reasoning_text.done", map[string]any{"item_id": it.id, "output_index": it.index,
			"content_index": 0, "text": string(it.text)})
		out = e.emit(out, "response.content_part.done", e.partEvent(it, e.part(it, string(it.text))))
	default:
		out = e.emit(out, "response.output_text.done", map[string]any{"item_id": it.id, "output_index": it.index,
			"content_index": 0, "text": string(it.text), "logprobs": []any{}})
		out = e.emit(out, "response.content_part.done", e.partEvent(it, e.part(it, string(it.text))))
	}
	return e.emit(out, "response.output_item.done", map[string]any{"output_index": it.index,
		"item": e.itemJSON(it, "completed")})
}

// end closes every item and sends the final response.
func (e *responsesEncoder) end() []byte {
	var out []byte
	if !e.started {
		out = e.event([]byte(`{}`))
	}
	out = e.closeOpen(out)
	for _, it := range e.items {
		out = e.closeItem(out, it)
	}
	e.finished = true
	e.keep()
	st := e.status()
	typ := "response.completed"
	if st == "incomplete" {
		typ = "response.incomplete"
	}
	return e.emit(out, typ, map[string]any{"response": e.response(st)})
}

// fail sends the API's error event (ResponseErrorEvent).
func (e *responsesEncoder) fail(msg string) []byte {
	return e.emit(nil, "error", map[string]any{"code": "server_error", "message": msg, "param": nil})
}

func (e *responsesEncoder) part(it *respItem, text string) map[string]any {
	if it.kind == "reasoning" {
		return map[string]any{"type": "reasoning_text", "text": text}
	}
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
}

func (e *responsesEncoder) partEvent(it *respItem, part map[string]any) map[string]any {
	return map[string]any{"item_id": it.id, "output_index": it.index, "content_index": 0, "part": part}
}

// itemJSON is an output item as the API shows it.
func (e *responsesEncoder) itemJSON(it *respItem, status string) map[string]any {
	switch it.kind {
	case "tool_search_call":
		args := json.RawMessage("{}")
		if a := gjson.ParseBytes(it.text); status == "completed" && a.IsObject() {
			args = json.RawMessage(a.Raw)
		}
		return map[string]any{"type": it.kind, "id": it.id, "call_id": it.callID, "execution": "client",
			"arguments": args, "status": status}
	case "function_call", "custom_tool_call":
		m := map[string]any{"type": it.kind, "id": it.id, "call_id": it.callID, "name": it.tool.name, "status": status}
		if it.kind == "function_call" {
			m["arguments"] = string(it.text)
		} else if status == "completed" {
			m["input"] = customInput(string(it.text))
		} else {
			m["input"] = ""
		}
		if it.tool.namespace != "" {
			m["namespace"] = it.tool.namespace
		}
		return m
	case "reasoning":
		content := []any{}
		if status == "completed" {
			content = append(content, e.part(it, string(it.text)))
		}
		return map[string]any{"type": "reasoning", "id": it.id, "summary": []any{}, "content": content}
	}
	content := []any{}
	if status == "completed" {
		content = append(content, e.part(it, string(it.text)))
	}
	return map[string]any{"type": "message", "id": it.id, "status": status, "role": "assistant", "content": content}
}

// response is the Response object at a status.
func (e *responsesEncoder) response(status string) map[string]any {
	output := []any{}
	if status != "in_progress" {
		for _, it := range e.items {
			output = append(output, e.itemJSON(it, "completed"))
		}
	}
	r := map[string]any{"id": e.id, "object": "response", "created_at": e.create, "status": status, "error": nil,
		"incomplete_details": nil, "instructions": e.echo.Instructions, "max_output_tokens": e.echo.MaxOutputTokens,
		"model": e.echo.Model, "output": output, "parallel_tool_calls": e.echo.ParallelToolCalls,
		"previous_response_id": e.echo.PreviousResponseID, "reasoning": e.echo.Reasoning,
		"store": e.echo.Store, "temperature": e.echo.Temperature, "text": e.echo.Text, "tool_choice": e.echo.ToolChoice,
		"tools": e.echo.Tools, "top_p": e.echo.TopP, "truncation": "disabled", "usage": nil, "user": e.echo.User,
		"metadata": e.echo.Metadata}
	if status == "incomplete" {
		r["incomplete_details"] = map[string]any{"reason": "max_output_tokens"}
	}
	if status != "in_progress" && e.usage.IsObject() {
		in, out := e.usage.Get("prompt_tokens").Int(), e.usage.Get("completion_tokens").Int()
		r["usage"] = map[string]any{"input_tokens": in,
			"input_tokens_details":  map[string]any{"cached_tokens": e.usage.Get("prompt_tokens_details.cached_tokens").Int()},
			"output_tokens":         out,
			"output_tokens_details": map[string]any{"reasoning_tokens": e.usage.Get("completion_tokens_details.reasoning_tokens").Int()},
			"total_tokens":          in + out}
	}
	return r
}

// emit appends one SSE event: "event: TYPE" and its data with type and
// sequence_number.
func (e *responsesEncoder) emit(out []byte, typ string, ev map[string]any) []byte {
	b := marshalUnescaped(ev)
	out = append(out, "event: "...)
	out = append(out, typ...)
	// type and sequence_number first, as OpenAI writes them
	out = append(out, "\ndata: {\"type\":"...)
	out = strconv.AppendQuote(out, typ)
	out = append(out, `,"sequence_number":`...)
	out = strconv.AppendInt(out, int64(e.seq), 10)
	e.seq++
	if len(b) > 2 {
		out = append(out, ',')
	}
	out = append(out, b[1:]...)
	return append(out, "\n\n"...)
}

// keep stores the conversation with this response's output, for a
// follow-up that names it in previous_response_id.
func (e *responsesEncoder) keep() {
	if !e.echo.Store {
		return
	}
	m := chatMessage{Role: "assistant"}
	for _, it := range e.items {
		switch it.kind {
		case "reasoning":
			m.ReasoningContent += string(it.text)
		case "message":
			m.Content = jsonString(string(it.text))
		case "function_call", "custom_tool_call", "tool_search_call":
			var tc chatToolCall
			tc.ID, tc.Type, tc.Function.Name, tc.Function.Arguments = it.callID, "function", it.name, string(it.text)
			m.ToolCalls = append(m.ToolCalls, tc)
		}
	}
	if m.Content == nil && len(m.ToolCalls) == 0 {
		m.Content = jsonString("")
	}
	b, err := appendChatMessages(nil, append(slices.Clip(e.conv), m))
	if err == nil {
		e.s.responses.put(e.owner, e.id, b, e.transient)
	}
	for _, it := range e.items { // what an item_reference to it stands for
		if b, err := json.Marshal(e.itemJSON(it, "completed")); err == nil {
			e.s.responses.put(e.owner, it.id, b, e.transient)
		}
	}
}
