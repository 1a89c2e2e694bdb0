package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"unicode/utf8"
)

// genParams are a request's validated generation settings.
type genParams struct {
	N           int
	Sampling    samplingParams
	MaxTokens   *int // requested; nil = up to the context
	Stop        []string
	StopIDs     []int32
	IgnoreEOS   bool
	Seed        *int64
	Rules       logitRules
	MinTokens   int
	KeepSpecial bool
	IncludeStop bool
	Guide       *guide // output constraint (constrain.go); nil: none
	CacheSalt   string // prefix-cache partition (cache_salt); "": the shared one
}

// validate checks the shared sampling fields the way vLLM's SamplingParams
// does and fills defaults.
func (e *Engine) validate(c *commonRequest, maxTokens *int) (genParams, *apiError) {
	g := genParams{N: 1, MaxTokens: maxTokens, Stop: c.Stop, StopIDs: c.StopTokenIDs, IgnoreEOS: c.IgnoreEOS, Seed: c.Seed,
		MinTokens: c.MinTokens, KeepSpecial: c.SkipSpecialTokens != nil && !*c.SkipSpecialTokens,
		IncludeStop: c.IncludeStopStrInOutput}
	if c.CacheSalt != nil {
		g.CacheSalt = *c.CacheSalt
	}
	g.Sampling = samplingParams{Temperature: e.defaults.Temperature, TopP: e.defaults.TopP, TopK: e.defaults.TopK}
	if c.N != nil {
		g.N = *c.N
	}
	if c.Temperature != nil {
		g.Sampling.Temperature = *c.Temperature
	}
	if c.TopP != nil {
		g.Sampling.TopP = *c.TopP
	}
	if c.TopK != nil {
		g.Sampling.TopK = *c.TopK
	}
	if c.MinP != nil {
		g.Sampling.MinP = *c.MinP
	}
	if apiErr := e.logitRules(c, &g.Rules); apiErr != nil {
		return g, apiErr
	}
	if apiErr := checkGen(c, g); apiErr != nil {
		return g, apiErr
	}
	var apiErr *apiError
	if g.Guide, apiErr = e.formatGuide(c.ResponseFormat, false); apiErr != nil {
		return g, apiErr
	}
	if g.Sampling.TopK < 0 {
		g.Sampling.TopK = 0
	}
	for _, s := range g.Stop {
		if s == "" {
			return g, badRequest("stop", "stop strings must not be empty.")
		}
	}
	for _, id := range g.StopIDs {
		if id < 0 || int(id) >= e.vocab {
			return g, badRequest("stop_token_ids", "stop_token_ids contains out-of-vocabulary token id %d.", id)
		}
	}
	return g, nil
}

// checkGen applies vLLM's SamplingParams range checks.
func checkGen(c *commonRequest, g genParams) *apiError {
	maxTokens := g.MaxTokens
	switch {
	case c.StreamOptions != nil && !c.Stream:
		return badRequest("stream_options", "Stream options can only be defined when `stream=True`.")
	case c.CacheSalt != nil && *c.CacheSalt == "":
		return badRequest("cache_salt", "Parameter 'cache_salt' must be a non-empty string if provided.")
	case c.CacheSalt != nil && (utf8.RuneCountInString(*c.CacheSalt) > 128 || strings.ContainsAny(*c.CacheSalt, "@/\\\x00")):
		return badRequest("cache_salt", "Parameter 'cache_salt' must be at most 128 characters and must not contain '@', '/', '\\\\', or NUL.")
	case c.PromptLogprobs != nil:
		return badRequest("prompt_logprobs", "prompt_logprobs is not supported by this engine.")
	case c.UseBeamSearch:
		return badRequest("use_beam_search", "beam search is not supported by this engine.")
	case g.N < 1:
		return badRequest("n", "n must be at least 1, got %d.", g.N)
	case g.N > 128:
		return badRequest("n", "n must be at most 128, got %d.", g.N)
	case g.Sampling.Temperature < 0:
		return badRequest("temperature", "temperature must be non-negative, got %v.", g.Sampling.Temperature)
	case g.Sampling.TopP <= 0 || g.Sampling.TopP > 1:
		return badRequest("top_p", "top_p must be in (0, 1], got %v.", g.Sampling.TopP)
	case g.Sampling.TopK < -1:
		return badRequest("top_k", "top_k must be 0 (disable), or at least 1, got %d.", g.Sampling.TopK)
	case g.Sampling.MinP < 0 || g.Sampling.MinP > 1:
		return badRequest("min_p", "min_p must be in [0, 1], got %v.", g.Sampling.MinP)
	case maxTokens != nil && *maxTokens < 1:
		return badRequest("max_tokens", "max_tokens must be at least 1, got %d.", *maxTokens)
	case g.MinTokens < 0:
		return badRequest("min_tokens", "min_tokens must be greater than or equal to 0, got %d.", g.MinTokens)
	case maxTokens != nil && g.MinTokens > *maxTokens:
		return badRequest("min_tokens", "min_tokens must be less than or equal to max_tokens=%d, got %d.", *maxTokens, g.MinTokens)
	}
	return nil
}

