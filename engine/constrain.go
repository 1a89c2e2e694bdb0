package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	mathbits "math/bits"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/hone-rl/hone/engine/internal/grammar"
)

// Constrained decoding: what vLLM enforces with structured outputs.
//
//   - tool_choice "required" or a named function: the output is hermes tool
//     calls as the chat template writes them, <tool_call>\n{"name": N,
//     "arguments": A}\n</tool_call> (N one of the tools, or the named one; A
//     per that tool's parameters schema), then EOS. "required" allows
//     several calls separated by "\n" unless parallel_tool_calls is false.
//   - response_format json_object: any JSON object; json_schema: the
//     schema's language (engine/internal/grammar has the subset).
//
// A request's constraint compiles to an automaton (cached per engine by its
// inputs); each sequence carries a guideState in its samplingParams. The
// sampler draws as usual and checks the token against the automaton; after
// guideTries rejections (or at once when the distribution needs the mask:
// logprobs, top-k, top-p, min-p) it masks every disallowed token and draws
// from the rest. Logprobs are those of the masked distribution, as vLLM
// reports them. Stop and EOS tokens are allowed only where the output is
// complete; where nothing may follow, they are all that is allowed.

// guideTries is how many sampled tokens may be rejected before the full
// mask is computed. One: on Qwen3's vocabulary a draw costs as much as
// applying a cached mask (both are a pass over 152k logits) and a cold mask
// costs less than a draw (BenchmarkGuidedSample), so a second draw does not
// pay.
const guideTries = 1

// guideDepth bounds free-form JSON (response_format json_object, schemas
// without a type or "type": "object" without properties): containers nest at
// most this deep.
const guideDepth = 6

// guide is a compiled output constraint.
type guide struct {
	a     *grammar.Automaton
	vocab *grammar.Vocab
}

// guideState is one sequence's place in its guide.
type guideState struct {
	g        *guide
	st       *grammar.State
	ends     []int32 // stop and EOS ids: allowed once the output is complete
	isEnd    map[int32]bool
	finished bool // an end token was sampled (the sequence goes on only with ignore_eos)
}

// newState starts a sequence; stopIDs are its stop ids, eos the model's
// EOS ids (allowed at the end even with ignore_eos, so a complete output
// can always end).
func (g *guide) newState(stopIDs, eos map[int32]bool) *guideState {
	s := &guideState{g: g, st: g.a.Start(), isEnd: map[int32]bool{}}
	for _, m := range []map[int32]bool{stopIDs, eos} {
		for id := range m {
			if !s.isEnd[id] && int(id) < g.vocab.Size() {
				s.isEnd[id] = true
				s.ends = append(s.ends, id)
			}
		}
	}
	slices.Sort(s.ends)
	return s
}

// allows reports whether token id may come next.
func (s *guideState) allows(id int32) bool {
	if s.isEnd[id] {
		return s.finished || s.st.Accepting()
	}
	return !s.finished && !s.g.a.Next(s.g.vocab, s.st, id).Dead()
}

func (s *guideState) advance(id int32) {
	if s.isEnd[id] || s.finished {
		s.finished = true
		return
	}
	s.st = s.g.a.Next(s.g.vocab, s.st, id)
}

// needsMask reports whether sampling with p needs the whole allowed set
// rather than rejection: logprobs are normalised over it, and top-k, top-p
// and min-p pick their candidates among the allowed tokens.
func needsMask(p samplingParams, vocab int) bool {
	if p.Logprobs || p.TopLogprobs > 0 {
		return true
	}
	if p.Temperature < samplingEps {
		return false
	}
	return (p.TopK > 0 && p.TopK < vocab) || p.TopP < 1 || p.MinP > 0
}

