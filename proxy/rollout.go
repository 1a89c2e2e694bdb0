package proxy

import (
	"time"

	"github.com/hone-rl/hone/capture"
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

// acquirePinned counts a call that names a trained version's adapter
// directly (agent-v3: a published version, or a running rollout's
// candidate) against that version; ok is false for any other name.
func (s *Server) acquirePinned(name string) (Policy, func(), bool) {
	if p, release, ok := s.aliases.acquirePinned(name); ok {
		return p, release, true
	}
	if s.rollouts == nil {
		return Policy{}, nil, false
	}
	if _, ok := s.aliases.Lookup(name); ok {
		return Policy{}, nil, false
	}
	alias, v, ok := s.rollouts.CandidateOf(name)
	if !ok {
		return Policy{}, nil, false
	}
	return Policy{Alias: alias, Target: v.Target, Version: v.Version}, s.aliases.hold(alias, v.Version), true
}

// trainedTarget reports whether name is the engine's name of a trained
// version (published, or a rollout's candidate), which /v1/models leaves out.
func (s *Server) trainedTarget(name string) bool {
	if s.aliases.trainedTarget(name) {
		return true
	}
	if s.rollouts == nil {
		return false
	}
	if _, ok := s.aliases.Lookup(name); ok {
		return false
	}
	_, _, ok := s.rollouts.CandidateOf(name)
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
			if !gjson.Valid(tc.Arguments) || !gjson.Parse(tc.Arguments).IsObject() {
				o.BadToolCalls++
			}
		}
	}
	s.rollouts.ObserveCall(c.policy.Alias, c.policy.Version, o)
}