// logitRules validates the penalty and bias fields.
func (e *Engine) logitRules(c *commonRequest, r *logitRules) *apiError {
	r.Repetition = 1
	for _, f := range []struct {
		name string
		v    *float64
		dst  *float64
	}{{"presence_penalty", c.PresencePenalty, &r.Presence}, {"frequency_penalty", c.FrequencyPenalty, &r.Frequency}} {
		if f.v == nil {
			continue
		}
		if *f.v < -2 || *f.v > 2 {
			return badRequest(f.name, "%s must be in [-2, 2], got %v.", f.name, *f.v)
		}
		*f.dst = *f.v
	}
	if c.RepetitionPenalty != nil {
		if *c.RepetitionPenalty <= 0 {
			return badRequest("repetition_penalty", "repetition_penalty must be greater than zero, got %v.", *c.RepetitionPenalty)
		}
		r.Repetition = *c.RepetitionPenalty
	}
	for k, v := range c.LogitBias {
		id, err := strconv.Atoi(k)
		if err != nil || id < 0 || id >= e.vocab {
			return badRequest("logit_bias", "token_id(s) [%s] in logit_bias contain out-of-vocab token ids. Vocabulary size: %d", k, e.vocab)
		}
		if r.Bias == nil {
			r.Bias = map[int32]float32{}
		}
		r.Bias[int32(id)] = float32(max(-100, min(100, v)))
	}
	return nil
}

// checkLogprobs validates a requested number of top logprobs.
func (e *Engine) checkLogprobs(param string, n int) *apiError {
	if n < 0 {
		return badRequest(param, "`%s` must be a positive value.", param)
	}
	if n > e.opts.MaxLogprobs {
		return badRequest(param, "Requested sample logprobs of %d, which is greater than max allowed: %d", n, e.opts.MaxLogprobs)
	}
	return nil
}

// maxTokensFor resolves max_tokens against the context window.
func (e *Engine) maxTokensFor(promptLen int, g genParams, what string) (int, *apiError) {
	room := e.maxModelLen - promptLen
	if room <= 0 {
		return 0, badRequest("messages", "This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input %s.", e.maxModelLen, promptLen, what)
	}
	if g.MaxTokens == nil {
		return room, nil
	}
	if *g.MaxTokens > room {
		return 0, badRequest("max_tokens", "'max_tokens' or 'max_completion_tokens' is too large: %d. This model's maximum context length is %d tokens and your request has %d input tokens (%d > %d - %d).", *g.MaxTokens, e.maxModelLen, promptLen, *g.MaxTokens, e.maxModelLen, promptLen)
	}
	return *g.MaxTokens, nil
}

// resolveModel maps a request's model field to nil (base) or an adapter,
// holding one reference per sequence to come.
func (e *Engine) resolveModel(name string) (*adapterEntry, *apiError) {
	if name == "" || name == e.opts.ServedModelName {
		return nil, nil
	}
	a, ok := e.adapters.acquire(name)
	if !ok {
		return nil, notFound("model", "The model `%s` does not exist.", name)
	}
	return a, nil
}

// newSeqs builds the n sequences of one prompt. Each holds its own adapter
// reference (acquired here; released by the scheduler).
func (e *Engine) newSeqs(ctx context.Context, prompt []int32, g genParams, maxTokens int, adapter *adapterEntry, notify chan struct{}) []*seq {
	stopIDs, eos := map[int32]bool{}, map[int32]bool{}
	if !g.IgnoreEOS {
		for id := range e.eos {
			stopIDs[id], eos[id] = true, true
		}
	}
	for _, id := range g.StopIDs {
		stopIDs[id] = true
	}
	base := rand.Uint64()
	if g.Seed != nil {
		base = uint64(*g.Seed)
	}
	out := make([]*seq, g.N)
	for i := range out {
		if adapter != nil {
			adapter.mu.Lock()
			adapter.refs++
			adapter.mu.Unlock()
		}
		params := g.Sampling
		if g.Guide != nil {
			params.Guide = g.Guide.newState(stopIDs, e.eos)
		}
		spec := &seqSpec{Prompt: prompt, Adapter: adapter, Params: params, MaxTokens: maxTokens,
			Stop: g.Stop, StopIDs: stopIDs, EOSIDs: eos, Seed: base + uint64(i), Rules: g.Rules,
			MinTokens: g.MinTokens, KeepSpecial: g.KeepSpecial, IncludeStop: g.IncludeStop, CacheSalt: g.CacheSalt}
		out[i] = newSeq(ctx, spec, notify)
	}
	return out
}

// collect drives sequences to completion, handing each batch of new events
// to fn (i is the sequence's position in seqs). It returns the first
// sequence error, or the context's error if the client went away.
func collect(ctx context.Context, seqs []*seq, notify chan struct{}, fn func(i int, evs []tokenEvent, done bool)) error {
	done := make([]bool, len(seqs))
	left := len(seqs)
	for left > 0 {
		select {
		case <-notify:
		case <-ctx.Done():
			return ctx.Err()
		}
		for i, q := range seqs {
			if done[i] {
				continue
			}
			evs, fin := q.out.take()
			if len(evs) > 0 || fin {
				fn(i, evs, fin)
			}
			if fin {
				done[i] = true
				left--
				if q.out.err != nil {
					return q.out.err
				}
			}
		}
	}
	return nil
}

// errorFor maps a generation failure to an API error.
func errorFor(err error) *apiError {
	if errors.Is(err, errClosed) {
		return unavailable("The engine is shutting down.")
	}
	return serverError(err)
}
