package capture

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/dgraph-io/badger/v4"
	"github.com/tidwall/gjson"
)

func beUint64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }

func uint64Bytes(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// close commits an open session (it becomes ready once it has a reward:
// the caller runs tryReady when the session's calls are visible to it).
// Closing a closed session changes nothing.
func (t *tx) close(rec *Session, by string) error {
	if rec.State != StateOpen {
		return nil
	}
	t.touch(rec)
	rec.Closed = by
	return t.setState(rec, StateCommitted)
}

// closeAndReady closes a session and readies it when it has a reward.
func (t *tx) closeAndReady(rec *Session, by string) error {
	if err := t.close(rec, by); err != nil {
		return err
	}
	return t.tryReady(rec)
}

// rewarded readies a session that got a reward: a committed one becomes
// ready, a ready one (not yet consumed) is rebuilt with the reward.
func (t *tx) rewarded(rec *Session) error {
	if rec.State == StateReady {
		if err := t.setState(rec, StateCommitted); err != nil {
			return err
		}
	}
	return t.tryReady(rec)
}

// tryReady turns a committed, rewarded session into ready experiences. A
// session that was ready before (a call or a reward arrived since, which
// put it back to committed) has its experiences rebuilt: the old ones are withdrawn from the ready queue and
// the new ones appended with new cursors (Experience.Replaces names the
// old). A session with a call missing (expired by retention.call_ttl) is
// dropped rather than built truncated.
func (t *tx) tryReady(rec *Session) error {
	if rec.State != StateCommitted || !rec.rewarded() {
		return nil
	}
	t.touch(rec) // changed from here on
	exps, missing, err := t.buildExperiences(rec)
	if err != nil {
		return err
	}
	old := rec.Cursors
	rec.Cursors = nil
	for _, c := range old {
		if err := t.w.Delete(readyKey(c)); err != nil {
			return fmt.Errorf("withdraw experience %d of %s: %w", c, rec.ID, err)
		}
	}
	if len(old) > 0 {
		rec.Rebuilds++
		t.after = append(t.after, t.s.m.rebuilds.Inc)
	}
	if missing > 0 {
		rec.Closed += ",calls-expired"
		t.after = append(t.after, t.s.m.expired.Inc)
		t.s.log.Warn("session dropped: calls expired before it was built (retention.call_ttl)",
			"session", rec.ID, "missing", missing, "calls", rec.Calls)
		return t.setState(rec, StateDropped)
	}
	if len(exps) == 0 {
		rec.Closed += ",no-tokens"
		return t.setState(rec, StateDropped)
	}
	var cursor uint64
	for i := range exps {
		cursor = t.nextCursor()
		exps[i].Cursor = cursor
		exps[i].Replaces = old
		b, err := encodeExperience(&exps[i])
		if err != nil {
			return fmt.Errorf("session %s: %w: %w", rec.ID, errUnbuildable, err)
		}
		if err := t.w.SetEntry(badger.NewEntry(readyKey(cursor), b)); err != nil {
			return fmt.Errorf("write experience of %s: %w", rec.ID, err)
		}
		rec.Cursors = append(rec.Cursors, cursor)
	}
	if err := t.w.SetEntry(badger.NewEntry(metaKey("cursor"), uint64Bytes(cursor))); err != nil {
		return fmt.Errorf("write cursor: %w", err)
	}
	n := len(exps)
	t.after = append(t.after, func() { t.s.m.experiences.Add(float64(n)) })
	if len(old) == 0 {
		t.notifyReady(rec, exps)
	}
	return t.setState(rec, StateReady)
}

// sessionCalls reads a session's calls in sequence order; calls removed by
// the TTL are not returned (buildExperiences counts them against
// Session.Calls).
func (t *tx) sessionCalls(txn *badger.Txn, id string) ([]*Call, error) {
	var calls []*Call
	o := badger.DefaultIteratorOptions
	o.Prefix = seqPrefix(id)
	it := txn.NewIterator(o)
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		cid, err := it.Item().ValueCopy(nil)
		if err != nil {
			return nil, fmt.Errorf("read calls of %s: %w", id, err)
		}
		b, err := t.read(callKey(string(cid)))
		if err != nil {
			return nil, fmt.Errorf("read call %s: %w", cid, err)
		}
		if b == nil {
			continue
		}
		c, err := decodeCall(b)
		if err != nil {
			return nil, fmt.Errorf("call %s: %w: %w", cid, errUnbuildable, err)
		}
		calls = append(calls, c)
	}
	return calls, nil
}

