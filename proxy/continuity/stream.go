package continuity

import (
	"bytes"
	"encoding/json"
	"io"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/internal/jsonwalk"
	"github.com/hone-rl/hone/model/chat"
	"github.com/hone-rl/hone/proxy/internal/sse"
	"github.com/tidwall/gjson"
)

// chatStream reads the engine's completions stream for a token-id prompt
// and yields the chat completions stream the engine would have sent for
// the chat request: a role chunk per choice first (the first one with the
// prompt ids), then one chunk per parsed delta (content, reasoning, tool
// call) carrying the logprobs and token ids of the tokens that made it,
// then the finishing chunk, the usage chunk and [DONE] as the engine sent
// them. The stream proxy reads it as it reads an engine's chat stream.
type chatStream struct {
	p       *Plan
	src     *sse.Reader
	out     []byte
	err     error
	sentIDs bool // the prompt ids went out (on the first chunk)
	choices map[int]*streamChoice
}

// streamChoice is the conversion state of one choice.
type streamChoice struct {
	parser  *chat.StreamParser
	started bool
	tools   bool
	served  capture.Choice // what the client gets, for the served-turn cache
}

// ChatStream turns a completions event stream into the chat completion
// stream the engine would have sent.
func (p *Plan) ChatStream(r io.Reader) io.Reader {
	return &chatStream{p: p, src: sse.NewReader(r), choices: map[int]*streamChoice{}}
}

func (s *chatStream) Read(b []byte) (int, error) {
	for len(s.out) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		ev, err := s.src.Next()
		if err != nil {
			s.err = err // a partial event is dropped; the proxy reports the broken stream
			continue
		}
		s.convert(ev)
	}
	n := copy(b, s.out)
	s.out = s.out[n:]
	return n, nil
}

// chunk is one chat stream chunk in vLLM's field order.
type contChunk struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	Created           int64             `json:"created"`
	Model             string            `json:"model"`
	Choices           []contChunkChoice `json:"choices"`
	Usage             json.RawMessage   `json:"usage,omitempty"`
	SystemFingerprint json.RawMessage   `json:"system_fingerprint,omitempty"`
	PromptTokenIDs    []int32           `json:"prompt_token_ids,omitempty"`
	PromptText        json.RawMessage   `json:"prompt_text,omitempty"` // vLLM 0.32's first chunk
	Metrics           json.RawMessage   `json:"metrics,omitempty"`
}