// sample draws the next token among those the guide allows (see the top
// of this file) and advances the guide.
func (s *guideState) sample(logits, processed []float32, p samplingParams, rng *rand.Rand) (int32, float32, []tokenProb) {
	p.Guide = nil
	negInf := float32(math.Inf(-1))
	if !needsMask(p, len(logits)) {
		work := processed
		for try := 0; try < guideTries; try++ {
			id, _, _ := sample(logits, work, p, rng)
			if s.allows(id) {
				s.advance(id)
				return id, 0, nil
			}
			if try+1 < guideTries {
				if try == 0 {
					work = slices.Clone(processed)
				}
				work[id] = negInf
			}
		}
	}
	mr, mp, ok := s.masked(logits, processed)
	if !ok { // nothing allowed: end the sequence if possible
		id := argmax(logits)
		if len(s.ends) > 0 {
			id = s.ends[0]
		}
		s.advance(id)
		return id, logits[id] - logSumExp(logits), nil
	}
	id, lp, top := sample(mr, mp, p, rng)
	s.advance(id)
	return id, lp, top
}

// masked copies raw and processed logits with disallowed tokens at -inf;
// ok is false when no token is allowed. When the processed logits allow
// nothing (min_tokens masks the stop ids the finished output needs), the
// masked raw logits stand in for them.
func (s *guideState) masked(raw, processed []float32) (mr, mp []float32, ok bool) {
	negInf := float32(math.Inf(-1))
	aliased := len(processed) > 0 && &processed[0] == &raw[0]
	mr = make([]float32, len(raw))
	for i := range mr {
		mr[i] = negInf
	}
	if !aliased {
		mp = slices.Clone(mr)
	}
	allow := func(id int) {
		mr[id] = raw[id]
		if mp != nil {
			mp[id] = processed[id]
		}
	}
	if !s.finished {
		for w, bits := range s.g.a.Mask(s.g.vocab, s.st) {
			for bits != 0 {
				id := w*64 + mathbits.TrailingZeros64(bits)
				bits &= bits - 1
				if id < len(raw) {
					allow(id)
				}
			}
		}
	}
	endOK := s.finished || s.st.Accepting()
	for _, id := range s.ends {
		if endOK {
			allow(int(id))
		} else {
			mr[id] = negInf
			if mp != nil {
				mp[id] = negInf
			}
		}
	}
	anyRaw, anyProc := false, false
	for i, v := range mr {
		if v != negInf {
			anyRaw = true
			if mp == nil || mp[i] != negInf {
				anyProc = true
				break
			}
		}
	}
	if mp == nil || !anyProc {
		mp = mr
	}
	return mr, mp, anyRaw
}

// guideCache holds an engine's compiled guides and its vocabulary as bytes.
type guideCache struct {
	once  sync.Once
	vocab *grammar.Vocab

	mu     sync.Mutex
	guides map[string]*guide
	order  []string // insertion order, for eviction
}

// maxGuides bounds the compiled guides an engine keeps (each holds at most
// 8 MiB of DFA states and 16 MiB of masks).
const maxGuides = 32

// guideVocab returns the engine's tokens as bytes: special tokens and EOS
// ids have none (they are never text; EOS is allowed by the guide's end
// rule).
func (e *Engine) guideVocab() *grammar.Vocab {
	c := &e.guides
	c.once.Do(func() {
		n := min(e.vocab, e.tok.VocabSize())
		tokens := make([][]byte, n)
		for id := int32(0); int(id) < n; id++ {
			if e.tok.IsSpecial(id) || e.eos[id] {
				continue
			}
			tokens[id] = e.tok.DecodeBytes([]int32{id})
		}
		c.vocab = grammar.NewVocab(e.vocab, tokens)
	})
	return c.vocab
}

// compileGuide returns the cached guide for key, or builds it.
func (e *Engine) compileGuide(key string, opts grammar.Options, build func(b *grammar.Builder) (grammar.Frag, error)) (*guide, error) {
	c := &e.guides
	c.mu.Lock()
	if g, ok := c.guides[key]; ok {
		c.mu.Unlock()
		return g, nil
	}
	c.mu.Unlock()
	opts.MaxDepth = guideDepth
	b := grammar.NewBuilder(opts)
	f, err := build(b)
	if err != nil {
		return nil, err
	}
	a, err := b.Compile(f)
	if err != nil {
		return nil, err
	}
	g := &guide{a: a, vocab: e.guideVocab()}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.guides == nil {
		c.guides = map[string]*guide{}
	}
	if _, ok := c.guides[key]; !ok {
		if len(c.order) >= maxGuides {
			delete(c.guides, c.order[0])
			c.order = c.order[1:]
		}
		c.order = append(c.order, key)
		c.guides[key] = g
	}
	return c.guides[key], nil
}

