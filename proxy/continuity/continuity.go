// Package continuity is token continuity (capture.continuity: tokens): hone
// renders a chat call's prompt with the model's chat template and
// tokenizer, puts back the token ids the engine sampled for the assistant
// turns hone served earlier in the session, and sends the engine token ids
// (/v1/completions), so a multi-turn trajectory is token-exact; the answer
// goes back to the agent as the chat completion the engine would have sent.
// An engine takes token ids only once a probe found its /tokenize rendering
// equal to hone's.
//
// Files: continuity.go (the state, engines' probe results, restore),
// probe.go (the probe), prompt.go (planning a call: rendering and splicing),
// incremental.go (rendering only what follows a served turn), canon.go
// (messages by meaning, prefix hashes), covered.go (which requests it
// covers; structural tags), forced.go (forced tool calls), response.go and
// stream.go (a completions answer back into a chat completion, whole and
// streamed), sizedcache.go (the byte-bounded caches).
//
// The data plane (package proxy) calls Plan for each captured chat call,
// Upstream for the engine it picks, ChatBody or ChatStream for the answer,
// and Remember for each recorded call.
package continuity

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/model/chat"
	"github.com/hone-rl/hone/model/template"
	"github.com/hone-rl/hone/model/tokenizer"
	"github.com/prometheus/client_golang/prometheus"
)

// Continuity modes (capture.continuity).
const (
	// Observe sends prompts as the agent sent them: a client that
	// re-serialises an earlier turn, or a template that drops earlier
	// reasoning, starts a new trajectory (counted as drift).
	Observe = "observe"
	// Tokens renders chat prompts in hone with the model's
	// template and tokenizer, puts back the token ids the engine sampled
	// for the assistant turns hone served in the session, and sends the
	// engine token ids (/v1/completions); the answer goes back to the
	// agent as the chat completion the engine would have sent.
	Tokens = "tokens"
)

// Sizes of continuity's bounded caches.
const (
	continuityTurns      = 65536    // served assistant turns (prompt + completion ids each)
	continuityBytes      = 64 << 20 // ... and at most this many bytes of their ids
	continuityConvos     = 8192     // sessions whose latest messages are kept normalised
	continuityConvoBytes = 64 << 20 // ... and at most this many bytes of them
	continuityPlans      = 8192     // calls in flight whose prompt hone rendered
)

// Continuity is token continuity's state: the model's chat template and
// tokenizer, the served turns of each session, and which engines passed the
// probe (their /tokenize agrees with hone's rendering).
type Continuity struct {
	tmpl  *template.Model
	tok   tokenizer.Tokenizer
	parse chat.ParseOptions // the model's output parsers (reasoning, hermes tools)
	eos   []eosToken        // end-of-turn tokens, to find where a served turn ends in a rendering
	log   *slog.Logger

	turns  *sizedCache[*servedTurn]  // session + prefix hash -> ids
	convos *sizedCache[*convo]       // session -> its latest call's messages (continuity_incremental.go)
	plans  *lru.Cache[string, *Plan] // call id -> plan, until the call is recorded
	inc    incremental               // rendering only what follows a served turn

	mu      sync.Mutex
	engines map[string]*atomic.Pointer[EngineState] // by engine URL

	active  *prometheus.GaugeVec   // engine: 1 tokens, 0 observe
	calls   *prometheus.CounterVec // result: spliced, rendered, fallback
	spliced prometheus.Counter     // assistant turns whose sampled ids were put back
}

// eosToken is a token that ends generation, with its text.
type eosToken struct {
	id   int32
	text string
}

// servedTurn is the token path of one served assistant turn: the prompt
// ids sent and the completion ids the engine sampled.
type servedTurn struct {
	ids   []int32
	ended bool // the completion ends with an end-of-turn token
}

// EngineState is what the probe found for one engine.
type EngineState struct {
	Tokens      bool   // the probe passed: tokens mode for this engine
	Reason      string // why not, or "probe passed"
	MaxModelLen int    // from /tokenize, for requests without max_tokens
}

