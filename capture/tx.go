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
	s       *Store
	w       batchWriter
	txn     *badger.Txn                    // read view
	read    func(k []byte) ([]byte, error) // nil value and nil error when absent
	touched map[string]*Session
	after   []func()
	now     time.Time
	cursor  *uint64 // ready-queue cursor as advanced by this unit, once used
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

// addReward appends a reward to a session; an open one joins the set a
// Trinity /commit closes, once the unit commits.
func (t *tx) addReward(rec *Session, r Reward) {
	rec.Rewards = append(rec.Rewards, r)
	t.touch(rec)
	if rec.State == StateOpen {
		id := rec.ID
		t.after = append(t.after, func() {
			if _, open := t.s.w.open.get(id); open {
				t.s.w.rewardedOpen[id] = struct{}{}
			}
		})
	}
}

// touch marks a record for writing at commit.
func (t *tx) touch(rec *Session) { t.touched[rec.ID] = rec }

// setState moves a session to st, keeping the state index in step.
func (t *tx) setState(rec *Session, st State) error {
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

// failed forgets cached records the failed unit may have modified.
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
