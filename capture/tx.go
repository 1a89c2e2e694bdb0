package capture

import (
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// batchWriter is what both *badger.Txn and *badger.WriteBatch offer.
type batchWriter interface {
	SetEntry(e *badger.Entry) error
	Delete(k []byte) error
}

// tx is one writer-goroutine unit of work: writes go to w, session records
// touched are kept in touched, and in-memory bookkeeping runs in after only
// once the writes are committed.
type tx struct {
	s        *Store
	w        batchWriter
	txn      *badger.Txn                    // read view
	read     func(k []byte) ([]byte, error) // nil value and nil error when absent
	touched  map[string]*Session
	after    []func()
	now      time.Time
	cursor   *uint64             // ready-queue cursor as advanced by this unit, once used
	ready    []string            // committed sessions to build after a batch of calls
	readySet map[string]struct{} // ready, as a set
}

// readyLater notes a committed, rewarded session whose experiences are
// built once the batch's calls are visible (flushCalls).
func (t *tx) readyLater(rec *Session) {
	if rec.State != StateCommitted || !rec.rewarded() {
		return
	}
	if t.readySet == nil {
		t.readySet = map[string]struct{}{}
	}
	if _, ok := t.readySet[rec.ID]; !ok {
		t.readySet[rec.ID] = struct{}{}
		t.ready = append(t.ready, rec.ID)
	}
}

// newSession makes an open session for the first call of id, created when
// that call started (before it is written); reconcile looks for calls a
// crash left without their session record.
func (t *tx) newSession(id, owner string, start time.Time, reconcile bool) (*Session, error) {
	created := t.now
	if !start.IsZero() && start.Before(created) {
		created = start
	}
	rec := &Session{ID: id, Created: created, Owner: owner}
	if err := t.setState(rec, StateOpen); err != nil {
		return nil, err
	}
	if reconcile {
		t.reconcile(rec)
	}
	return rec, nil
}

// latest follows a consumed session's continuation links to its newest
// part (the root of a chain knows it; parts link to the next).
func (t *tx) latest(rec *Session) (*Session, error) {
	for n := 0; rec.State == StateConsumed && n < maxChain; n++ {
		next := rec.ContinuedBy
		if rec.Latest != "" && rec.Latest != rec.ID {
			next = rec.Latest
		}
		if next == "" {
			return rec, nil
		}
		nrec, err := t.session(next)
		if err != nil || nrec == nil {
			return rec, err
		}
		rec = nrec
	}
	return rec, nil
}

// continueSession starts the next part of prev's chain, <root>.<n>, with
// prev's owner, task, model, tags and run id (its selection follows the id
// the agent sends, which does not change), and links both ways.
func (t *tx) continueSession(prev *Session) (*Session, error) {
	root := prev
	if prev.Root != "" {
		r, err := t.session(prev.Root)
		if err != nil {
			return nil, err
		}
		if r != nil {
			root = r
		}
	}
	part := max(prev.Part, 1) + 1
	var id string
	for ; ; part++ {
		id = continuationID(root.ID, part)
		taken, err := t.session(id)
		if err != nil {
			return nil, err
		}
		if taken == nil {
			break
		}
	}
	next := &Session{ID: id, Created: t.now, Owner: prev.Owner, Model: prev.Model, RunID: prev.RunID,
		Tags: append([]string(nil), prev.Tags...), Root: root.ID, Part: part, ContinuationOf: prev.ID}
	if err := t.setState(next, StateOpen); err != nil {
		return nil, err
	}
	if err := t.setTask(next, prev.Task); err != nil {
		return nil, err
	}
	prev.ContinuedBy = id
	root.Latest = id
	t.touch(prev)
	t.touch(root)
	t.after = append(t.after, t.s.m.continuations.Inc)
	return next, nil
}

// nextCursor assigns the next ready-queue cursor within this unit.
func (t *tx) nextCursor() uint64 {
	if t.cursor == nil {
		c := t.s.w.cursor
		t.cursor = &c
		t.after = append(t.after, func() { t.s.w.cursor = c })
	}
	*t.cursor++
	return *t.cursor
}

func (s *Store) newTx(w batchWriter, txn *badger.Txn) *tx {
	return &tx{s: s, w: w, txn: txn, read: txnReader(txn), touched: map[string]*Session{}, now: time.Now().UTC()}
}

func txnReader(txn *badger.Txn) func([]byte) ([]byte, error) {
	return func(k []byte) ([]byte, error) {
		it, err := txn.Get(k)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return it.ValueCopy(nil)
	}
}

// sessionOf returns the record of c's session, or nil when unknown. A
// session made for c (Call.NewSession) is not looked up in the store.
func (t *tx) sessionOf(c *Call) (*Session, error) {
	if c.NewSession {
		if rec, ok := t.touched[c.Session]; ok {
			return rec, nil
		}
		return nil, nil
	}
	return t.session(c.Session)
}

// session returns the session record, or nil when unknown.
func (t *tx) session(id string) (*Session, error) {
	if rec, ok := t.touched[id]; ok {
		return rec, nil
	}
	if rec, ok := t.s.w.cache.Get(id); ok {
		return rec, nil
	}
	b, err := t.read(sessionKey(id))
	if err != nil || b == nil {
		return nil, err
	}
	rec, err := decodeSession(b)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", id, err)
	}
	t.reconcile(rec)
	t.s.w.cache.Add(id, rec)
	return rec, nil
}

