package engine

import (
	"github.com/hone-rl/hone/model/chat"
)

// parseOptions resolves model/chat's output parsers for a request: reasoning
// needs the qwen3 parser and thinking not disabled in the template kwargs;
// tools need the hermes parser and tools in the request with tool_choice
// other than "none".
func (e *Engine) parseOptions(job *chatJob) chat.ParseOptions {
	req := &job.req
	o := chat.ParseOptions{Tools: e.wantsTools(req)}
	if e.opts.ReasoningParser == "qwen3" {
		o.Reasoning = true
		if v, ok := req.ChatTemplateKwargs["enable_thinking"].(bool); ok && !v {
			o.Reasoning = false
		}
		o.ThinkOpen = chat.PromptOpensThink(job.promptText)
	}
	return o
}

// hideReasoning is include_reasoning: false, which drops the parsed
// reasoning from the response.
func hideReasoning(job *chatJob) bool {
	return job.req.IncludeReasoning != nil && !*job.req.IncludeReasoning
}

// parseOutput splits a finished completion into content, reasoning and tool
// calls (vLLM's non-streaming parsers).
func (e *Engine) parseOutput(text string, job *chatJob) (any, *string, []toolCall) {
	out := chat.ParseOutput(text, e.parseOptions(job))
	if hideReasoning(job) {
		out.Reasoning = nil
	}
	var content any
	if out.Content != nil {
		content = *out.Content
	}
	if single(job) && len(out.ToolCalls) > 1 {
		out.ToolCalls = out.ToolCalls[:1]
	}
	calls := make([]toolCall, len(out.ToolCalls))
	for i, c := range out.ToolCalls {
		calls[i] = toolCall{ID: c.ID, Type: c.Type, Function: toolCallFunction{Name: c.Name, Arguments: c.Arguments}}
	}
	return content, out.Reasoning, calls
}

// single reports parallel_tool_calls false: the answer keeps the first tool
// call only, streamed or not, as vLLM's maybe_filter_parallel_tool_calls
// does (the sampled text may hold more: neither constrains it under auto).
func single(job *chatJob) bool {
	return job.req.ParallelToolCalls != nil && !*job.req.ParallelToolCalls
}

// streamParser adapts chat.StreamParser to the chat stream's deltas.
type streamParser struct {
	p      *chat.StreamParser
	hide   bool // drop reasoning (include_reasoning: false)
	single bool // drop every tool call but the first (parallel_tool_calls: false)
}

func (e *Engine) newDeltaParser(job *chatJob) deltaParser {
	return streamParser{p: chat.NewStreamParser(e.parseOptions(job)), hide: hideReasoning(job), single: single(job)}
}

func (s streamParser) Feed(text string) msgDelta { return s.merge(s.p.Push(text)) }
func (s streamParser) Close() msgDelta           { return s.merge(s.p.Finish()) }
func (s streamParser) ToolCalled() bool          { return s.p.ToolCalls() > 0 }

func (s streamParser) merge(ds []chat.Delta) msgDelta {
	var m msgDelta
	for _, d := range ds {
		m.Content += d.Content
		if !s.hide {
			m.Reasoning += d.Reasoning
		}
		if tc := d.ToolCall; tc != nil && !(s.single && tc.Index > 0) {
			m.ToolCalls = append(m.ToolCalls, deltaToolCall{Index: tc.Index, ID: tc.ID, Type: tc.Type,
				Function: &deltaFunction{Name: tc.Name, Arguments: tc.Arguments}})
		}
	}
	return m
}
