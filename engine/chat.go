package engine

import (
	"bytes"
	"io"
	"net/http"
	"time"

	"github.com/hone-rl/hone/model/chat"
)

// chatJob is one /v1/chat/completions request in flight.
type chatJob struct {
	req        chatRequest
	id         string
	created    int64
	model      string
	prompt     []int32
	promptText string // the rendered prompt
	seqs       []*seq
	notify     chan struct{}
}

func (e *Engine) handleChat(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, badRequest("", "read body: %v", err))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var req chatRequest
	if apiErr := decodeBody(r, &req); apiErr != nil {
		writeError(w, apiErr)
		return
	}
	job, apiErr := e.startChat(r, req, body)
	respond(w, r, job, apiErr, req.Stream, e.streamChat, e.finishChat)
}

// chatPrompt renders a chat request body with model/chat's Qwen3 template
// (body fields such as add_generation_prompt and chat_template_kwargs
// override the defaults) and tokenizes it.
func (e *Engine) chatPrompt(body []byte) (string, []int32, *apiError) {
	text, err := chat.RenderRequest(body, chat.Options{AddGenerationPrompt: true})
	if err != nil {
		return "", nil, badRequest("messages", "%v", err)
	}
	return text, e.tok.Encode(text), nil
}

func (e *Engine) startChat(r *http.Request, req chatRequest, body []byte) (*chatJob, *apiError) {
	if apiErr := e.checkAwake(); apiErr != nil {
		return nil, apiErr
	}
	if len(req.Messages) == 0 || string(req.Messages) == "null" {
		return nil, badRequest("messages", "messages must be a non-empty list.")
	}
	maxTok := req.MaxCompletionTokens
	if maxTok == nil {
		maxTok = req.MaxTokens
	}
	g, apiErr := e.validate(&req.commonRequest, maxTok)
	if apiErr != nil {
		return nil, apiErr
	}
	if apiErr := e.chatLogprobParams(&req, &g); apiErr != nil {
		return nil, apiErr
	}
	adapter, apiErr := e.resolveModel(req.Model)
	if apiErr != nil {
		return nil, apiErr
	}
	if adapter != nil {
		defer adapter.release()
	}
	promptText, prompt, apiErr := e.chatPrompt(body)
	if apiErr != nil {
		return nil, apiErr
	}
	if g.Guide, apiErr = e.chatGuide(&req, g.Guide, e.thinkOpenFor(req, promptText)); apiErr != nil {
		return nil, apiErr
	}
	maxTokens, apiErr := e.maxTokensFor(len(prompt), g, "messages")
	if apiErr != nil {
		return nil, apiErr
	}
	job := &chatJob{req: req, id: responseID(r, "chatcmpl-"), created: time.Now().Unix(), model: e.modelName(req.Model),
		prompt: prompt, promptText: promptText, notify: make(chan struct{}, 1)}
	job.seqs = e.newSeqs(r.Context(), prompt, g, maxTokens, adapter, job.notify)
	if err := e.submit(r, job.seqs); err != nil {
		return nil, errorFor(err)
	}
	return job, nil
}

func (e *Engine) chatLogprobParams(req *chatRequest, g *genParams) *apiError {
	if req.TopLogprobs != nil {
		if apiErr := e.checkLogprobs("top_logprobs", *req.TopLogprobs); apiErr != nil {
			return apiErr
		}
		if *req.TopLogprobs > 0 && !req.Logprobs {
			return badRequest("top_logprobs", "when using `top_logprobs`, `logprobs` must be set to true.")
		}
		g.Sampling.TopLogprobs = *req.TopLogprobs
	}
	g.Sampling.Logprobs = req.Logprobs
	return nil
}

// wantsTools reports whether tool calls are parsed for this request: with
// the hermes parser unless tool_choice is "none", and always when
// tool_choice forces a call (the output is then hermes by construction).
func (e *Engine) wantsTools(req *chatRequest) bool {
	if forcesToolCall(req) {
		return true
	}
	if e.opts.ToolCallParser != "hermes" || len(req.Tools) == 0 || string(req.Tools) == "null" {
		return false
	}
	return string(bytes.TrimSpace(req.ToolChoice)) != `"none"`
}

func (e *Engine) finishChat(w http.ResponseWriter, r *http.Request, job *chatJob) {
	defer e.track(job.seqs)()
	evs := make([][]tokenEvent, len(job.seqs))
	err := collect(r.Context(), job.seqs, job.notify, func(i int, ev []tokenEvent, _ bool) {
		evs[i] = append(evs[i], ev...)
	})
	if err != nil {
		writeError(w, errorFor(err))
		return
	}
	resp := chatResponse{ID: job.id, Object: "chat.completion", Created: job.created, Model: job.model,
		Choices: make([]chatChoice, len(job.seqs))}
	for i, q := range job.seqs {
		var text string
		for _, ev := range evs[i] {
			text += ev.Text
		}
		msg, calls := e.chatMessage(text, job)
		c := chatChoice{Index: i, Message: msg, FinishReason: chatFinish(&job.req, calls, q.out.finish, false),
			StopReason: q.out.stopReason}
		if job.req.Logprobs {
			c.Logprobs = &chatLogprobs{Content: e.chatLogprobsFor(evs[i], job.req.ReturnTokensAsTokenIDs)}
		}
		if job.req.ReturnTokenIDs {
			c.TokenIDs = eventIDs(evs[i])
		}
		resp.Choices[i] = c
		resp.Usage.CompletionTokens += len(evs[i])
	}
	if job.req.ReturnTokenIDs {
		resp.PromptTokenIDs = job.prompt
	}
	resp.Usage.PromptTokens = len(job.prompt)
	resp.Usage.TotalTokens = resp.Usage.PromptTokens + resp.Usage.CompletionTokens
	writeJSON(w, http.StatusOK, resp)
}