type contChunkChoice struct {
	Index        int             `json:"index"`
	Delta        contDelta       `json:"delta"`
	Logprobs     *contLogprobs   `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
	StopReason   json.RawMessage `json:"stop_reason,omitempty"`
	TokenIDs     []int32         `json:"token_ids,omitempty"`
}

type contDelta struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	Reasoning *string         `json:"reasoning,omitempty"`
	ToolCalls []contDeltaCall `json:"tool_calls,omitempty"`
}

type contDeltaCall struct {
	ID       string             `json:"id,omitempty"`
	Type     string             `json:"type,omitempty"`
	Index    int                `json:"index"`
	Function *contDeltaFunction `json:"function,omitempty"`
}

type contDeltaFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
}

// convert turns one engine event into chat events appended to s.out.
func (s *chatStream) convert(ev []byte) {
	data, ok := sse.Data(ev)
	if !ok || bytes.Equal(data, []byte("[DONE]")) || !jsonwalk.ValidBytes(data) {
		s.out = append(s.out, ev...) // comments, [DONE], and what cannot be read go as sent
		return
	}
	doc := gjson.ParseBytes(data)
	choices := doc.Get("choices")
	if !choices.IsArray() {
		s.out = append(s.out, ev...) // an error event
		return
	}
	head := contChunk{ID: chatID(doc.Get("id").String()), Object: "chat.completion.chunk",
		Created: doc.Get("created").Int(), Model: doc.Get("model").String()}
	if u := doc.Get("usage"); u.IsObject() && len(choices.Array()) == 0 {
		head.Choices, head.Usage = []contChunkChoice{}, json.RawMessage(u.Raw)
		var ids [][]int32
		for _, sc := range s.choices {
			ids = append(ids, sc.served.TokenIDs)
		}
		if n, ok := s.p.reasoningTokens(ids); ok {
			head.Usage = withReasoningTokens(head.Usage, n)
		}
		if fp := doc.Get("system_fingerprint"); fp.Exists() && fp.Type != gjson.Null {
			head.SystemFingerprint = json.RawMessage(fp.Raw)
		}
		if m := doc.Get("metrics"); m.Exists() && m.Type != gjson.Null {
			head.Metrics = json.RawMessage(m.Raw)
		}
		s.emit(head)
		return
	}
	for _, c := range choices.Array() {
		s.choice(head, c)
	}
}

func (s *chatStream) state(i int) *streamChoice {
	sc := s.choices[i]
	if sc == nil {
		o := s.p.parseOptions()
		sc = &streamChoice{}
		sc.parser = chat.NewStreamParser(o)
		s.choices[i] = sc
	}
	return sc
}

// choice converts one choice of a completions chunk (one engine step) into
// one chat chunk, as vLLM's chat stream does: the step's parsed delta
// (empty when the parser holds text back: vLLM still sends the chunk, since
// hone asks for token ids), its logprobs and token ids, and on the last
// step the finish reason.
func (s *chatStream) choice(head contChunk, c gjson.Result) {
	idx := int(c.Get("index").Int())
	sc := s.state(idx)
	if !sc.started {
		sc.started = true
		empty := ""
		s.emit(s.with(head, contChunkChoice{Index: idx, Delta: contDelta{Role: "assistant", Content: &empty}}))
	}
	ids, lps := s.p.tokens(c)
	sc.served.TokenIDs = append(sc.served.TokenIDs, ids...)
	deltas := sc.parser.Push(c.Get("text").String())
	fin := c.Get("finish_reason")
	if fin.Type == gjson.String {
		deltas = append(deltas, sc.parser.Finish()...)
	}
	cc := contChunkChoice{Index: idx, TokenIDs: ids}
	if lps != nil {
		cc.Logprobs = &contLogprobs{Content: lps}
	}
	for _, d := range deltas {
		s.merge(sc, &cc.Delta, d)
	}
	if fin.Type == gjson.String {
		// vLLM's chat stream says tool_calls only when the engine stopped,
		// never for a named tool_choice
		named := s.p.force != nil && s.p.force.named != ""
		cc.FinishReason = finishReason(fin, sc.tools && !named && fin.Str == "stop")
		cc.StopReason = rawOrNull(c.Get("stop_reason"))
		// the turn is remembered before the client can have it: its next
		// call may come before this call is recorded
		sc.served.FinishReason = *cc.FinishReason
		s.p.k.rememberTurn(s.p.session, s.p.prefix, s.p.ids, &sc.served)
	} else if len(deltas) == 0 && len(ids) == 0 && lps == nil {
		return // nothing generated in this step
	}
	s.emit(s.with(head, cc))
}

// merge adds one parsed delta to a chunk's delta (and to what the client
// is served).
func (s *chatStream) merge(sc *streamChoice, dst *contDelta, d chat.Delta) {
	switch {
	case d.ToolCall != nil && s.p.single && d.ToolCall.Index > 0:
		// parallel_tool_calls false: vLLM's chat stream drops the deltas of
		// every call but the first (maybe_filter_parallel_tool_calls)
	case d.ToolCall != nil:
		sc.tools = true
		t := d.ToolCall
		id := t.ID
		if id != "" {
			id = s.p.toolCallID(id)
		}
		if n := len(dst.ToolCalls); n > 0 && dst.ToolCalls[n-1].Index == t.Index && id == "" {
			last := &dst.ToolCalls[n-1]
			if last.Function == nil {
				last.Function = &contDeltaFunction{}
			}
			last.Function.Arguments += t.Arguments
		} else {
			dc := contDeltaCall{ID: id, Type: t.Type, Index: t.Index}
			if t.Name != "" || t.Arguments != "" {
				dc.Function = &contDeltaFunction{Name: t.Name, Arguments: t.Arguments}
			}
			dst.ToolCalls = append(dst.ToolCalls, dc)
		}
		for len(sc.served.ToolCalls) <= t.Index {
			sc.served.ToolCalls = append(sc.served.ToolCalls, capture.ToolCall{Index: len(sc.served.ToolCalls)})
		}
		sc.served.ToolCalls[t.Index].Name += t.Name
		sc.served.ToolCalls[t.Index].Arguments += t.Arguments
	case d.Reasoning != "":
		r := d.Reasoning
		if dst.Reasoning != nil {
			r = *dst.Reasoning + r
		}
		dst.Reasoning = &r
	default:
		t := d.Content
		if dst.Content != nil {
			t = *dst.Content + t
		}
		dst.Content = &t
		sc.served.Content += d.Content
	}
}

// with returns head carrying one choice; the stream's first chunk also
// carries the prompt ids.
func (s *chatStream) with(head contChunk, c contChunkChoice) contChunk {
	head.Choices = []contChunkChoice{c}
	if !s.sentIDs {
		head.PromptTokenIDs, s.sentIDs = s.p.ids, true
		if s.p.sent && s.p.kind != "embedded" {
			head.PromptText = jsonNull
		}
	}
	return head
}

func (s *chatStream) emit(c contChunk) {
	b, err := marshalPlain(c)
	if err != nil {
		return
	}
	s.out = append(s.out, "data: "...)
	s.out = append(s.out, b...)
	s.out = append(s.out, "\n\n"...)
}
