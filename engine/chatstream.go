package engine

import (
	"encoding/json"
	"net/http"
)

// msgDelta is a piece of an assistant message as a stream reveals it.
type msgDelta struct {
	Reasoning string
	Content   string
	ToolCalls []deltaToolCall
}

func (d msgDelta) empty() bool {
	return d.Reasoning == "" && d.Content == "" && len(d.ToolCalls) == 0
}

// deltaParser splits streamed text into reasoning, content and tool calls
// (model/chat's stream parser).
type deltaParser interface {
	// Feed takes the next text and returns what can be emitted now.
	Feed(text string) msgDelta
	// Close flushes anything held back at the end of the stream.
	Close() msgDelta
	// ToolCalled reports whether any tool call was emitted.
	ToolCalled() bool
}

// chatMessage builds a non-streaming assistant message from the full text;
// it reports whether tool calls were parsed.
func (e *Engine) chatMessage(text string, job *chatJob) (chatMessage, bool) {
	content, reasoning, calls := e.parseOutput(text, job)
	if content == nil && forcesToolCall(&job.req) {
		empty := "" // vLLM's chat answers a forced call with `content or ""`
		content = &empty
	}
	msg := chatMessage{Role: "assistant", Content: content, ToolCalls: calls}
	var v any
	if reasoning != nil {
		v = *reasoning
	}
	msg.Reasoning, msg.ReasoningContent = e.reasoningFields(v)
	return msg, len(calls) > 0
}

// reasoningFields encodes v under the configured reasoning field name(s).
func (e *Engine) reasoningFields(v any) (reasoning, reasoningContent json.RawMessage) {
	b, _ := json.Marshal(v)
	switch e.opts.ReasoningField {
	case "reasoning_content":
		return nil, b
	case "both":
		return b, b
	default:
		return b, nil
	}
}

func (e *Engine) delta(d msgDelta) chatDelta {
	out := chatDelta{ToolCalls: d.ToolCalls}
	if d.Reasoning != "" {
		out.Reasoning, out.ReasoningContent = e.reasoningFields(d.Reasoning)
	}
	if d.Content != "" {
		out.Content = &d.Content
	}
	return out
}

// chatStream is one streamed chat response.
type chatStream struct {
	e       *Engine
	job     *chatJob
	sw      *sse
	parsers []deltaParser
	gen     []int // tokens streamed per choice
}

func (e *Engine) streamChat(w http.ResponseWriter, r *http.Request, job *chatJob) {
	defer e.track(job.seqs)()
	s := &chatStream{e: e, job: job, sw: newSSE(w), parsers: make([]deltaParser, len(job.seqs)), gen: make([]int, len(job.seqs))}
	for i := range job.seqs {
		s.parsers[i] = e.newDeltaParser(job)
		empty := ""
		first := s.chunk(chatStreamChoice{Index: i, Delta: chatDelta{Role: "assistant", Content: &empty}})
		if job.req.ReturnTokenIDs {
			first.PromptTokenIDs = job.prompt
		}
		s.sw.send(first)
	}
	if err := collect(r.Context(), job.seqs, job.notify, perToken(s.token)); err != nil {
		s.sw.send(map[string]any{"error": errorFor(err)})
		s.sw.done()
		return
	}
	if so := job.req.StreamOptions; so != nil && so.IncludeUsage {
		u := usageInfo{PromptTokens: len(job.prompt)}
		for _, n := range s.gen {
			u.CompletionTokens += n
		}
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
		c := s.chunk(chatStreamChoice{})
		c.Choices, c.Usage = []chatStreamChoice{}, &u
		s.sw.send(c)
	}
	s.sw.done()
}

func (s *chatStream) chunk(c chatStreamChoice) chatChunk {
	j := s.job
	return chatChunk{ID: j.id, Object: "chat.completion.chunk", Created: j.created, Model: j.model,
		Choices: []chatStreamChoice{c}, Usage: continuousUsage(j.req.StreamOptions, len(j.prompt), s.gen[c.Index])}
}

// token streams choice i's next token (evs holds at most one) and, when
// done, its finish.
func (s *chatStream) token(i int, evs []tokenEvent, done bool) {
	j, q := s.job, s.job.seqs[i]
	s.gen[i] += len(evs)
	var d msgDelta
	for _, ev := range evs {
		d = appendDelta(d, s.parsers[i].Feed(ev.Text))
	}
	if done {
		d = appendDelta(d, s.parsers[i].Close())
	}
	c := chatStreamChoice{Index: i, Delta: s.e.delta(d)}
	if j.req.Logprobs {
		c.Logprobs = &chatLogprobs{Content: s.e.chatLogprobsFor(evs, j.req.ReturnTokensAsTokenIDs)}
	}
	if j.req.ReturnTokenIDs {
		c.TokenIDs = eventIDs(evs)
	}
	if done {
		fin := chatFinish(&j.req, s.parsers[i].ToolCalled(), q.out.finish, true)
		c.FinishReason = &fin
		c.StopReason, _ = json.Marshal(q.out.stopReason)
	}
	if d.empty() && c.Logprobs == nil && c.TokenIDs == nil && !done {
		return
	}
	s.sw.send(s.chunk(c))
}

// continuousUsage is the per-chunk usage of stream_options
// continuous_usage_stats (with include_usage): the prompt and the tokens the
// choice has generated so far, as vLLM reports it; nil when not asked.
func continuousUsage(so *streamOptions, prompt, generated int) *usageInfo {
	if so == nil || !so.IncludeUsage || !so.ContinuousUsageStats {
		return nil
	}
	return &usageInfo{PromptTokens: prompt, CompletionTokens: generated, TotalTokens: prompt + generated}
}

// perToken splits a batch of events so each token gets its own stream chunk,
// as vLLM streams one chunk per generated token; done goes with the last.
func perToken(fn func(i int, evs []tokenEvent, done bool)) func(int, []tokenEvent, bool) {
	return func(i int, evs []tokenEvent, done bool) {
		if len(evs) == 0 {
			fn(i, nil, done)
			return
		}
		for k := range evs {
			fn(i, evs[k:k+1], done && k == len(evs)-1)
		}
	}
}

// appendDelta merges b after a.
func appendDelta(a, b msgDelta) msgDelta {
	a.Reasoning += b.Reasoning
	a.Content += b.Content
	a.ToolCalls = append(a.ToolCalls, b.ToolCalls...)
	return a
}
