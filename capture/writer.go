package capture

import (
	"fmt"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// writerState is owned by the writer goroutine.
type writerState struct {
	s       *Store
	cache   *simplelru.LRU[string, *Session]
	open    *timeHeap // open session -> last call
	waiting *timeHeap // committed, unrewarded session -> commit time
	// open sessions with a reward: what a Trinity /commit closes
	rewardedOpen map[string]struct{}
	cursor       uint64             // last ready-queue cursor assigned
	acked        uint64             // ack watermark
	wb           *badger.WriteBatch // open write batch of calls, committing asynchronously
}

func loadWriterState(s *Store) (*writerState, error) {
	cache, err := simplelru.NewLRU[string, *Session](s.opts.Queue.CacheSize, nil)
	if err != nil {
		return nil, fmt.Errorf("writer cache: %w", err)
	}
	w := &writerState{s: s, cache: cache, open: newTimeHeap(), waiting: newTimeHeap(),
		rewardedOpen: map[string]struct{}{}}
	err = s.db.View(func(txn *badger.Txn) error {
		read := txnReader(txn)
		var err error
		if w.cursor, err = readUint(read, metaKey("cursor")); err != nil {
			return err
		}
		if w.acked, err = readUint(read, metaKey("acked")); err != nil {
			return err
		}
		return w.loadIndex(txn)
	})
	if err != nil {
		return nil, fmt.Errorf("load capture state: %w", err)
	}
	return w, nil
}

// loadIndex counts sessions by state and rebuilds the open and waiting sets.
func (w *writerState) loadIndex(txn *badger.Txn) error {
	read := txnReader(txn)
	for _, st := range States {
		n := 0
		err := iterKeys(txn, statePrefix(st), func(k []byte) error {
			n++
			if st != StateOpen && st != StateCommitted {
				return nil
			}
			id := stateKeySession(k)
			b, err := read(sessionKey(id))
			if err != nil || b == nil {
				return err
			}
			rec, err := decodeSession(b)
			if err != nil {
				return err
			}
			if st == StateOpen {
				w.open.set(id, rec.LastCall)
				if rec.rewarded() {
					w.rewardedOpen[id] = struct{}{}
				}
			} else if !rec.rewarded() {
				w.waiting.set(id, rec.Since)
			}
			return nil
		})
		if err != nil {
			return err
		}
		w.s.m.states.WithLabelValues(string(st)).Set(float64(n))
	}
	return nil
}

// forget drops a session from the in-memory sets (it changed state or was
// deleted).
func (w *writerState) forget(id string) {
	w.open.remove(id)
	w.waiting.remove(id)
	delete(w.rewardedOpen, id)
}

// moved updates the in-memory sets and gauges after a state change commits.
func (w *writerState) moved(id string, from, to State, since, last time.Time) {
	if from != "" {
		w.s.m.states.WithLabelValues(string(from)).Dec()
	}
	w.s.m.states.WithLabelValues(string(to)).Inc()
	w.forget(id)
	switch to {
	case StateOpen:
		w.open.set(id, last)
	case StateCommitted:
		w.waiting.set(id, since)
	}
}

func iterKeys(txn *badger.Txn, prefix []byte, fn func(k []byte) error) error {
	o := badger.DefaultIteratorOptions
	o.PrefetchValues = false
	o.Prefix = prefix
	it := txn.NewIterator(o)
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		if err := fn(it.Item().KeyCopy(nil)); err != nil {
			return err
		}
	}
	return nil
}

func readUint(read func([]byte) ([]byte, error), k []byte) (uint64, error) {
	b, err := read(k)
	if err != nil || len(b) == 0 {
		return 0, err
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("meta %q: bad length %d", k, len(b))
	}
	return beUint64(b), nil
}

