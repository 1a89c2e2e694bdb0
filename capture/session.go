package capture

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// State is a session's lifecycle state.
type State string

// Session states: open sessions take calls; committed ones wait for a
// reward; ready ones have experiences in the ready queue; consumed ones were
// acknowledged by a trainer; dropped ones got no reward by the deadline.
const (
	StateOpen      State = "open"
	StateCommitted State = "committed"
	StateReady     State = "ready"
	StateConsumed  State = "consumed"
	StateDropped   State = "dropped"
)

// States lists every state in lifecycle order.
var States = []State{StateOpen, StateCommitted, StateReady, StateConsumed, StateDropped}

// ParseState parses a state name.
func ParseState(s string) (State, error) {
	for _, st := range States {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("unknown session state %q", s)
}

// Reward is one reward given to a session or to one of its calls.
type Reward struct {
	Value   float64   `json:"value"`
	Call    string    `json:"call,omitempty"` // set for call-level rewards
	Source  string    `json:"source"`         // header, feedback, trinity, default
	Comment string    `json:"comment,omitempty"`
	Tags    []string  `json:"tags,omitempty"`
	At      time.Time `json:"at"`
}

// Session is the stored record of one session.
type Session struct {
	V        int       `json:"v"`
	ID       string    `json:"id"`
	Task     string    `json:"task,omitempty"`
	Model    string    `json:"model,omitempty"`
	Tags     []string  `json:"tags,omitempty"`
	State    State     `json:"state"`
	Since    time.Time `json:"since"` // when the session entered State
	Created  time.Time `json:"created"`
	LastCall time.Time `json:"last_call"`
	Calls    int       `json:"calls"`
	NextSeq  uint64    `json:"next_seq"`
	Rewards  []Reward  `json:"rewards,omitempty"`
	RunID    string    `json:"run_id,omitempty"`
	Closed   string    `json:"closed_by,omitempty"` // commit, header, idle, trinity
	Drift    int       `json:"drift"`
	// Drifts says where and why calls drifted, as of the last build of
	// the session's experiences.
	Drifts []Drift `json:"drifts,omitempty"`
	// Compactions counts calls that started a new path of the session
	// because the agent replaced its history by a summary (not drift; see
	// compaction.go), as of the last build.
	Compactions int      `json:"compactions,omitempty"`
	Cursors     []uint64 `json:"cursors,omitempty"` // ready-queue cursors of its experiences

	// Owner is the opaque client id of the session's first call ("" when
	// hone runs without client keys). See doc.go, Ownership.
	Owner string `json:"owner,omitempty"`
	// A consumed session that gets another call is continued by a new
	// session, <root>.<part>: ContinuedBy links forward, ContinuationOf
	// back; Root is the first session of the chain (empty on it).
	ContinuedBy    string `json:"continued_by,omitempty"`
	ContinuationOf string `json:"continuation_of,omitempty"`
	Root           string `json:"root,omitempty"`
	Part           int    `json:"part,omitempty"`   // 2, 3, ... on continuations
	Latest         string `json:"latest,omitempty"` // on the root: the newest part
	// Rebuilds counts how often the session's experiences were withdrawn
	// and built again (a call or a reward arrived after it was ready).
	Rebuilds int `json:"rebuilds,omitempty"`
	// Orphans counts calls that arrived after the session was dropped:
	// stored, never trained on.
	Orphans int `json:"orphans,omitempty"`
}

const sessionVersion = 1

func encodeSession(s *Session) ([]byte, error) {
	s.V = sessionVersion
	if b, ok := appendSession(make([]byte, 0, 320+len(s.ID)+len(s.Model)+len(s.Owner)), s); ok {
		return b, nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encode session %s: %w", s.ID, err)
	}
	return b, nil
}

func decodeSession(b []byte) (*Session, error) {
	var s Session
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("decode session: %w", err)
	}
	if s.V != sessionVersion {
		return nil, fmt.Errorf("session record version %d: unsupported", s.V)
	}
	return &s, nil
}

// rewarded reports whether the session has any reward.
func (s *Session) rewarded() bool { return len(s.Rewards) > 0 }

// combine folds values by the configured rule (last, sum, mean).
func combine(rule string, vals []float64) float64 {
	if len(vals) == 0 {
		return 0
	}
	switch rule {
	case "sum":
		var t float64
		for _, v := range vals {
			t += v
		}
		return t
	case "mean":
		var t float64 // of v/n, which cannot overflow for finite v
		n := float64(len(vals))
		for _, v := range vals {
			t += v / n
		}
		return t
	}
	return vals[len(vals)-1]
}

// SessionReward combines the session-level rewards, or the call-level ones
// when the session has none.
func (s *Session) SessionReward(rule string) float64 {
	var sess, calls []float64
	for _, r := range s.Rewards {
		if r.Call == "" {
			sess = append(sess, r.Value)
		} else {
			calls = append(calls, r.Value)
		}
	}
	if len(sess) > 0 {
		return combine(rule, sess)
	}
	return combine(rule, calls)
}

// rewardFinite reports whether the session's combined reward, and call's
// when call is set, are finite under rule.
func (s *Session) rewardFinite(rule, call string) bool {
	if r := s.SessionReward(rule); math.IsNaN(r) || math.IsInf(r, 0) {
		return false
	}
	if call == "" {
		return true
	}
	r := s.CallReward(rule, call)
	return r == nil || !(math.IsNaN(*r) || math.IsInf(*r, 0))
}

// CallReward combines the rewards given to one call; nil when none.
func (s *Session) CallReward(rule, call string) *float64 {
	var vals []float64
	for _, r := range s.Rewards {
		if r.Call == call {
			vals = append(vals, r.Value)
		}
	}
	if len(vals) == 0 {
		return nil
	}
	v := combine(rule, vals)
	return &v
}
