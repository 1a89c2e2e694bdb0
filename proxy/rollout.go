package proxy

import (
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/internal/jsonwalk"
	"github.com/hone-rl/hone/rollout"
	"github.com/tidwall/gjson"
)

// Guarded rollouts on the data plane: while an alias has a candidate
// version in rollout, the rollout manager says per session which version
// serves it (sticky), and every call's outcome feeds its guards (errors, latency, length, tool calls). The
// alias table keeps pointing at the incumbent until a promotion swaps it.

// SetRollouts routes aliases through m's rollouts, and swaps an alias to
// its candidate when a rollout promotes it. Call it before Serve.
func (s *Server) SetRollouts(m *rollout.Manager) {
	s.rollouts = m
	m.OnDecision(func(r rollout.Rollout) {
		if r.Decision == rollout.Promoted {
			s.aliases.Swap(r.Alias, r.Candidate.Target, r.Candidate.Version)
		}
	})
}

// pinned returns the policy of the trained version whose engine-side name
// (agent-v3) an agent called directly instead of an alias: a published
// version, or a running rollout's candidate.
func (s *Server) pinned(name string) (Policy, bool) {
	if _, ok := s.aliases.Lookup(name); ok {
		return Policy{}, false
	}
	if p, ok := s.aliases.published(name); ok || s.rollouts == nil {
		return p, ok
	}
	alias, v, ok := s.rollouts.CandidateOf(name)
	return Policy{Alias: alias, Target: v.Target, Version: v.Version}, ok
}

// acquirePinned counts a call that names a trained version directly
// (pinned) against that version, so it is captured as that version and a
// publisher does not unload the adapter under it; the returned func
// releases it. ok is false for any other name.
func (s *Server) acquirePinned(name string) (Policy, func(), bool) {
	p, ok := s.pinned(name)
	if !ok {
		return Policy{}, nil, false
	}
	return p, s.aliases.hold(p.Alias, p.Version), true
}

// trainedTarget reports whether name is the engine's name of a trained
// version, which /v1/models leaves out.
func (s *Server) trainedTarget(name string) bool {
	_, ok := s.pinned(name)
	return ok
}

// Rollouts returns the manager set by SetRollouts (nil: none).
func (s *Server) Rollouts() *rollout.Manager { return s.rollouts }

// routeRollout moves c to the version its session is served by under its
// alias's running rollout. The call is counted against that version before
// the route is checked again, so a rollback that unloads the candidate
// once nothing is in flight either sees this call or this call stays on
// the incumbent: an adapter is never unloaded under a call about to use it.
func (s *Server) routeRollout(c *call, session string) {
	if s.rollouts == nil || !c.isAlias || session == "" {
		return
	}
	alias := c.policy.Alias
	for {
		v, ok := s.rollouts.Route(alias, session)
		if !ok || v.Version == c.policy.Version {
			return // the live version serves it, already held
		}
		release := s.aliases.hold(alias, v.Version)
		if now, ok := s.rollouts.Route(alias, session); ok && now == v {
			c.release()
			c.policy, c.target, c.release = Policy{Alias: alias, Target: v.Target, Version: v.Version}, v.Target, release
			return
		}
		release()
	}
}

// observeRollout feeds a finished call to its alias's rollout guard.
func (s *Server) observeRollout(c *call) {
	if s.rollouts == nil || !c.isAlias || c.eng == nil || c.status == capture.StatusClientDisconnected {
		return
	}
	o := rollout.Call{Failed: c.status != capture.StatusOK && (c.status != capture.StatusUpstreamError || c.httpStatus >= 500),
		Latency: time.Since(c.start), CompletionTokens: c.acc.usage.CompletionTokens}
	for _, ch := range c.acc.choices {
		if o.CompletionTokens == 0 {
			o.CompletionTokens += len(ch.TokenIDs)
		}
		for _, tc := range ch.ToolCalls {
			o.ToolCalls++
			if !jsonwalk.Valid(tc.Arguments) || !gjson.Parse(tc.Arguments).IsObject() {
				o.BadToolCalls++
			}
		}
	}
	s.rollouts.ObserveCall(c.policy.Alias, c.policy.Version, o)
}
