package proxy

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/tidwall/gjson"
)

// messagesEncoder turns the engine's chat completions answer into an
// Anthropic Message, or its stream into Anthropic's event sequence:
// message_start, ping, then per content block content_block_start,
// content_block_delta ..., content_block_stop, and message_delta (stop
// reason, usage) and message_stop. Blocks come in the order the model wrote
// them (thinking, text, tool_use ...); one block is open at a time, as in
// Anthropic's streams.
type messagesEncoder struct {
	model string // as the agent asked
	id    string
	warns []string // what the translation left out, for X-Hone-Warning

	blocks  []*anthBlock
	open    *anthBlock
	tools   map[int]*anthBlock // by the engine's tool call index
	finish  string
	stopStr *string // the stop string the engine matched (vLLM's stop_reason)
	usage   gjson.Result
	prompt  int64 // input tokens known at message_start
	started bool
	ended   bool
}

// anthBlock is one content block being built.
type anthBlock struct {
	index    int
	kind     string // thinking, text, tool_use
	id, name string
	text     []byte // thinking, text or tool arguments
	decided  bool   // tool_use: the arguments' first character was seen
	buffered bool   // tool_use: the arguments are not a JSON object; sent whole at the stop
	closed   bool
}

// honeSignature is the signature of the thinking blocks hone answers.
// Anthropic signs thinking so its API can check a block comes back
// unmodified; an engine has no such key, and hone ignores signatures coming
// back, so a fixed non-empty placeholder is used: clients that drop thinking
// blocks without a signature before replaying a conversation keep these.
const honeSignature = "hone-unsigned"

// warnings are what the translation left out, for X-Hone-Warning.
func (e *messagesEncoder) warnings() []string { return e.warns }

func newMessagesEncoder(model string) *messagesEncoder {
	return &messagesEncoder{model: model, id: newID("msg_"), tools: map[int]*anthBlock{}}
}

// named makes the message id from the call's: msg_<call id>.
func (e *messagesEncoder) named(callID string) string { e.id = "msg_" + callID; return e.id }

// body re-encodes a whole chat completion as a Message, or an engine error
// as an Anthropic error.
func (e *messagesEncoder) body(chat []byte, status int) []byte {
	if status >= 400 {
		return appendAnthropicError(nil, status, engineErrorMessage(chat, status))
	}
	doc := gjson.ParseBytes(chat)
	ch := doc.Get("choices.0")
	msg := ch.Get("message")
	if r := reasoningOf(msg); r != "" {
		e.block("thinking").text = []byte(r)
	}
	if c := msg.Get("content"); c.String() != "" {
		e.block("text").text = []byte(c.String())
	}
	msg.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		bl := e.block("tool_use")
		bl.id, bl.name = toolUseID(tc.Get("id").String()), tc.Get("function.name").String()
		bl.text = []byte(tc.Get("function.arguments").String())
		return true
	})
	e.finishFrom(ch)
	e.usage = doc.Get("usage")
	content := make([]any, 0, len(e.blocks))
	for _, bl := range e.blocks {
		content = append(content, bl.json(true))
	}
	reason, seq := e.stopReason()
	out := marshalUnescaped(anthMessage{ID: e.id, Type: "message", Role: "assistant", Model: e.model, Content: content,
		StopReason: &reason, StopSequence: seq, Usage: e.usageOut()})
	return out
}

// engineErrorMessage is the message of an engine's error body: OpenAI's
// error.message, or FastAPI's message/detail, or the status.
func engineErrorMessage(b []byte, status int) string {
	doc := gjson.ParseBytes(b)
	for _, k := range []string{"error.message", "message", "detail", "error"} {
		if v := doc.Get(k); v.Type == gjson.String && v.String() != "" {
			return v.String()
		}
	}
	return "the engine answered status " + strconv.Itoa(status)
}

func toolUseID(id string) string {
	if id == "" {
		return newID("toolu_")
	}
	return id
}

type anthMessage struct {
	ID           string    `json:"id"`
	Type         string    `json:"type"`
	Role         string    `json:"role"`
	Model        string    `json:"model"`
	Content      []any     `json:"content"`
	StopReason   *string   `json:"stop_reason"`
	StopSequence *string   `json:"stop_sequence"`
	Usage        anthUsage `json:"usage"`
}

type anthUsage struct {
	InputTokens         int64 `json:"input_tokens"`
	CacheCreationTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadTokens     int64 `json:"cache_read_input_tokens"`
	OutputTokens        int64 `json:"output_tokens"`
}