// reconcile repairs a session record that a crash left behind its calls
// (a batch's calls and its session records may commit in different Badger
// transactions), so that new calls never reuse a sequence number.
func (t *tx) reconcile(rec *Session) {
	last, ok := lastSeq(t.txn, rec.ID)
	if !ok || last < rec.NextSeq {
		return
	}
	rec.Calls += int(last + 1 - rec.NextSeq)
	rec.NextSeq = last + 1
	t.touch(rec)
}

// lastSeq returns the highest sequence number stored for a session. It
// scans forward over the session's keys: Badger's reverse seeks in the
// memtable cost more than a session's handful of keys.
func lastSeq(txn *badger.Txn, id string) (uint64, bool) {
	o := badger.DefaultIteratorOptions
	o.PrefetchValues = false
	o.Prefix = seqPrefix(id)
	it := txn.NewIterator(o)
	defer it.Close()
	var last uint64
	found := false
	for it.Rewind(); it.Valid(); it.Next() {
		k := it.Item().Key()
		last, found = beUint64(k[len(k)-8:]), true
	}
	return last, found
}

// maxRewards bounds the rewards one session keeps (each feedback adds one,
// and every later update rewrites the session's record).
const maxRewards = 4096

// maxRewardText bounds the comments and tags of a session's rewards
// together: the record is rewritten whole by each later update, so 4096
// rewards with a 4 KiB comment each would write gigabytes for one session.
const maxRewardText = 64 << 10

// text is the bytes of a reward's comment and tags.
func (r *Reward) text() int {
	n := len(r.Comment)
	for _, t := range r.Tags {
		n += len(t)
	}
	return n
}

// addReward appends a reward to a session; an open one joins the set a
// Trinity /commit closes, once the unit commits. A reward that would make
// the session's or its call's combined reward non-finite (reward.combine:
// sum past the float64 range) is refused (ErrInvalid) and rec is left as
// it was.
func (t *tx) addReward(rec *Session, r Reward) error {
	if len(rec.Rewards) >= maxRewards {
		return fmt.Errorf("session %s has %d rewards, the most one session keeps; nothing was applied: %w",
			rec.ID, len(rec.Rewards), ErrInvalid)
	}
	if n := r.text(); n > 0 {
		for i := range rec.Rewards {
			n += rec.Rewards[i].text()
		}
		if n > maxRewardText {
			return fmt.Errorf("session %s would keep %d bytes of reward comments and tags, at most %d; nothing was "+
				"applied (send the reward without them): %w", rec.ID, n, maxRewardText, ErrInvalid)
		}
	}
	rule := t.s.opts.Reward.Combine
	rec.Rewards = append(rec.Rewards, r)
	if !rec.rewardFinite(rule, r.Call) {
		rec.Rewards = rec.Rewards[:len(rec.Rewards)-1]
		return fmt.Errorf("reward %g would make the combined reward of session %s (reward.combine: %s) overflow; "+
			"nothing was applied: %w", r.Value, rec.ID, rule, ErrInvalid)
	}
	t.touch(rec)
	if rec.State == StateOpen {
		id, owner := rec.ID, rec.Owner
		t.after = append(t.after, func() {
			if _, open := t.s.w.open.get(id); open {
				t.s.w.rewardedOpen[id] = owner
			}
		})
	}
	return nil
}

// touch marks a record for writing at commit.
func (t *tx) touch(rec *Session) { t.touched[rec.ID] = rec }

// setState moves a session to st, keeping the state index in step.
func (t *tx) setState(rec *Session, st State) error {
	t.touch(rec)
	old, oldSince := rec.State, rec.Since
	if old != "" {
		if err := t.w.Delete(stateKey(old, oldSince.UnixNano(), rec.ID)); err != nil {
			return fmt.Errorf("unindex session %s: %w", rec.ID, err)
		}
	}
	rec.State, rec.Since = st, t.now
	if err := t.w.SetEntry(badger.NewEntry(stateKey(st, t.now.UnixNano(), rec.ID), nil)); err != nil {
		return fmt.Errorf("index session %s: %w", rec.ID, err)
	}
	t.touch(rec)
	id, since, last := rec.ID, rec.Since, rec.LastCall
	t.after = append(t.after, func() { t.s.w.moved(id, old, st, since, last) })
	return nil
}

// flush writes the touched session records.
func (t *tx) flush() error {
	for _, rec := range t.touched {
		b, err := encodeSession(rec)
		if err != nil {
			return err
		}
		if err := t.w.SetEntry(badger.NewEntry(sessionKey(rec.ID), b)); err != nil {
			return fmt.Errorf("write session %s: %w", rec.ID, err)
		}
	}
	return nil
}

// committed runs the bookkeeping and caches the records.
func (t *tx) committed() {
	for id, rec := range t.touched {
		t.s.w.cache.Add(id, rec)
	}
	for _, f := range t.after {
		f()
	}
}

// failed forgets the cached records the failed unit modified: every
// change to a record is preceded by its touch, so the cache never keeps a
// change that was not written. (Records it only read stay: the cache may
// hold their latest version while the write batch that has it commits.)
func (t *tx) failed(err error) {
	for id := range t.touched {
		t.s.w.cache.Remove(id)
	}
	if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrInvalid) {
		t.s.m.writeErrors.Inc()
	}
}

// update runs fn in one Badger transaction on the writer goroutine; with
// durable it returns only after the write is synced to disk.
func (s *Store) update(durable bool, fn func(t *tx) error) error {
	var t *tx
	err := s.db.Update(func(txn *badger.Txn) error {
		t = s.newTx(txn, txn)
		if err := fn(t); err != nil {
			return err
		}
		return t.flush()
	})
	if err == nil && durable {
		err = s.db.Sync()
	}
	if err != nil {
		if t != nil {
			t.failed(err)
		}
		return err
	}
	t.committed()
	return nil
}