// responseFormat is the response_format field.
type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
	} `json:"json_schema"`
}

// formatGuide compiles response_format (nil: no constraint). thinkOpen
// lets a reasoning block the prompt opened run free up to </think> first.
func (e *Engine) formatGuide(raw json.RawMessage, thinkOpen bool) (*guide, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var rf responseFormat
	if err := json.Unmarshal(raw, &rf); err != nil {
		return nil, badRequest("response_format", "response_format: %v", err)
	}
	var key string
	var build func(b *grammar.Builder) (grammar.Frag, error)
	switch rf.Type {
	case "text":
		return nil, nil
	case "json_object":
		key = "json_object"
		build = func(b *grammar.Builder) (grammar.Frag, error) { return b.AnyObject(), nil }
	case "json_schema":
		if rf.JSONSchema == nil {
			return nil, badRequest("response_format", "response_format of type json_schema needs a json_schema field.")
		}
		schema := bytes.TrimSpace(rf.JSONSchema.Schema)
		key = "json_schema\x00" + string(schema)
		build = func(b *grammar.Builder) (grammar.Frag, error) {
			if len(schema) == 0 || string(schema) == "null" {
				return b.AnyValue(), nil
			}
			return b.Schema(schema)
		}
	case "structural_tag":
		return nil, badRequest("response_format", "response_format of type structural_tag is not supported by this engine.")
	default:
		return nil, badRequest("response_format", "response_format type must be one of text, json_object, json_schema, got %q.", rf.Type)
	}
	g, err := e.compileGuide(thinkKey(key, thinkOpen), grammar.Options{}, withThink(build, thinkOpen))
	if err != nil {
		return nil, badRequest("response_format", "response_format: %v", err)
	}
	return g, nil
}

func thinkKey(key string, thinkOpen bool) string {
	if thinkOpen {
		return "think\x00" + key
	}
	return key
}

// withThink prefixes the language with the end of an open reasoning block
// (free text up to the first </think>, then an optional blank line).
func withThink(build func(b *grammar.Builder) (grammar.Frag, error), thinkOpen bool) func(b *grammar.Builder) (grammar.Frag, error) {
	if !thinkOpen {
		return build
	}
	return func(b *grammar.Builder) (grammar.Frag, error) {
		f, err := build(b)
		if err != nil {
			return f, err
		}
		return b.Seq(b.UntilLit("</think>"), b.Opt(b.Lit("\n\n")), f), nil
	}
}

// toolChoice is a request's tool_choice resolved: "auto", "none",
// "required" or "named" (with name).
type toolChoice struct {
	mode string
	name string
}