// buildExperiences stitches the session's calls and returns one experience
// per leaf, and how many of the session's calls are no longer stored.
func (t *tx) buildExperiences(rec *Session) ([]Experience, int, error) {
	var calls []*Call
	err := t.s.db.View(func(txn *badger.Txn) error {
		var err error
		calls, err = t.sessionCalls(txn, rec.ID)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	if missing := rec.Calls - len(calls); missing > 0 {
		return nil, missing, nil
	}
	tr, drifts := buildTrie(calls)
	// A rebuilt session counts only the drifts its last build did not.
	before := driftCounts(rec.Drifts)
	rec.Drift, rec.Drifts, rec.Compactions = tr.drift, drifts, len(tr.compacted)
	for cause, n := range driftCounts(drifts) {
		if d := float64(n - before[cause]); d > 0 {
			t.after = append(t.after, func() { t.s.m.drift.WithLabelValues(cause).Add(d) })
		}
	}
	return experiencesOf(rec, tr, t.s.opts.Reward.Combine), 0, nil
}

// buildTrie stitches calls (in seq order) and explains each drift.
func buildTrie(calls []*Call) (*trie, []Drift) {
	tr := &trie{}
	var drifts []Drift
	for i, c := range calls {
		if tr.add(c) {
			if of := compactionOf(c, calls[:i]); of != "" {
				// not drift: the agent replaced its history by a summary
				tr.drift--
				if tr.compacted == nil {
					tr.compacted = map[*Call]string{}
				}
				tr.compacted[c] = of
				continue
			}
			drifts = append(drifts, classifyDrift(c, calls[:i]))
		}
	}
	// A summary request may leave the conversation's latest turns out (they
	// are kept verbatim after the summary, as Claude Code does): it forks
	// from an earlier point of the path. That fork is the compaction's, not
	// drift, once a later call carries its summary.
	if len(tr.compacted) > 0 {
		kept := drifts[:0]
		for _, d := range drifts {
			if tr.summarised(d.Call) && tr.forked(d.Call) {
				tr.drift--
				continue
			}
			kept = append(kept, d)
		}
		drifts = kept
	}
	return tr, drifts
}

// experiencesOf materialises every leaf of a session's trie.
func experiencesOf(rec *Session, tr *trie, rule string) []Experience {
	callReward := func(id string) *float64 { return rec.CallReward(rule, id) }
	var out []Experience
	for i, leaf := range tr.leaves() {
		e := Experience{Session: rec.ID, Task: rec.Task, Owner: rec.Owner, Model: rec.Model, Leaf: i, Reward: rec.SessionReward(rule),
			ContinuationOf: rec.ContinuationOf}
		e.Tokens, e.Mask, e.Logprobs, e.Versions, e.Steps = trajectory(leaf, callReward)
		e.CompactedFrom = tr.compactedFrom(leaf)
		e.Messages, e.Tools = transcript(leaf.call, leaf.choice)
		out = append(out, e)
	}
	return out
}

// transcript returns a call's request messages followed by its reply, and
// its tools.
func transcript(c *Call, choice int) (json.RawMessage, json.RawMessage) {
	return json.RawMessage(joinJSON(messageParts(c, choice))), requestTools(c)
}

// messageParts returns the raw JSON of a call's request messages followed
// by its reply for one choice.
func messageParts(c *Call, choice int) []string {
	var parts []string
	gjson.GetBytes(c.Request, "messages").ForEach(func(_, v gjson.Result) bool {
		parts = append(parts, v.Raw)
		return true
	})
	if reply, err := json.Marshal(replyJSON(&c.Choices[choice])); err == nil {
		parts = append(parts, string(reply))
	}
	return parts
}

// joinJSON makes a JSON array of raw JSON values.
func joinJSON(parts []string) string { return "[" + strings.Join(parts, ",") + "]" }

func requestTools(c *Call) json.RawMessage {
	if v := gjson.GetBytes(c.Request, "tools"); v.Exists() {
		return json.RawMessage(v.Raw)
	}
	return nil
}

type replyToolCall struct {
	ID       string `json:"id,omitempty"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type reply struct {
	Role      string          `json:"role"`
	Content   string          `json:"content"`
	ToolCalls []replyToolCall `json:"tool_calls,omitempty"`
}

// replyJSON is the OpenAI assistant message of a choice.
func replyJSON(ch *Choice) reply {
	r := reply{Role: "assistant", Content: ch.Content}
	for _, tc := range ch.ToolCalls {
		var x replyToolCall
		x.ID, x.Type = tc.ID, "function"
		x.Function.Name, x.Function.Arguments = tc.Name, tc.Arguments
		r.ToolCalls = append(r.ToolCalls, x)
	}
	return r
}

// Experiences returns up to limit ready experiences with cursor > after, in
// cursor order (limit <= 0: all). Acknowledged experiences stay readable
// until evicted.
func (s *Store) Experiences(ctx context.Context, after uint64, limit int) ([]Experience, error) {
	var out []Experience
	err := s.eachExperienceJSON(ctx, after, limit, func(js []byte) error {
		var e Experience
		if err := json.Unmarshal(js, &e); err != nil {
			return fmt.Errorf("decode experience: %w", err)
		}
		out = append(out, e)
		return nil
	})
	return out, err
}

// eachExperienceJSON streams the JSON of ready experiences with cursor >
// after; js is only valid during the call.
func (s *Store) eachExperienceJSON(ctx context.Context, after uint64, limit int, fn func(js []byte) error) error {
	return s.db.View(func(txn *badger.Txn) error {
		o := badger.DefaultIteratorOptions
		o.Prefix = readyPrefix()
		it := txn.NewIterator(o)
		defer it.Close()
		var buf []byte
		n := 0
		for it.Seek(readyKey(after + 1)); it.Valid() && (limit <= 0 || n < limit); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			err := it.Item().Value(func(v []byte) error {
				var err error
				buf, err = experienceJSON(v, buf[:0])
				return err
			})
			if err != nil {
				return fmt.Errorf("read experience %x: %w", it.Item().Key(), err)
			}
			if err := fn(buf); err != nil {
				return err
			}
			n++
		}
		return nil
	})
}

// Ack acknowledges every experience with cursor <= upTo; sessions whose
// experiences are all acknowledged become consumed. Durable on return.
func (s *Store) Ack(ctx context.Context, upTo uint64) error {
	return s.do(ctx, func() error {
		from := s.w.acked
		if upTo <= from {
			return nil
		}
		if upTo > s.w.cursor {
			return fmt.Errorf("ack %d beyond last cursor %d: %w", upTo, s.w.cursor, ErrInvalid)
		}
		return s.update(true, func(t *tx) error {
			if err := t.consume(from, upTo); err != nil {
				return err
			}
			t.after = append(t.after, func() { s.w.acked = upTo })
			return t.w.SetEntry(badger.NewEntry(metaKey("acked"), uint64Bytes(upTo)))
		})
	})
}

// consume marks the sessions of cursors (from, upTo] consumed.
func (t *tx) consume(from, upTo uint64) error {
	for c := from + 1; c <= upTo; c++ {
		b, err := t.read(readyKey(c))
		if err != nil {
			return err
		}
		if b == nil {
			continue
		}
		var es expSession
		if err := decodeExperienceInto(b, &es); err != nil {
			return err
		}
		rec, err := t.session(es.Session)
		if err != nil || rec == nil || rec.State != StateReady {
			if err != nil {
				return err
			}
			continue
		}
		if last := rec.Cursors[len(rec.Cursors)-1]; last <= upTo {
			if err := t.setState(rec, StateConsumed); err != nil {
				return err
			}
		}
	}
	return nil
}

// Cursor returns the last assigned cursor and the ack watermark.
func (s *Store) Cursor(ctx context.Context) (last, acked uint64, err error) {
	err = s.do(ctx, func() error {
		last, acked = s.w.cursor, s.w.acked
		return nil
	})
	return last, acked, err
}