// New loads the model folder dir for tokens mode. It returns nil with the
// reason when tokens mode cannot run (hone then observes).
func New(dir string, reg prometheus.Registerer, log *slog.Logger) (*Continuity, error) {
	if dir == "" {
		return nil, errors.New("no model folder: set --model or engine.tokenizer")
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	tm, err := template.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load chat template: %w", err)
	}
	if len(tm.Templates) == 0 {
		return nil, fmt.Errorf("%s has no chat template", dir)
	}
	k := &Continuity{tmpl: tm, tok: tok, log: log, engines: map[string]*atomic.Pointer[EngineState]{}}
	for _, src := range tm.Templates {
		k.parse.Reasoning = k.parse.Reasoning || strings.Contains(src, "<think>")
		k.parse.Tools = k.parse.Tools || strings.Contains(src, "<tool_call>")
	}
	for _, id := range tok.Config().EOSIDs {
		if t := tok.Decode([]int32{id}); t != "" {
			k.eos = append(k.eos, eosToken{id, t})
		}
	}
	if len(k.eos) == 0 {
		return nil, fmt.Errorf("%s: the tokenizer names no end-of-sequence token", dir)
	}
	if k.turns, err = newSizedCache(continuityTurns, continuityBytes, func(t *servedTurn) int64 { return 4 * int64(len(t.ids)) }); err != nil {
		return nil, err
	}
	if k.convos, err = newSizedCache(continuityConvos, continuityConvoBytes, (*convo).bytes); err != nil {
		return nil, err
	}
	if k.plans, err = lru.New[string, *Plan](continuityPlans); err != nil {
		return nil, err
	}
	k.active = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hone_continuity_tokens",
		Help: "1 when calls to the engine run in continuity mode tokens, 0 when hone observes (probe failed or pending)."},
		[]string{"engine"})
	k.calls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hone_continuity_calls_total",
		Help: "Chat calls in continuity mode tokens: spliced (earlier sampled ids put back), rendered (no served turn " +
			"found), observe (sent as the agent sent it: engine not probed, or a request tokens mode does not cover)."},
		[]string{"result"})
	k.spliced = prometheus.NewCounter(prometheus.CounterOpts{Name: "hone_continuity_turns_spliced_total",
		Help: "Served assistant turns whose sampled token ids were put back into a prompt."})
	k.inc.init(k)
	if reg != nil {
		reg.MustRegister(k.active, k.calls, k.spliced, k.inc.checks)
	}
	return k, nil
}

// State returns the probe result of an engine (nil: not probed yet).
func (k *Continuity) State(url string) *EngineState {
	k.mu.Lock()
	p := k.engines[url]
	k.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.Load()
}

func (k *Continuity) setState(url string, st *EngineState) {
	k.mu.Lock()
	p := k.engines[url]
	if p == nil {
		p = &atomic.Pointer[EngineState]{}
		k.engines[url] = p
	}
	k.mu.Unlock()
	p.Store(st)
	active := 0.0
	if st.Tokens {
		active = 1
	}
	k.active.WithLabelValues(url).Set(active)
}

// LatestCalls is a recorder that keeps calls across restarts
// (*capture.Store): the latest call of each open session.
type LatestCalls interface {
	LatestOpenCalls(limit int) ([]*capture.Call, error)
}

// Restore puts back the served turns of the open sessions' latest calls,
// so an agent in the middle of a conversation when hone restarted goes on
// with the token ids its engine sampled, not a re-tokenisation of their
// text (which can differ, and would start a new trajectory).
func (k *Continuity) Restore(lc LatestCalls) {
	calls, err := lc.LatestOpenCalls(continuityConvos)
	if err != nil {
		k.log.Warn("continuity: served turns not restored past this point; those sessions' next calls are rendered afresh",
			"restored", len(calls), "err", err)
	}
	for i := len(calls) - 1; i >= 0; i-- { // oldest first: the newest are evicted last
		k.Remember(calls[i])
	}
	if len(calls) > 0 {
		k.log.Info("continuity: served turns of open sessions restored", "sessions", len(calls))
	}
}
