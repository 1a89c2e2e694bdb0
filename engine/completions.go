package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/hone-rl/hone/engine/internal/grammar"
	"github.com/hone-rl/hone/model/chat"
)

// randomID is prefix + a random UUID in hex, like vLLM's random_uuid().
func randomID(prefix string) string {
	return prefix + strings.ReplaceAll(uuid.NewString(), "-", "")
}

// responseID names an answer as vLLM does: prefix and the request's
// X-Request-Id when it has one (hone's proxy sends its call id), otherwise
// a random id.
func responseID(r *http.Request, prefix string) string {
	if id := r.Header.Get("X-Request-Id"); id != "" {
		return prefix + id
	}
	return randomID(prefix)
}

// parsePrompts accepts a string, a list of strings, a list of token ids, or
// a list of token-id lists. Text prompts get the BOS token when the
// tokenizer has one and special tokens are wanted (vLLM's
// add_special_tokens, true by default for completions).
func (e *Engine) parsePrompts(raw json.RawMessage, special bool) ([][]int32, *apiError) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return [][]int32{e.encode(one, special)}, nil
	}
	var ids []int32
	if json.Unmarshal(raw, &ids) == nil && len(ids) > 0 {
		return e.checkIDs([][]int32{ids})
	}
	var strs []string
	if json.Unmarshal(raw, &strs) == nil && len(strs) > 0 {
		out := make([][]int32, len(strs))
		for i, s := range strs {
			out[i] = e.encode(s, special)
		}
		return out, nil
	}
	var lists [][]int32
	if json.Unmarshal(raw, &lists) == nil && len(lists) > 0 {
		return e.checkIDs(lists)
	}
	return nil, badRequest("prompt", "prompt must be a string, a list of strings, a list of token ids, or a list of token id lists, and not empty.")
}

// encode tokenizes text, with the BOS token first when special is set and
// the tokenizer defines one (as Hugging Face tokenizers of Llama add it).
func (e *Engine) encode(text string, special bool) []int32 {
	ids := e.tok.Encode(text)
	if bos := e.tok.Config().BOSID; special && bos >= 0 && text != "" {
		ids = append([]int32{bos}, ids...)
	}
	return ids
}

func (e *Engine) checkIDs(lists [][]int32) ([][]int32, *apiError) {
	for _, l := range lists {
		if len(l) == 0 {
			return nil, badRequest("prompt", "prompt token id list must not be empty.")
		}
		for _, id := range l {
			if id < 0 || int(id) >= e.vocab {
				return nil, badRequest("prompt", "Token id %d is out of vocabulary.", id)
			}
		}
	}
	return lists, nil
}

// completionJob is one /v1/completions request in flight.
type completionJob struct {
	req     completionRequest
	id      string
	created int64
	prompts [][]int32
	seqs    []*seq
	notify  chan struct{}
}

func (e *Engine) handleCompletions(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	if apiErr := decodeBody(r, &req); apiErr != nil {
		writeError(w, apiErr)
		return
	}
	job, apiErr := e.startCompletion(r, req)
	respond(w, r, job, apiErr, req.Stream, e.streamCompletion, e.finishCompletion)
}

// respond writes a started job's answer: apiErr if starting it failed,
// else a stream or a single response.
func respond[J any](w http.ResponseWriter, r *http.Request, job J, apiErr *apiError, stream bool,
	streamFn, finishFn func(http.ResponseWriter, *http.Request, J)) {
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	if stream {
		streamFn(w, r, job)
		return
	}
	finishFn(w, r, job)
}