// parseToolChoice reads tool_choice ("auto" when absent).
func parseToolChoice(raw json.RawMessage) (toolChoice, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return toolChoice{mode: "auto"}, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto", "none", "required":
			return toolChoice{mode: s}, nil
		}
		return toolChoice{}, badRequest("tool_choice", "Invalid value for `tool_choice`: %s! Only named tools, \"none\", \"auto\" or \"required\" are supported.", s)
	}
	const usage = "Correct usage: `{\"type\": \"function\", \"function\": {\"name\": \"my_function\"}}`"
	var obj struct {
		Function json.RawMessage `json:"function"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return toolChoice{}, badRequest("tool_choice", "Invalid value for `tool_choice`: %s! Only named tools, \"none\", \"auto\" or \"required\" are supported.", raw)
	}
	var fn map[string]json.RawMessage
	if json.Unmarshal(obj.Function, &fn) != nil || fn == nil {
		return toolChoice{}, badRequest("tool_choice", "Invalid value for `function`: `%s` in `tool_choice`! %s", obj.Function, usage)
	}
	nameRaw, ok := fn["name"]
	if !ok {
		return toolChoice{}, badRequest("tool_choice", "Expected field `name` in `function` in `tool_choice`! %s", usage)
	}
	var name string
	if json.Unmarshal(nameRaw, &name) != nil || name == "" {
		return toolChoice{}, badRequest("tool_choice", "Invalid `name` in `function`: `%s` in `tool_choice`! %s", nameRaw, usage)
	}
	return toolChoice{mode: "named", name: name}, nil
}

// forcesToolCall reports whether tool_choice demands a tool call.
func forcesToolCall(req *chatRequest) bool {
	tc, apiErr := parseToolChoice(req.ToolChoice)
	return apiErr == nil && (tc.mode == "required" || tc.mode == "named")
}

// toolDef is one entry of "tools".
type toolDef struct {
	Type     string `json:"type"`
	Function struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// chatGuide resolves a chat request's constraint: a forced tool call, else
// response_format (format is validate's, compiled without the reasoning
// prefix). thinkOpen: the prompt leaves a <think> block open that the
// reasoning parser will read up to </think>.
func (e *Engine) chatGuide(req *chatRequest, format *guide, thinkOpen bool) (*guide, *apiError) {
	tc, apiErr := parseToolChoice(req.ToolChoice)
	if apiErr != nil {
		return nil, apiErr
	}
	if tc.mode != "required" && tc.mode != "named" {
		if format != nil && thinkOpen {
			return e.formatGuide(req.ResponseFormat, true)
		}
		return format, nil
	}
	var tools []toolDef
	if t := bytes.TrimSpace(req.Tools); len(t) > 0 && string(t) != "null" {
		if err := json.Unmarshal(t, &tools); err != nil {
			return nil, badRequest("tools", "tools: %v", err)
		}
	}
	if len(tools) == 0 {
		return nil, badRequest("tool_choice", "When using `tool_choice`, `tools` must be set.")
	}
	chosen := tools
	if tc.mode == "named" {
		chosen = nil
		for _, t := range tools {
			if t.Function.Name == tc.name {
				chosen = append(chosen, t)
				break
			}
		}
		if len(chosen) == 0 {
			return nil, badRequest("tool_choice", "The tool specified in `tool_choice` does not match any of the specified `tools`")
		}
	}
	parallel := tc.mode == "required" && (req.ParallelToolCalls == nil || *req.ParallelToolCalls)
	key := fmt.Sprintf("tools\x00%s\x00%v\x00", tc.name, parallel)
	for _, t := range chosen {
		key += t.Function.Name + "\x00" + string(bytes.TrimSpace(t.Function.Parameters)) + "\x00"
	}
	build := func(b *grammar.Builder) (grammar.Frag, error) {
		block := func() (grammar.Frag, error) {
			calls := make([]grammar.Frag, 0, len(chosen))
			for _, t := range chosen {
				args, err := toolArguments(b, t.Function.Parameters)
				if err != nil {
					return grammar.Frag{}, fmt.Errorf("tool %q: parameters: %w", t.Function.Name, err)
				}
				head := b.Lit(`{"name": ` + grammar.QuoteString(t.Function.Name) + `, "arguments": `)
				calls = append(calls, b.Seq(head, args, b.Lit("}")))
			}
			return b.Seq(b.Lit("<tool_call>\n"), b.Alt(calls...), b.Lit("\n</tool_call>")), nil
		}
		if !parallel {
			return block()
		}
		return b.List("", "\n", "", 1, -1, block)
	}
	g, err := e.compileGuide(thinkKey(key, thinkOpen), grammar.Options{Forbid: "</tool_call>"}, withThink(build, thinkOpen))
	if err != nil {
		return nil, badRequest("tools", "%v", err)
	}
	return g, nil
}

// toolArguments builds a tool's arguments: its parameters schema; an empty
// schema ({} however spaced, or true) takes any object, missing or null
// parameters exactly {} (as vLLM's required mode writes it).
func toolArguments(b *grammar.Builder, params json.RawMessage) (grammar.Frag, error) {
	params = bytes.TrimSpace(params)
	var fields map[string]json.RawMessage
	switch {
	case len(params) == 0 || string(params) == "null":
		return b.Lit("{}"), nil
	case string(params) == "true" || (json.Unmarshal(params, &fields) == nil && fields != nil && len(fields) == 0):
		return b.AnyObject(), nil
	}
	return b.Schema(params)
}

// thinkOpenFor reports whether the reasoning parser will read the start of
// this chat output as reasoning (the prompt left <think> open).
func (e *Engine) thinkOpenFor(req chatRequest, promptText string) bool {
	o := e.parseOptions(&chatJob{req: req, promptText: promptText})
	return o.Reasoning && o.ThinkOpen
}
