package capture

import (
	"bytes"
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
	if len(r.Tags) > maxTags {
		return fmt.Errorf("tags: %d, at most %d: %w", len(r.Tags), maxTags, ErrInvalid)
	}
	for _, tag := range r.Tags {
		if len(tag) > maxTagLen {
			return fmt.Errorf("tags: a tag of %d bytes, at most %d: %w", len(tag), maxTagLen, ErrInvalid)
		}
	}
	if len(r.Comment) > maxComment {
		return fmt.Errorf("comment: %d bytes, at most %d: %w", len(r.Comment), maxComment, ErrInvalid)
	}
	return nil
}

// maxComment bounds a feedback comment, which the session record keeps.
const maxComment = 4096

// Feedback records a reward; with Call set it is a call-level reward. A
// committed session that gets its first reward becomes ready; a ready one
// (not yet consumed) is rebuilt with it. A session id whose session was
// consumed and continued rewards its newest part; a consumed session
// without continuation stores the reward without using it. Durable on
// return; ErrNotFound for unknown sessions or calls, ErrForbidden for a
// session of another owner when ctx carries one (WithOwner).
func (s *Store) Feedback(ctx context.Context, req FeedbackReq) (*Session, error) {
	if err := req.check(); err != nil {
		return nil, err
	}
	var out *Session
	err := s.do(ctx, func() error {
		return s.update(true, func(t *tx) error {
			rec, err := t.feedbackSession(ctx, &req)
			if err != nil {
				return err
			}
			tags := ParseTags(strings.Join(req.Tags, ","))
			if err := t.addReward(rec, Reward{Value: *req.Reward, Call: req.Call, Source: "feedback",
				Comment: req.Comment, Tags: tags, At: t.now}); err != nil {
				return err
			}
			rec.addTags(tags)
			t.touch(rec)
			t.after = append(t.after, func() { s.m.feedback.WithLabelValues("feedback").Inc() })
			if err := t.rewarded(rec); err != nil {
				return err
			}
			out = copySession(rec)
			return nil
		})
	})
	return out, err
}

// feedbackSession resolves the session a feedback request targets.
func (t *tx) feedbackSession(ctx context.Context, req *FeedbackReq) (*Session, error) {
	if req.Call == "" {
		return t.ownedSession(ctx, req.Session, "feedback")
	}
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
	rec, err := t.session(c.Session)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, fmt.Errorf("session %s of call %s: %w", c.Session, req.Call, ErrNotFound)
	}
	// ownership first: another client learns nothing of the call's session
	if owner, restricted := ownerFrom(ctx); restricted && !owns(owner, rec) {
		t.s.countForeign(t, "feedback", true, false)
		return nil, fmt.Errorf("call %s belongs to another client's session: %w", req.Call, ErrForbidden)
	}
	if req.Session != "" && req.Session != c.Session && req.Session != c.Hone.Session {
		return nil, fmt.Errorf("call %s belongs to session %s, not %s: %w", req.Call, c.Session, req.Session, ErrInvalid)
	}
	return rec, nil
}

// ownedSession resolves a session id for the caller of ctx: the newest part
// of a consumed and continued session. ErrForbidden when the session
// belongs to another client, ErrNotFound when unknown.
func (t *tx) ownedSession(ctx context.Context, id, source string) (*Session, error) {
	rec, err := t.session(id)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	if owner, restricted := ownerFrom(ctx); restricted && !owns(owner, rec) {
		t.s.countForeign(t, source, source == "feedback", source == "commit")
		return nil, fmt.Errorf("session %s belongs to another client: %w", id, ErrForbidden)
	}
	return t.latest(rec)
}

