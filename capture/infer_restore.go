package capture

import (
	"fmt"

	"github.com/cespare/xxhash/v2"
	"github.com/dgraph-io/badger/v4"
)

// restoreInference puts back, when the store opens, what session inference
// knew of the open sessions before hone stopped: the hash of the latest
// call's messages and reply of each open session whose session was
// inferred, newest sessions first, up to the inference cache's size. An
// agent that goes on with its conversation after a restart (a coding CLI
// in the middle of a task, sending its whole history again, or a Responses
// API client continuing by previous_response_id) joins the session it had
// instead of opening a new one. Only the latest call is read per session:
// an agent continues from its last turn; one that retries an earlier turn
// across a restart starts a new session, as an unknown prefix does.
//
// It never keeps the store from opening: what it cannot read is logged and
// left out (those sessions' agents start new sessions).
func (s *Store) restoreInference() {
	if !s.opts.Session.Infer {
		return
	}
	type entry struct {
		h  uint64
		id string
	}
	var entries []entry
	type last struct {
		c    *Call
		salt uint64
	}
	var lasts []last
	err := s.eachOpenLatest(s.opts.Session.InferCache, func(rec *Session, c *Call) bool {
		if c.Hone.Session != "" || c.Route != RouteChat {
			return true // sessions named by a header are found by their name
		}
		hs, _, ok := prefixHashes(c.Request)
		if !ok {
			return true
		}
		salt := ownerSalt(rec.Owner)
		lasts = append(lasts, last{c, salt})
		d := xxhash.New()
		for i := range c.Choices {
			m := replyMessage(&c.Choices[i])
			entries = append(entries, entry{m.extend(d, hs[len(hs)-1]) ^ salt, rec.ID})
		}
		return len(entries) < s.opts.Session.InferCache
	})
	if err != nil {
		s.log.Warn("session inference: open sessions not restored past this point; their agents' next calls open new sessions",
			"restored", len(entries), "err", err)
	}
	for i := len(entries) - 1; i >= 0; i-- { // oldest first: the newest are evicted last
		s.infer.Add(entries[i].h, entries[i].id)
	}
	for i := len(lasts) - 1; i >= 0; i-- { // a summary answered just before the restart
		s.registerSummaries(lasts[i].c, lasts[i].salt)
	}
}

// LatestOpenCalls returns the latest stored call of each open session,
// newest sessions first, at most limit: what an agent in the middle of a
// conversation continues from after hone restarts (token continuity puts
// back the token ids its engine sampled). Unreadable sessions are logged
// and left out.
func (s *Store) LatestOpenCalls(limit int) ([]*Call, error) {
	var out []*Call
	err := s.eachOpenLatest(limit, func(_ *Session, c *Call) bool {
		out = append(out, c)
		return len(out) < limit
	})
	return out, err
}

// eachOpenLatest calls fn with each open session and its latest call,
// newest sessions first, until fn returns false or limit sessions were
// read. A session whose latest call cannot be read is logged and skipped;
// an error reading the database stops the walk.
func (s *Store) eachOpenLatest(limit int, fn func(rec *Session, c *Call) bool) error {
	return s.db.View(func(txn *badger.Txn) error {
		t := s.newTx(nil, txn)
		o := badger.DefaultIteratorOptions
		o.Prefix, o.Reverse, o.PrefetchValues = statePrefix(StateOpen), true, false
		it := txn.NewIterator(o)
		defer it.Close()
		n := 0
		for it.Seek(append(statePrefix(StateOpen), 0xff)); it.Valid() && n < limit; it.Next() {
			id := stateKeySession(it.Item().Key())
			b, err := t.read(sessionKey(id))
			if err != nil {
				return err // the database cannot be read: stop here
			}
			if b == nil {
				continue
			}
			rec, err := decodeSession(b)
			if err != nil || rec.State != StateOpen {
				continue // a bad record is the janitor's and readers' to report
			}
			n++
			c, err := t.lastCall(txn, id)
			if err != nil {
				s.log.Warn("the latest call of an open session cannot be read; its agent's next call starts afresh",
					"session", id, "err", err)
				continue
			}
			if c != nil && !fn(rec, c) {
				return nil
			}
		}
		return nil
	})
}

// lastCall reads the call of session id with the highest sequence number
// (nil when none is stored).
func (t *tx) lastCall(txn *badger.Txn, id string) (*Call, error) {
	o := badger.DefaultIteratorOptions
	o.Prefix, o.Reverse = seqPrefix(id), true
	it := txn.NewIterator(o)
	defer it.Close()
	for it.Seek(append(seqPrefix(id), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)); it.Valid(); it.Next() {
		cid, err := it.Item().ValueCopy(nil)
		if err != nil {
			return nil, fmt.Errorf("read calls of %s: %w", id, err)
		}
		b, err := t.read(callKey(string(cid)))
		if err != nil {
			return nil, fmt.Errorf("read call %s: %w", cid, err)
		}
		if b == nil {
			continue // expired (retention.call_ttl): an earlier one may be kept
		}
		c, err := decodeCall(b)
		if err != nil {
			return nil, fmt.Errorf("call %s: %w", cid, err)
		}
		return c, nil
	}
	return nil, nil
}