func (e *Engine) startCompletion(r *http.Request, req completionRequest) (*completionJob, *apiError) {
	if apiErr := e.checkAwake(); apiErr != nil {
		return nil, apiErr
	}
	if req.Echo && req.Logprobs != nil {
		return nil, badRequest("echo", "echo with logprobs needs prompt logprobs, which this engine does not support.")
	}
	g, apiErr := e.validate(&req.commonRequest, req.MaxTokens)
	if apiErr != nil {
		return nil, apiErr
	}
	if req.Logprobs != nil {
		if apiErr := e.checkLogprobs("logprobs", *req.Logprobs); apiErr != nil {
			return nil, apiErr
		}
		g.Sampling.Logprobs, g.Sampling.TopLogprobs = true, *req.Logprobs
	}
	prompts, apiErr := e.parsePrompts(req.Prompt, req.AddSpecialTokens == nil || *req.AddSpecialTokens)
	if apiErr != nil {
		return nil, apiErr
	}
	if so, apiErr := e.structuredGuide(req.StructuredOutputs, prompts[0]); apiErr != nil {
		return nil, apiErr
	} else if so != nil {
		g.Guide = so
	}
	adapter, apiErr := e.resolveModel(req.Model)
	if apiErr != nil {
		return nil, apiErr
	}
	if adapter != nil {
		defer adapter.release()
	}
	job := &completionJob{req: req, id: responseID(r, "cmpl-"), created: time.Now().Unix(), prompts: prompts,
		notify: make(chan struct{}, 1)}
	for _, p := range prompts {
		if len(p) == 0 {
			e.releaseSeqs(job.seqs)
			return nil, badRequest("prompt", "The prompt cannot be empty.")
		}
		maxTok, apiErr := e.maxTokensFor(len(p), g, "prompt")
		if apiErr != nil {
			e.releaseSeqs(job.seqs)
			return nil, apiErr
		}
		job.seqs = append(job.seqs, e.newSeqs(r.Context(), p, g, maxTok, adapter, job.notify)...)
	}
	if err := e.submit(r, job.seqs); err != nil {
		return nil, errorFor(err)
	}
	return job, nil
}

func (e *Engine) finishCompletion(w http.ResponseWriter, r *http.Request, job *completionJob) {
	defer e.track(job.seqs)()
	evs := make([][]tokenEvent, len(job.seqs))
	err := collect(r.Context(), job.seqs, job.notify, func(i int, ev []tokenEvent, _ bool) {
		evs[i] = append(evs[i], ev...)
	})
	if err != nil {
		writeError(w, errorFor(err))
		return
	}
	resp := completionResponse{ID: job.id, Object: "text_completion", Created: job.created, Model: job.req.Model,
		Choices: make([]completionChoice, len(job.seqs))}
	for i, q := range job.seqs {
		c := completionChoice{Index: i, FinishReason: &q.out.finish, StopReason: q.out.stopReason}
		c.Text = e.echo(job, q)
		for _, ev := range evs[i] {
			c.Text += ev.Text
		}
		if job.req.Logprobs != nil {
			c.Logprobs, _ = e.completionLogprobsFor(evs[i], job.req.ReturnTokensAsTokenIDs, 0)
		}
		if job.req.ReturnTokenIDs {
			c.TokenIDs, c.PromptTokenIDs = eventIDs(evs[i]), q.spec.Prompt
		}
		resp.Choices[i] = c
		resp.Usage.CompletionTokens += len(evs[i])
	}
	resp.Usage.PromptTokens = job.promptTokens()
	resp.Usage.TotalTokens = resp.Usage.PromptTokens + resp.Usage.CompletionTokens
	resp.Model = e.modelName(job.req.Model)
	writeJSON(w, http.StatusOK, resp)
}

// echo is the prompt text to put before a choice's text (echo: true).
func (e *Engine) echo(job *completionJob, q *seq) string {
	if !job.req.Echo {
		return ""
	}
	return e.tok.Decode(q.spec.Prompt)
}

func (j *completionJob) promptTokens() int {
	n := 0
	for _, p := range j.prompts {
		n += len(p)
	}
	return n
}