// Commit closes a session; it becomes ready once it has a reward.
// Committing a closed session is a no-op; a consumed and continued one
// commits its newest part. Durable on return; ErrForbidden as Feedback.
func (s *Store) Commit(ctx context.Context, session string) (*Session, error) {
	if session == "" {
		return nil, fmt.Errorf("commit needs session: %w", ErrInvalid)
	}
	var out *Session
	err := s.do(ctx, func() error {
		return s.update(true, func(t *tx) error {
			rec, err := t.ownedSession(ctx, session, "commit")
			if err != nil {
				return err
			}
			if err := t.closeAndReady(rec, "commit"); err != nil {
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
// Unknown ids, and with an owner in ctx ids of other clients' sessions, are
// skipped; ErrNotFound when none is left. Durable.
func (s *Store) TrinityFeedback(ctx context.Context, msgIDs []string, reward float64, taskID, runID string) ([]string, error) {
	if len(msgIDs) == 0 {
		return nil, fmt.Errorf("msg_ids is empty: %w", ErrInvalid)
	}
	if math.IsNaN(reward) || math.IsInf(reward, 0) {
		return nil, fmt.Errorf("reward must be finite: %w", ErrInvalid)
	}
	owner, restricted := ownerFrom(ctx)
	var sessions []string
	err := s.do(ctx, func() error {
		sessions = nil
		return s.update(true, func(t *tx) error {
			ids, err := t.sessionsOfResponses(msgIDs)
			if err != nil {
				return err
			}
			var done []string
			for _, id := range ids {
				rec, err := t.session(id)
				if err != nil {
					return err
				}
				if rec == nil {
					continue
				}
				if restricted && !owns(owner, rec) {
					t.s.countForeign(t, "trinity", true, false)
					continue
				}
				if err := t.setTask(rec, taskID); err != nil {
					return err
				}
				if runID != "" {
					rec.RunID = runID
				}
				if err := t.addReward(rec, Reward{Value: reward, Source: "trinity", At: t.now}); err != nil {
					return err
				}
				if err := t.rewarded(rec); err != nil {
					return err
				}
				done = append(done, id)
			}
			if len(done) == 0 {
				return fmt.Errorf("none of %d msg_ids is a captured response: %w", len(msgIDs), ErrNotFound)
			}
			sessions = done
			n := float64(len(done))
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
		sids, err := t.sessionsOfResponse(m)
		if err != nil {
			return nil, err
		}
		for _, sid := range sids {
			if !contains(ids, sid) {
				ids = append(ids, sid)
			}
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("none of %d msg_ids is a captured response: %w", len(msgIDs), ErrNotFound)
	}
	return ids, nil
}

// sessionsOfResponse returns the sessions of the calls that got response
// id m (none when no captured call did). A response id made from its
// call's id (ownResponseID) is found through the call's own key, before
// the index: an index entry, which any agent's X-Request-Id can name, never
// shadows it. Otherwise every call indexed under m counts: agents that
// chose the same X-Request-Id each keep their entry, and the caller's
// ownership check (TrinityFeedback) keeps one client's reward off
// another's sessions.
func (t *tx) sessionsOfResponse(m string) ([]string, error) {
	if cid := derivedCallID(m); cid != "" {
		b, err := t.read(callKey(cid))
		if err != nil {
			return nil, err
		}
		if b != nil {
			c, err := decodeCall(b)
			if err != nil {
				return nil, fmt.Errorf("call %s: %w", cid, err)
			}
			if c.ResponseID == m {
				return []string{c.Session}, nil
			}
		}
	}
	var sids []string
	err := t.indexEntries(m, func(sid, _ string) error {
		sids = append(sids, sid)
		return nil
	})
	return sids, err
}

// indexEntries calls fn with every response-id index entry for m: the
// per-call entries and an older store's single one. Each entry's key is
// checked against the call id its value names, so a response id that
// holds a NUL cannot reach another id's entries through the prefix.
func (t *tx) indexEntries(m string, fn func(sid, cid string) error) error {
	b, err := t.read(respKey(m))
	if err != nil {
		return err
	}
	if b != nil {
		sid, cid, _ := strings.Cut(string(b), "\x00")
		if err := fn(sid, cid); err != nil {
			return err
		}
	}
	o := badger.DefaultIteratorOptions
	o.Prefix = append(respKey(m), sep)
	it := t.txn.NewIterator(o)
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		v, err := it.Item().ValueCopy(nil)
		if err != nil {
			return fmt.Errorf("response index %q: %w", m, err)
		}
		sid, cid, _ := strings.Cut(string(v), "\x00")
		if !bytes.Equal(it.Item().Key(), respIndexKey(m, cid)) {
			continue
		}
		if err := fn(sid, cid); err != nil {
			return err
		}
	}
	return nil
}

// commitChunk is how many sessions a Trinity /commit closes per
// transaction: each builds its experiences, and one transaction for
// thousands of them could pass Badger's size limit.
const commitChunk = 64

// TrinityCommit commits every open session that has a reward and returns
// their ids; with an owner in ctx only that owner's sessions (the others'
// are not even read). Durable: chunks of commitChunk sessions, each synced
// before the next; a chunk that fails goes a session at a time, and a
// session whose experiences cannot be built is dropped (Store.alone). An
// error leaves the chunks before it committed.
func (s *Store) TrinityCommit(ctx context.Context) ([]string, error) {
	owner, restricted := ownerFrom(ctx)
	// the ids come back by channel: do may return (ctx done) while the
	// commit still runs on the writer
	out := make(chan []string, 1)
	err := s.do(ctx, func() error {
		var ids, done []string
		for id, o := range s.w.rewardedOpen {
			if !restricted || o == owner {
				ids = append(ids, id)
			}
		}
		commitOne := func(t *tx, id string) (bool, error) {
			rec, err := t.session(id)
			if err != nil || rec == nil || rec.State != StateOpen || !rec.rewarded() || restricted && rec.Owner != owner {
				return false, err
			}
			return true, t.closeAndReady(rec, "trinity")
		}
		var err error
		for len(ids) > 0 && err == nil {
			chunk := ids[:min(commitChunk, len(ids))]
			ids = ids[len(chunk):]
			var closed []string
			closed, err = s.together(chunk, "trinity", commitOne)
			done = append(done, closed...)
		}
		out <- done
		return err
	})
	if err != nil {
		select {
		case done := <-out:
			return done, err
		default:
			return nil, err
		}
	}
	return <-out, nil
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
		if owner, restricted := ownerFrom(ctx); restricted && !owns(owner, rec) {
			rec = nil
			return fmt.Errorf("session %s: %w", id, ErrForbidden)
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
