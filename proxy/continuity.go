package proxy

import (
	"context"
	"fmt"
	"strings"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/proxy/continuity"
	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
)

// Continuity modes (capture.continuity); package continuity documents them.
const (
	// ContinuityObserve sends prompts as the agent sent them.
	ContinuityObserve = continuity.Observe
	// ContinuityTokens renders chat prompts in hone and sends token ids.
	ContinuityTokens = continuity.Tokens
)

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
		st := s.cont.State(e.url)
		switch {
		case st == nil:
			fmt.Fprintf(&sb, "continuity: observe on %s (probe pending)\n", e.url)
		case st.Tokens:
			fmt.Fprintf(&sb, "continuity: tokens on %s\n", e.url)
		default:
			fmt.Fprintf(&sb, "continuity: observe on %s (%s)\n", e.url, st.Reason)
		}
	}
	return sb.String()
}

// continuityRecorder fills the served-turn cache from each recorded call,
// then hands the call on.
type continuityRecorder struct {
	Recorder
	k *continuity.Continuity
}

func (r continuityRecorder) Record(c *capture.Call) {
	r.k.Remember(c)
	r.Recorder.Record(c)
}

// planKey is the request context key of a call's continuity plan.
type planKey struct{}

// planOf returns the call's plan, nil when hone observes the call.
func planOf(ctx *fasthttp.RequestCtx) *continuity.Plan {
	p, _ := ctx.UserValue(planKey{}).(*continuity.Plan)
	return p
}

// useContinuity plans a call in tokens mode and attaches the plan to the
// request; calls it does not cover go to the engine as sent.
func (s *Server) useContinuity(ctx *fasthttp.RequestCtx, c *call, body, up []byte) {
	if s.cont == nil || !c.dialect.rendersChat() || !c.verdict.Capture {
		return
	}
	p, err := s.cont.Plan(c.id, c.verdict.Session, body, up)
	if err != nil {
		s.log.Debug("continuity: call observed", "call", c.id, "why", err)
		return
	}
	ctx.SetUserValue(planKey{}, p)
}

// probe compares hone's rendering of continuity's probe conversation with
// engine e's /tokenize and logs what changed.
func (s *Server) probe(ctx context.Context, e *engine) {
	st, changed := s.cont.Probe(ctx, e.url, e.kind, func(ctx context.Context, body []byte) ([]int32, int, error) {
		status, reply, err := s.postTokenize(ctx, e, body)
		switch {
		case err != nil:
			return nil, 0, fmt.Errorf("POST /tokenize: %w", err)
		case status != 200:
			return nil, 0, fmt.Errorf("POST /tokenize answered %d: %.200s", status, reply)
		}
		ids, err := parseTokenizeReply(reply)
		if err != nil {
			return nil, 0, fmt.Errorf("/tokenize reply: %w", err)
		}
		return ids, int(gjson.GetBytes(reply, "max_model_len").Int()), nil
	})
	switch {
	case !changed:
	case st.Tokens:
		s.log.Info("continuity: tokens mode", "engine", e.url, "max_model_len", st.MaxModelLen)
	default:
		s.log.Warn("continuity: observing this engine", "engine", e.url, "why", st.Reason)
	}
}

// probeAll probes every engine (at start).
func (s *Server) probeAll(ctx context.Context) {
	for _, e := range s.pool.engines {
		s.probe(ctx, e)
	}
}