func eventIDs(evs []tokenEvent) []int32 {
	out := make([]int32, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

func (e *Engine) streamCompletion(w http.ResponseWriter, r *http.Request, job *completionJob) {
	defer e.track(job.seqs)()
	sw := newSSE(w)
	offsets := make([]int, len(job.seqs))
	first := make([]bool, len(job.seqs))
	ntok := 0
	gen := make([]int, len(job.seqs))
	model := e.modelName(job.req.Model)
	err := collect(r.Context(), job.seqs, job.notify, perToken(func(i int, evs []tokenEvent, done bool) {
		ntok += len(evs)
		gen[i] += len(evs)
		c := completionStreamChoice{Index: i}
		if !first[i] {
			c.Text = e.echo(job, job.seqs[i])
		}
		for _, ev := range evs {
			c.Text += ev.Text
		}
		if job.req.Logprobs != nil {
			c.Logprobs, offsets[i] = e.completionLogprobsFor(evs, job.req.ReturnTokensAsTokenIDs, offsets[i])
		}
		if job.req.ReturnTokenIDs {
			c.TokenIDs = eventIDs(evs)
			if !first[i] {
				c.PromptTokenIDs = job.seqs[i].spec.Prompt
			}
		}
		first[i] = true
		if done {
			fin := job.seqs[i].out.finish
			c.FinishReason, c.StopReason = &fin, job.seqs[i].out.stopReason
		}
		sw.send(completionChunk{ID: job.id, Object: "text_completion", Created: job.created, Model: model,
			Choices: []completionStreamChoice{c},
			Usage:   continuousUsage(job.req.StreamOptions, len(job.seqs[i].spec.Prompt), gen[i])})
	}))
	if err != nil {
		sw.send(map[string]any{"error": errorFor(err)})
		sw.done()
		return
	}
	if so := job.req.StreamOptions; so != nil && so.IncludeUsage {
		u := usageInfo{PromptTokens: job.promptTokens(), CompletionTokens: ntok}
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
		sw.send(completionChunk{ID: job.id, Object: "text_completion", Created: job.created, Model: model,
			Choices: []completionStreamChoice{}, Usage: &u})
	}
	sw.done()
}

// decodeBody parses a JSON request body.
func decodeBody(r *http.Request, v any) *apiError {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		return badRequest("", "%s", fmt.Sprintf("JSON decode error: %v", err))
	}
	return nil
}

// structuredGuide compiles a completions request's structured_outputs (nil:
// none), vLLM's field: {"json": schema} (a schema object or its JSON in a
// string), {"json_object": true} or {"structural_tag": tag} (structtag.go);
// the other kinds (regex, choice, grammar) are refused. It replaces response_format, as
// vLLM's structured_outputs does. When the engine parses qwen3 reasoning
// and the prompt leaves <think> open, the reasoning runs free up to
// </think> first, as for chat.
func (e *Engine) structuredGuide(raw json.RawMessage, prompt []int32) (*guide, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var so map[string]json.RawMessage
	if err := json.Unmarshal(raw, &so); err != nil || so == nil {
		return nil, badRequest("structured_outputs", "structured_outputs must be an object.")
	}
	var key string
	var build func(b *grammar.Builder) (grammar.Frag, error)
	var opts grammar.Options
	set := 0
	for k, v := range so {
		v = bytes.TrimSpace(v)
		if string(v) == "null" || (k == "json_object" && string(v) == "false") {
			continue
		}
		switch k {
		case "json":
			schema := v
			var s string
			if json.Unmarshal(v, &s) == nil {
				schema = bytes.TrimSpace([]byte(s))
			}
			key = "so_json\x00" + string(schema)
			build = func(b *grammar.Builder) (grammar.Frag, error) { return b.Schema(schema) }
		case "json_object":
			key = "json_object"
			build = func(b *grammar.Builder) (grammar.Frag, error) { return b.AnyObject(), nil }
		case "structural_tag":
			tag, forbid, err := parseStructTag(v)
			if err != nil {
				return nil, badRequest("structured_outputs", "%v", err)
			}
			key, build, opts.Forbid = "so_tag\x00"+string(v), tag.build, forbid
		case "regex", "choice", "grammar":
			return nil, badRequest("structured_outputs", "structured_outputs %s is not supported by this engine (json, json_object and structural_tag are).", k)
		case "disable_any_whitespace", "disable_additional_properties", "whitespace_pattern":
			continue
		default:
			return nil, badRequest("structured_outputs", "structured_outputs has an unknown field %q.", k)
		}
		set++
	}
	switch {
	case set == 0:
		return nil, nil
	case set > 1:
		return nil, badRequest("structured_outputs", "You can only use one kind of structured outputs constraint but multiple are specified.")
	}
	thinkOpen := e.opts.ReasoningParser == "qwen3" && chat.PromptOpensThink(e.tok.Decode(prompt))
	g, err := e.compileGuide(thinkKey(key, thinkOpen), opts, withThink(build, thinkOpen))
	if err != nil {
		return nil, badRequest("structured_outputs", "structured_outputs: %v", err)
	}
	return g, nil
}
