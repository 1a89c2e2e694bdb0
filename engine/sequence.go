package engine

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hone-rl/hone/model/tokenizer"
)

// seqSpec is what a request asks of one generated sequence.
type seqSpec struct {
	Prompt      []int32
	Adapter     *adapterEntry // nil for the base model
	Params      samplingParams
	Rules       logitRules
	MaxTokens   int
	Stop        []string
	StopIDs     map[int32]bool // token ids that end the sequence (EOS unless ignore_eos, stop_token_ids)
	EOSIDs      map[int32]bool // the subset of StopIDs that are EOS (stop_reason null)
	MinTokens   int            // stop ids are masked and stop strings unchecked before this many tokens
	KeepSpecial bool           // skip_special_tokens false: special tokens stay in the text
	IncludeStop bool           // include_stop_str_in_output: the matched stop string stays in the text
	CacheSalt   string         // prefix-cache partition: only caches of the same salt are reused
	Seed        uint64
}

// tokenEvent is one generated token as the scheduler reports it.
type tokenEvent struct {
	ID      int32
	Logprob float32
	Top     []tokenProb
	Text    string // text made visible by this token (may be empty, held back, or hold earlier text)
}

// seqOutput is the handler-visible state of a sequence, written by the
// scheduler and drained by the HTTP handler.
type seqOutput struct {
	mu         sync.Mutex
	events     []tokenEvent
	done       bool
	finish     string // stop | length | abort
	stopReason any    // nil, stop string, or stop token id
	err        error
	notify     chan struct{} // shared by a request's sequences, capacity 1
}

// take returns the events produced since the last call and whether the
// sequence has finished.
func (o *seqOutput) take() ([]tokenEvent, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	ev := o.events
	o.events = nil
	return ev, o.done
}

func (o *seqOutput) push(ev tokenEvent) {
	o.mu.Lock()
	o.events = append(o.events, ev)
	o.mu.Unlock()
	o.signal()
}

// last records the final token and the finish together, so a reader sees
// both in one take.
func (o *seqOutput) last(ev tokenEvent, finish string, reason any) {
	o.mu.Lock()
	o.events = append(o.events, ev)
	o.done, o.finish, o.stopReason = true, finish, reason
	o.mu.Unlock()
	o.signal()
}

func (o *seqOutput) end(finish string, reason any, err error) {
	o.mu.Lock()
	o.done, o.finish, o.stopReason, o.err = true, finish, reason, err
	o.mu.Unlock()
	o.signal()
}

func (o *seqOutput) signal() {
	select {
	case o.notify <- struct{}{}:
	default:
	}
}

// seq is one sequence inside the scheduler.
type seq struct {
	spec     *seqSpec
	ctx      context.Context
	out      *seqOutput
	rng      *rand.Rand
	cache    lmCache
	pending  []int32 // tokens for the next forward
	fed      []int32 // tokens already in the cache
	ngen     int
	textIDs  []int32 // generated ids that render as text (stop ids and special tokens excluded)
	sent     int     // bytes of text already reported
	textLen  int     // bytes of text after the previous token
	maxStop  int
	start    time.Time
	counts   map[int32]int  // output token counts, when penalties apply
	inPrompt map[int32]bool // prompt tokens, when a repetition penalty applies
}

func newSeq(ctx context.Context, spec *seqSpec, notify chan struct{}) *seq {
	s := &seq{spec: spec, ctx: ctx, out: &seqOutput{notify: notify}, pending: spec.Prompt, start: time.Now()}
	s.rng = rand.New(rand.NewPCG(spec.Seed, spec.Seed^0x9e3779b97f4a7c15))
	for _, st := range spec.Stop {
		s.maxStop = max(s.maxStop, len(st))
	}
	if spec.Rules.active() {
		s.counts = map[int32]int{}
	}
	if spec.Rules.Repetition != 1 {
		s.inPrompt = map[int32]bool{}
		for _, id := range spec.Prompt {
			s.inPrompt[id] = true
		}
	}
	return s
}

// processed applies the sequence's logits processors to raw logits.
func (s *seq) processed(raw []float32) []float32 {
	out := raw
	if s.counts != nil {
		out = s.spec.Rules.apply(raw, s.counts, s.inPrompt)
	}
	if s.ngen < s.spec.MinTokens && len(s.spec.StopIDs) > 0 {
		if s.counts == nil {
			out = append([]float32(nil), raw...)
		}
		for id := range s.spec.StopIDs {
			out[id] = float32(math.Inf(-1))
		}
	}
	return out
}

// accept records a sampled token; it reports whether the sequence finished.
func (s *seq) accept(tok tokenizer.Tokenizer, id int32, lp float32, top []tokenProb) bool {
	s.ngen++
	if s.counts != nil {
		s.counts[id]++
	}
	ev := tokenEvent{ID: id, Logprob: lp, Top: top}
	text, finish, reason := s.advance(tok, id)
	visible := text
	if finish == "" {
		visible = holdBack(text, s.maxStop)
	}
	if len(visible) > s.sent {
		ev.Text = visible[s.sent:]
		s.sent = len(visible)
	}
	if finish != "" {
		s.out.last(ev, finish, reason)
		return true
	}
	s.out.push(ev)
	s.pending = []int32{id}
	return false
}

// advance adds a token to the text and decides whether it ends the
// sequence: a stop token, a stop string (the text is cut before it, or after
// it with include_stop_str_in_output), or max_tokens.
func (s *seq) advance(tok tokenizer.Tokenizer, id int32) (text, finish string, reason any) {
	if s.spec.StopIDs[id] {
		finish = "stop"
		if !s.spec.EOSIDs[id] {
			reason = int(id)
		}
	} else if s.spec.KeepSpecial || !tok.IsSpecial(id) {
		s.textIDs = append(s.textIDs, id)
	}
	text = tok.Decode(s.textIDs)
	if finish == "" && s.ngen >= s.spec.MinTokens {
		if cut, st, ok := s.findStop(text, s.textLen-utf8.UTFMax); ok {
			if s.spec.IncludeStop {
				cut += len(st)
			}
			text, finish, reason = text[:cut], "stop", st
		}
	}
	if finish == "" && s.ngen >= s.spec.MaxTokens {
		finish = "length"
	}
	s.textLen = len(text)
	return text, finish, reason
}

// findStop looks for a stop string that ends after byte from.
func (s *seq) findStop(text string, from int) (int, string, bool) {
	best, which := -1, ""
	for _, st := range s.spec.Stop {
		start := max(0, from-len(st)+1)
		if i := strings.Index(text[start:], st); i >= 0 && (best < 0 || start+i < best) {
			best, which = start+i, st
		}
	}
	return best, which, best >= 0
}

// holdBack trims what may still change or turn into a stop string: trailing
// replacement characters (an incomplete UTF-8 sequence) and the last
// maxStop-1 bytes, cut at a rune boundary.
func holdBack(text string, maxStop int) string {
	text = strings.TrimRight(text, "\uFFFD")
	n := len(text) - max(0, maxStop-1)
	if n <= 0 {
		return ""
	}
	for n > 0 && n < len(text) && !utf8.RuneStart(text[n]) {
		n--
	}
	return text[:n]
}
