package proxy

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
	"github.com/valyala/fasthttp"
)

// Continuity modes (capture.continuity).
const (
	// ContinuityObserve sends prompts as the agent sent them: a client that
	// re-serialises an earlier turn, or a template that drops earlier
	// reasoning, starts a new trajectory (counted as drift).
	ContinuityObserve = "observe"
	// ContinuityTokens renders chat prompts in hone with the model's
	// template and tokenizer, puts back the token ids the engine sampled
	// for the assistant turns hone served in the session, and sends the
	// engine token ids (/v1/completions); the answer goes back to the
	// agent as the chat completion the engine would have sent.
	ContinuityTokens = "tokens"
)

// Sizes of continuity's bounded caches.
const (
	continuityTurns      = 65536    // served assistant turns (prompt + completion ids each)
	continuityBytes      = 64 << 20 // ... and at most this many bytes of their ids
	continuityConvos     = 8192     // sessions whose latest messages are kept normalised
	continuityConvoBytes = 64 << 20 // ... and at most this many bytes of them
	continuityPlans      = 8192     // calls in flight whose prompt hone rendered
)

// continuity is token continuity (capture.continuity: tokens): the model's
// chat template and tokenizer, the served turns of each session, and which
// engines passed the probe (their /tokenize agrees with hone's rendering).
type continuity struct {
	tmpl  *template.Model
	tok   tokenizer.Tokenizer
	parse chat.ParseOptions // the model's output parsers (reasoning, hermes tools)
	eos   []eosToken        // end-of-turn tokens, to find where a served turn ends in a rendering
	log   *slog.Logger

	turns  *sizedCache[*servedTurn]  // session + prefix hash -> ids
	convos *sizedCache[*convo]       // session -> its latest call's messages (continuity_incremental.go)
	plans  *lru.Cache[string, *plan] // call id -> plan, until the call is recorded
	inc    incremental               // rendering only what follows a served turn

	mu      sync.Mutex
	engines map[string]*atomic.Pointer[engineContinuity] // by engine URL

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

// engineContinuity is what the probe found for one engine.
type engineContinuity struct {
	tokens      bool   // the probe passed: tokens mode for this engine
	reason      string // why not, or "probe passed"
	maxModelLen int    // from /tokenize, for requests without max_tokens
}

// newContinuity loads the model folder dir for tokens mode. It returns
// nil with the reason when tokens mode cannot run (hone then observes).
func newContinuity(dir string, reg prometheus.Registerer, log *slog.Logger) (*continuity, error) {
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
	k := &continuity{tmpl: tm, tok: tok, log: log, engines: map[string]*atomic.Pointer[engineContinuity]{}}
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
	if k.plans, err = lru.New[string, *plan](continuityPlans); err != nil {
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

// state returns the probe result of an engine (nil: not probed yet).
func (k *continuity) state(url string) *engineContinuity {
	k.mu.Lock()
	p := k.engines[url]
	k.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.Load()
}

func (k *continuity) setState(url string, st *engineContinuity) {
	k.mu.Lock()
	p := k.engines[url]
	if p == nil {
		p = &atomic.Pointer[engineContinuity]{}
		k.engines[url] = p
	}
	k.mu.Unlock()
	p.Store(st)
	k.active.WithLabelValues(url).Set(b2f(st.tokens))
}

// ContinuityStatus describes continuity per engine, one line each, for
// /readyz ("" in observe mode).
func (s *Server) ContinuityStatus() string {
	if s.opts.Continuity != ContinuityTokens {
		return ""
	}
	if s.cont == nil {
		return "continuity: observe (" + s.contWhy + ")\n"
	}
	var sb strings.Builder
	for _, e := range s.pool.engines {
		st := s.cont.state(e.url)
		switch {
		case st == nil:
			fmt.Fprintf(&sb, "continuity: observe on %s (probe pending)\n", e.url)
		case st.tokens:
			fmt.Fprintf(&sb, "continuity: tokens on %s\n", e.url)
		default:
			fmt.Fprintf(&sb, "continuity: observe on %s (%s)\n", e.url, st.reason)
		}
	}
	return sb.String()
}

// continuityRecorder fills the served-turn cache from each recorded call,
// then hands the call on.
type continuityRecorder struct {
	Recorder
	k *continuity
}

func (r continuityRecorder) Record(c *capture.Call) {
	r.k.remember(c)
	r.Recorder.Record(c)
}

// latestCalls is a recorder that keeps calls across restarts
// (*capture.Store): the latest call of each open session.
type latestCalls interface {
	LatestOpenCalls(limit int) ([]*capture.Call, error)
}

// restore puts back the served turns of the open sessions' latest calls,
// so an agent in the middle of a conversation when hone restarted goes on
// with the token ids its engine sampled, not a re-tokenisation of their
// text (which can differ, and would start a new trajectory).
func (k *continuity) restore(lc latestCalls) {
	calls, err := lc.LatestOpenCalls(continuityConvos)
	if err != nil {
		k.log.Warn("continuity: served turns not restored past this point; those sessions' next calls are rendered afresh",
			"restored", len(calls), "err", err)
	}
	for i := len(calls) - 1; i >= 0; i-- { // oldest first: the newest are evicted last
		k.remember(calls[i])
	}
	if len(calls) > 0 {
		k.log.Info("continuity: served turns of open sessions restored", "sessions", len(calls))
	}
}

// planKey is the request context key of a call's continuity plan.
type planKey struct{}

// planOf returns the call's plan, nil when hone observes the call.
func planOf(ctx *fasthttp.RequestCtx) *plan {
	p, _ := ctx.UserValue(planKey{}).(*plan)
	return p
}