type anthText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type anthThinking struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

type anthToolUse struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// json is the block as the API shows it: whole, or empty as
// content_block_start announces it.
func (bl *anthBlock) json(whole bool) any {
	switch bl.kind {
	case "thinking":
		if !whole {
			return anthThinking{Type: "thinking"}
		}
		return anthThinking{Type: "thinking", Thinking: string(bl.text), Signature: honeSignature}
	case "tool_use":
		in := json.RawMessage(`{}`)
		if whole {
			in = anthInput(bl.text)
		}
		return anthToolUse{Type: "tool_use", ID: bl.id, Name: bl.name, Input: in}
	}
	if !whole {
		return anthText{Type: "text"}
	}
	return anthText{Type: "text", Text: string(bl.text)}
}

// anthInput is a tool_use input for the model's arguments: the JSON object
// they are, {} when empty, and otherwise (not JSON, or not an object, e.g.
// cut off by max_tokens) the arguments as a JSON string, which comes back
// as the same arguments (toolArguments) so the conversation keeps what the
// model wrote.
func anthInput(args []byte) json.RawMessage {
	t := bytes.TrimSpace(args)
	if len(t) == 0 {
		return json.RawMessage(`{}`)
	}
	if t[0] == '{' && json.Valid(t) {
		var buf bytes.Buffer
		if json.Compact(&buf, t) == nil {
			return buf.Bytes()
		}
	}
	return jsonString(string(args))
}

func (e *messagesEncoder) block(kind string) *anthBlock {
	bl := &anthBlock{index: len(e.blocks), kind: kind}
	e.blocks = append(e.blocks, bl)
	return bl
}

// finishFrom reads a choice's finish_reason and vLLM's stop_reason (the
// stop string that ended generation, when one did).
func (e *messagesEncoder) finishFrom(ch gjson.Result) {
	if f := ch.Get("finish_reason"); f.Type == gjson.String {
		e.finish = f.String()
	}
	if s := ch.Get("stop_reason"); s.Type == gjson.String {
		str := s.String()
		e.stopStr = &str
	}
}

// stopReason maps the engine's finish onto Anthropic's stop_reason and
// stop_sequence.
func (e *messagesEncoder) stopReason() (string, *string) {
	if e.finish == "length" {
		return "max_tokens", nil
	}
	for _, bl := range e.blocks {
		if bl.kind == "tool_use" {
			return "tool_use", nil
		}
	}
	if e.finish == "stop" && e.stopStr != nil {
		return "stop_sequence", e.stopStr
	}
	return "end_turn", nil
}

func (e *messagesEncoder) usageOut() anthUsage {
	u := anthUsage{InputTokens: e.prompt}
	if e.usage.IsObject() {
		u.InputTokens, u.OutputTokens = e.usage.Get("prompt_tokens").Int(), e.usage.Get("completion_tokens").Int()
	}
	return u
}

// event re-encodes one chat completion chunk.
func (e *messagesEncoder) event(chunk []byte) []byte {
	if e.ended {
		return nil // nothing follows message_stop
	}
	doc := gjson.ParseBytes(chunk)
	var out []byte
	if !e.started {
		e.started = true
		e.prompt = int64(len(doc.Get("prompt_token_ids").Array()))
		if u := doc.Get("usage.prompt_tokens"); u.Exists() {
			e.prompt = u.Int()
		}
		out = e.emit(out, "message_start", map[string]any{"message": anthMessage{ID: e.id, Type: "message",
			Role: "assistant", Model: e.model, Content: []any{}, Usage: anthUsage{InputTokens: e.prompt}}})
		out = e.emit(out, "ping", map[string]any{})
	}
	if u := doc.Get("usage"); u.IsObject() {
		e.usage = gjson.Parse(u.Raw)
	}
	ch := doc.Get("choices.0")
	if !ch.Exists() || ch.Get("index").Int() != 0 {
		return out
	}
	d := ch.Get("delta")
	if r := reasoningOf(d); r != "" {
		out = e.delta(out, "thinking", r)
	}
	if c := d.Get("content"); c.String() != "" {
		out = e.delta(out, "text", c.String())
	}
	d.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		out = e.toolDelta(out, tc)
		return true
	})
	e.finishFrom(ch)
	return out
}