// runEncoder takes queued items in batches and encodes their calls ahead of
// the writer (a record's sequence number is patched in later), passing
// operations through in order. After the first call of a batch it waits
// Queue.BatchDelay for more, unless a full batch is already queued: at a
// steady trickle of calls the encoder and the writer then wake once per
// batch, not once per call, which on two cores is most of what capture
// costs the proxy.
func (s *Store) runEncoder() {
	defer close(s.encoded)
	size := 0
	for {
		it, ok := <-s.q
		if !ok {
			return
		}
		if it.call != nil && len(s.q) < s.opts.Queue.BatchSize-1 {
			time.Sleep(s.opts.Queue.BatchDelay)
		}
		batch, open := drain(s.q, append(make([]item, 0, 16), it), s.opts.Queue.BatchSize)
		for i := range batch {
			if c := batch[i].call; c != nil {
				enc := encodeCall(make([]byte, 0, size+size/4), c)
				size = len(enc)
				batch[i].enc = compactCall(enc)
			}
		}
		s.encoded <- batch
		if !open {
			return
		}
	}
}

// drain appends to batch what q holds now, up to max items; open is false
// once q is closed.
func drain(q chan item, batch []item, max int) ([]item, bool) {
	for len(batch) < max {
		select {
		case it, ok := <-q:
			if !ok {
				return batch, false
			}
			batch = append(batch, it)
		default:
			return batch, true
		}
	}
	return batch, true
}

// runWriter stores the encoder's batches: calls are written together, and a
// queued operation runs after the calls queued before it.
func (s *Store) runWriter() {
	defer close(s.done)
	calls := make([]item, 0, s.opts.Queue.BatchSize)
	for batch := range s.encoded {
		for _, it := range batch {
			calls = s.take(calls, it)
		}
		calls = s.flushCalls(calls)
		if len(s.encoded) == 0 && len(s.q) == 0 {
			_ = s.syncWrites()
		}
	}
	_ = s.syncWrites()
}

// take adds a call to the batch, or writes the batch and runs an operation.
func (s *Store) take(batch []item, it item) []item {
	if it.call != nil {
		return append(batch, it)
	}
	batch = s.flushCalls(batch)
	if err := s.syncWrites(); err != nil {
		it.op.done <- err
		return batch
	}
	it.op.done <- it.op.fn()
	return batch
}

// flushCalls encodes a batch of calls with their session records into the
// open Badger write batch, which commits asynchronously while the writer goes
// on (syncWrites waits for it). Header commits and rewards need the calls
// visible, so they sync first. It returns the emptied batch.
func (s *Store) flushCalls(batch []item) []item {
	if len(batch) == 0 {
		return batch
	}
	start := time.Now()
	if s.w.wb == nil {
		s.w.wb = s.db.NewWriteBatch()
	}
	var t *tx
	var bytes, stored int
	settle := false
	err := s.db.View(func(txn *badger.Txn) error {
		t = s.newTx(s.w.wb, txn)
		for _, it := range batch {
			c := it.call
			if err := checkCall(c); err != nil {
				s.m.dropped.Inc()
				s.log.Warn("drop captured call", "err", err)
				continue
			}
			n, err := s.putCall(t, c, it.enc)
			if err != nil {
				return err
			}
			bytes += n
			stored++
			settle = settle || c.Hone.Commit || c.Hone.Reward != nil
		}
		return t.flush()
	})
	if err != nil {
		t.failed(err)
		s.w.wb.Cancel()
		s.w.wb = nil
		s.w.cache.Purge()
		s.m.dropped.Add(float64(stored))
		s.log.Error("write captured calls", "calls", len(batch), "err", err)
		return batch[:0]
	}
	t.committed()
	s.m.stored.Add(float64(stored))
	s.m.storedBytes.Add(float64(bytes))
	s.m.batchSeconds.Observe(time.Since(start).Seconds())
	if settle {
		s.settleHeaders(batch)
	}
	clear(batch)
	return batch[:0]
}

// settleHeaders applies X-Hone-Commit and X-Hone-Reward of a written batch.
func (s *Store) settleHeaders(batch []item) {
	if err := s.syncWrites(); err != nil {
		return
	}
	for _, it := range batch {
		c := it.call
		if !c.Hone.Commit && c.Hone.Reward == nil {
			continue
		}
		if err := s.settle(c.Session, c.Hone.Commit); err != nil {
			s.log.Error("commit or reward from header", "session", c.Session, "err", err)
		}
	}
}

