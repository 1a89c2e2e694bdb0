package capture

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// FeedbackReq is a reward for a session, or for one call of it.
type FeedbackReq struct {
	Session string   `json:"session,omitempty"`
	Call    string   `json:"call,omitempty"`
	Reward  *float64 `json:"reward"`
	Tags    []string `json:"tags,omitempty"`
	Comment string   `json:"comment,omitempty"`
}

func (r *FeedbackReq) check() error {
	if r.Session == "" && r.Call == "" {
		return fmt.Errorf("feedback needs session or call: %w", ErrInvalid)
	}
	if r.Reward == nil {
		return fmt.Errorf("feedback needs reward: %w", ErrInvalid)
	}
	if math.IsNaN(*r.Reward) || math.IsInf(*r.Reward, 0) {
		return fmt.Errorf("reward must be finite: %w", ErrInvalid)
	}
	for _, id := range []string{r.Session, r.Call} {
		if _, err := ParseID(id); err != nil {
			return fmt.Errorf("%w: %w", err, ErrInvalid)
		}
	}
	return nil
}

// Feedback records a reward; with Call set it is a call-level reward. A
// committed session that gets its first reward becomes ready. Durable on
// return; ErrNotFound for unknown sessions or calls.
func (s *Store) Feedback(ctx context.Context, req FeedbackReq) (*Session, error) {
	if err := req.check(); err != nil {
		return nil, err
	}
	var out *Session
	err := s.do(ctx, func() error {
		return s.update(true, func(t *tx) error {
			rec, err := t.feedbackSession(&req)
			if err != nil {
				return err
			}
			t.addReward(rec, Reward{Value: *req.Reward, Call: req.Call, Source: "feedback",
				Comment: req.Comment, Tags: ParseTags(strings.Join(req.Tags, ",")), At: t.now})
			for _, tag := range req.Tags {
				if tag != "" && !contains(rec.Tags, tag) {
					rec.Tags = append(rec.Tags, tag)
				}
			}
			t.touch(rec)
			t.after = append(t.after, func() { s.m.feedback.WithLabelValues("feedback").Inc() })
			if err := t.tryReady(rec); err != nil {
				return err
			}
			out = copySession(rec)
			return nil
		})
	})
	return out, err
}

// feedbackSession resolves the session a feedback request targets.
func (t *tx) feedbackSession(req *FeedbackReq) (*Session, error) {
	sid := req.Session
	if req.Call != "" {
		b, err := t.read(callKey(req.Call))
		if err != nil {
			return nil, err
		}
		if b == nil {
			return nil, fmt.Errorf("call %s: %w", req.Call, ErrNotFound)
		}
		c, err := decodeCall(b)
		if err != nil {
			return nil, err
		}
		if sid != "" && sid != c.Session {
			return nil, fmt.Errorf("call %s belongs to session %s, not %s: %w", req.Call, c.Session, sid, ErrInvalid)
		}
		sid = c.Session
	}
	rec, err := t.session(sid)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, fmt.Errorf("session %s: %w", sid, ErrNotFound)
	}
	return rec, nil
}

// Commit closes a session; it becomes ready once it has a reward.
// Committing a closed session is a no-op. Durable on return.
func (s *Store) Commit(ctx context.Context, session string) (*Session, error) {
	if session == "" {
		return nil, fmt.Errorf("commit needs session: %w", ErrInvalid)
	}
	var out *Session
	err := s.do(ctx, func() error {
		return s.update(true, func(t *tx) error {
			rec, err := t.session(session)
			if err != nil {
				return err
			}
			if rec == nil {
				return fmt.Errorf("session %s: %w", session, ErrNotFound)
			}
			if err := t.close(rec, "commit"); err != nil {
				return err
			}
			out = copySession(rec)
			return nil
		})
	})
	return out, err
}

// TrinityFeedback applies a Trinity-RFT reward: msgIDs are the response ids
// the agent saw; the reward goes once to every session they belong to.
// Unknown ids are skipped; ErrNotFound when none is known. Durable.
func (s *Store) TrinityFeedback(ctx context.Context, msgIDs []string, reward float64, taskID, runID string) ([]string, error) {
	if len(msgIDs) == 0 {
		return nil, fmt.Errorf("msg_ids is empty: %w", ErrInvalid)
	}
	if math.IsNaN(reward) || math.IsInf(reward, 0) {
		return nil, fmt.Errorf("reward must be finite: %w", ErrInvalid)
	}
	var sessions []string
	err := s.do(ctx, func() error {
		sessions = nil
		return s.update(true, func(t *tx) error {
			ids, err := t.sessionsOfResponses(msgIDs)
			if err != nil {
				return err
			}
			for _, id := range ids {
				rec, err := t.session(id)
				if err != nil || rec == nil {
					return err
				}
				if err := t.setTask(rec, taskID); err != nil {
					return err
				}
				if runID != "" {
					rec.RunID = runID
				}
				t.addReward(rec, Reward{Value: reward, Source: "trinity", At: t.now})
				if err := t.tryReady(rec); err != nil {
					return err
				}
			}
			sessions = ids
			n := float64(len(ids))
			t.after = append(t.after, func() { s.m.feedback.WithLabelValues("trinity").Add(n) })
			return nil
		})
	})
	return sessions, err
}

// sessionsOfResponses maps response ids to their distinct sessions.
func (t *tx) sessionsOfResponses(msgIDs []string) ([]string, error) {
	var ids []string
	for _, m := range msgIDs {
		b, err := t.read(respKey(m))
		if err != nil {
			return nil, err
		}
		if b == nil {
			continue
		}
		sid, _, _ := strings.Cut(string(b), "\x00")
		if !contains(ids, sid) {
			ids = append(ids, sid)
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("none of %d msg_ids is a captured response: %w", len(msgIDs), ErrNotFound)
	}
	return ids, nil
}

// TrinityCommit commits every open session that has a reward and returns
// their ids. Durable.
func (s *Store) TrinityCommit(ctx context.Context) ([]string, error) {
	var done []string
	err := s.do(ctx, func() error {
		done = nil
		return s.update(true, func(t *tx) error {
			for id := range s.w.rewardedOpen {
				rec, err := t.session(id)
				if err != nil {
					return err
				}
				if rec == nil || rec.State != StateOpen || !rec.rewarded() {
					continue
				}
				if err := t.close(rec, "trinity"); err != nil {
					return err
				}
				done = append(done, id)
			}
			return nil
		})
	})
	return done, err
}

// GetSession returns a session record and its calls in order.
func (s *Store) GetSession(ctx context.Context, id string) (*Session, []*Call, error) {
	var rec *Session
	var calls []*Call
	err := s.db.View(func(txn *badger.Txn) error {
		t := s.newTx(nil, txn)
		b, err := t.read(sessionKey(id))
		if err != nil {
			return err
		}
		if b == nil {
			return fmt.Errorf("session %s: %w", id, ErrNotFound)
		}
		if rec, err = decodeSession(b); err != nil {
			return err
		}
		calls, err = t.sessionCalls(txn, id)
		return err
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		err = fmt.Errorf("get session %s: %w", id, err)
	}
	return rec, calls, err
}

func copySession(rec *Session) *Session {
	c := *rec
	c.Rewards = append([]Reward(nil), rec.Rewards...)
	c.Tags = append([]string(nil), rec.Tags...)
	c.Cursors = append([]uint64(nil), rec.Cursors...)
	return &c
}