// delta appends text to the open thinking or text block, opening it (and
// closing the block before) first when needed.
func (e *messagesEncoder) delta(out []byte, kind, text string) []byte {
	if e.open == nil || e.open.kind != kind {
		out = e.closeOpen(out)
		e.open = e.block(kind)
		out = e.start(out, e.open)
	}
	e.open.text = append(e.open.text, text...)
	d := map[string]any{"type": "text_delta", "text": text}
	if kind == "thinking" {
		d = map[string]any{"type": "thinking_delta", "thinking": text}
	}
	return e.emit(out, "content_block_delta", map[string]any{"index": e.open.index, "delta": d})
}

// toolDelta opens a tool_use block for a new tool call index, or streams an
// argument fragment. Arguments that do not start as a JSON object are held
// and sent whole, as a JSON string, when the block stops (as body does).
// A fragment for a tool call whose block was already stopped (engines send
// tool calls one after the other) is dropped.
func (e *messagesEncoder) toolDelta(out []byte, tc gjson.Result) []byte {
	i := int(tc.Get("index").Int())
	bl, ok := e.tools[i]
	if !ok {
		out = e.closeOpen(out)
		bl = e.block("tool_use")
		bl.id, bl.name = toolUseID(tc.Get("id").String()), tc.Get("function.name").String()
		e.tools[i], e.open = bl, bl
		out = e.start(out, bl)
	}
	frag := tc.Get("function.arguments").String()
	if frag == "" || bl.closed {
		return out
	}
	bl.text = append(bl.text, frag...)
	if bl.buffered {
		return out
	}
	if !bl.decided {
		t := bytes.TrimLeft(bl.text, " \t\r\n")
		if len(t) == 0 {
			return out
		}
		bl.decided = true
		if t[0] != '{' {
			bl.buffered = true
			return out
		}
		frag = string(bl.text)
	}
	return e.emit(out, "content_block_delta", map[string]any{"index": bl.index,
		"delta": map[string]any{"type": "input_json_delta", "partial_json": frag}})
}

func (e *messagesEncoder) start(out []byte, bl *anthBlock) []byte {
	return e.emit(out, "content_block_start", map[string]any{"index": bl.index, "content_block": bl.json(false)})
}

// closeOpen stops the open block.
func (e *messagesEncoder) closeOpen(out []byte) []byte {
	bl := e.open
	if bl == nil || bl.closed {
		return out
	}
	e.open = nil
	bl.closed = true
	switch {
	case bl.kind == "thinking":
		out = e.emit(out, "content_block_delta", map[string]any{"index": bl.index,
			"delta": map[string]any{"type": "signature_delta", "signature": honeSignature}})
	case bl.kind == "tool_use" && bl.buffered:
		out = e.emit(out, "content_block_delta", map[string]any{"index": bl.index,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": string(jsonString(string(bl.text)))}})
	}
	return e.emit(out, "content_block_stop", map[string]any{"index": bl.index})
}

// end stops the open block and sends message_delta and message_stop, once.
func (e *messagesEncoder) end() []byte {
	if e.ended {
		return nil
	}
	var out []byte
	if !e.started {
		out = e.event([]byte(`{}`))
	}
	out = e.closeOpen(out)
	reason, seq := e.stopReason()
	u := e.usageOut()
	usage := map[string]any{"output_tokens": u.OutputTokens}
	if e.usage.IsObject() {
		usage["input_tokens"] = u.InputTokens
	}
	e.ended = true
	out = e.emit(out, "message_delta", map[string]any{"delta": map[string]any{"stop_reason": reason,
		"stop_sequence": seq}, "usage": usage})
	return e.emit(out, "message_stop", map[string]any{})
}

// emit appends one SSE event: "event: TYPE" and its data, whose type field
// (first, as Anthropic writes it) names it too.
// fail sends Anthropic's error event, as its API does when a stream fails.
func (e *messagesEncoder) fail(msg string) []byte {
	return e.emit(nil, "error", map[string]any{"error": map[string]any{"type": "api_error", "message": msg}})
}

func (e *messagesEncoder) emit(out []byte, typ string, ev map[string]any) []byte {
	b := marshalUnescaped(ev)
	out = append(out, "event: "...)
	out = append(out, typ...)
	out = append(out, "\ndata: {\"type\":"...)
	out = strconv.AppendQuote(out, typ)
	if len(b) > 2 {
		out = append(out, ',')
	}
	out = append(out, b[1:]...)
	return append(out, "\n\n"...)
}