// syncWrites waits until the open write batch is committed. On failure the
// session cache, which may be ahead of the store, is dropped.
func (s *Store) syncWrites() error {
	if s.w.wb == nil {
		return nil
	}
	err := s.w.wb.Flush()
	s.w.wb = nil
	if err != nil {
		s.w.cache.Purge()
		s.m.writeErrors.Inc()
		s.log.Error("commit captured calls", "err", err)
	}
	return err
}

func checkCall(c *Call) error {
	if _, err := ParseID(c.Session); err != nil || c.Session == "" || c.ID == "" || strings.IndexByte(c.ID, 0) >= 0 {
		return fmt.Errorf("call %q session %q: %w", c.ID, c.Session, ErrInvalid)
	}
	return nil
}

// putCall assigns the call its sequence number, updates its session and
// writes the call with its indexes. It returns the encoded size.
func (s *Store) putCall(t *tx, c *Call, enc []byte) (int, error) {
	rec, err := t.sessionOf(c)
	if err != nil {
		return 0, err
	}
	if rec == nil {
		rec = &Session{ID: c.Session, Created: t.now}
		if err := t.setState(rec, StateOpen); err != nil {
			return 0, err
		}
		if !c.NewSession {
			t.reconcile(rec)
		}
	}
	if err := s.noteCall(t, rec, c); err != nil {
		return 0, err
	}
	ttl := s.opts.Retention.CallTTL
	if enc == nil {
		enc = encodeCall(nil, c)
	}
	patchSeq(enc, c.Seq)
	entries := []*badger.Entry{
		badger.NewEntry(callKey(c.ID), enc),
		badger.NewEntry(seqKey(c.Session, c.Seq), []byte(c.ID)),
	}
	if c.ResponseID != "" {
		entries = append(entries, badger.NewEntry(respKey(c.ResponseID), []byte(c.Session+"\x00"+c.ID)))
	}
	for _, e := range entries {
		if ttl > 0 {
			e = e.WithTTL(ttl)
		}
		if err := t.w.SetEntry(e); err != nil {
			return 0, fmt.Errorf("write call %s: %w", c.ID, err)
		}
	}
	return len(enc), nil
}

// noteCall folds a call into its session record.
func (s *Store) noteCall(t *tx, rec *Session, c *Call) error {
	c.Seq = rec.NextSeq
	rec.NextSeq++
	rec.Calls++
	if c.End.After(rec.LastCall) {
		rec.LastCall = c.End
	}
	if rec.LastCall.IsZero() {
		rec.LastCall = t.now
	}
	if rec.Model == "" {
		rec.Model = c.Model
	}
	task := c.Task
	if task == "" {
		task = c.Hone.Task
	}
	if _, err := ParseID(task); err != nil {
		task = "" // not indexable; the request keeps what the agent sent
	}
	if err := t.setTask(rec, task); err != nil {
		return err
	}
	for _, tag := range c.Hone.Tags {
		if !contains(rec.Tags, tag) {
			rec.Tags = append(rec.Tags, tag)
		}
	}
	if c.Hone.Reward != nil {
		t.addReward(rec, Reward{Value: *c.Hone.Reward, Source: "header", At: t.now})
		s.m.feedback.WithLabelValues("header").Inc()
	}
	t.touch(rec)
	if rec.State == StateOpen {
		id, last := rec.ID, rec.LastCall
		t.after = append(t.after, func() { s.w.open.set(id, last) })
	}
	return nil
}

// setTask sets the session's task once and indexes it.
func (t *tx) setTask(rec *Session, task string) error {
	if task == "" || rec.Task != "" {
		return nil
	}
	rec.Task = task
	t.touch(rec)
	if err := t.w.SetEntry(badger.NewEntry(taskKey(task, rec.ID), nil)); err != nil {
		return fmt.Errorf("index task %s: %w", task, err)
	}
	return nil
}
