package capture

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// writerState is owned by the writer goroutine.
type writerState struct {
	s     *Store
	cache *simplelru.LRU[string, *Session]
	open  *timeHeap // open session -> last call
	// where the reward deadline's next pass reads the committed sessions'
	// state index (nil: from the start), and the time of the sweep that
	// set it: a later sweep with an earlier time starts over
	deadlineFrom []byte
	deadlineAt   time.Time
	// open sessions with a reward, and their owners: what a Trinity
	// /commit closes
	rewardedOpen map[string]string
	// committed sessions with a reward found at load: a crash came between
	// the batch that committed them (or gave a ready one another call) and
	// the building of their experiences; Open builds them
	recover []string
	cursor  uint64             // last ready-queue cursor assigned
	acked   uint64             // ack watermark
	wb      *badger.WriteBatch // open write batch of calls, committing asynchronously
}

func loadWriterState(s *Store) (*writerState, error) {
	cache, err := simplelru.NewLRU[string, *Session](min(s.opts.Queue.CacheSize, sizesFor(MemoryBudget()).records), nil)
	if err != nil {
		return nil, fmt.Errorf("writer cache: %w", err)
	}
	w := &writerState{s: s, cache: cache, open: newTimeHeap(),
		rewardedOpen: map[string]string{}}
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

// loadIndex counts sessions by state, rebuilds the open set and lists the
// committed sessions with a reward (recover).
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
			switch {
			case st == StateOpen:
				w.open.set(id, rec.LastCall)
				if rec.rewarded() {
					w.rewardedOpen[id] = rec.Owner
				}
			case rec.rewarded():
				w.recover = append(w.recover, id)
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

// recoverReady builds the experiences of the committed, rewarded sessions
// found at load (before the writer starts).
func (s *Store) recoverReady() error {
	ids := s.w.recover
	s.w.recover = nil
	for _, id := range ids {
		err := s.update(true, func(t *tx) error {
			rec, err := t.session(id)
			if err != nil || rec == nil {
				return err
			}
			return t.tryReady(rec)
		})
		if err != nil { // the session stays committed; hone still starts
			s.log.Error("ready session after restart", "session", id, "err", err)
		}
	}
	return nil
}

// forget drops a session from the in-memory sets (it changed state or was
// deleted).
func (w *writerState) forget(id string) {
	w.open.remove(id)
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
		if last.IsZero() {
			last = since // a new session: its first call sets the time right after; a zero would sift to the top and back
		}
		w.open.set(id, last)
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
	var plain, scratch []byte // one call's plain and compressed encodings, reused: only an exact copy is kept
	for {
		it, ok := <-s.q
		if !ok {
			return
		}
		// A call whose response waits on Durable goes without the delay.
		if it.call != nil && it.call.Durable == nil && len(s.q) < s.opts.Queue.BatchSize-1 {
			time.Sleep(s.opts.Queue.BatchDelay)
		}
		batch, open := drain(s.q, append(make([]item, 0, 16), it), s.opts.Queue.BatchSize)
		for i := range batch {
			if c := batch[i].call; c != nil {
				plain = encodeCall(plain[:0], c)
				enc := compactCall(plain, &scratch)
				if len(enc) > 0 && &enc[0] == &plain[0] {
					enc = bytes.Clone(plain) // kept plain (small or incompressible): the batch gets its own copy
				}
				batch[i].enc = enc
				if cap(plain) > 1<<20 {
					plain = nil // a rare large call's buffer is not kept
				}
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
// on (syncWrites waits for it). Header commits and rewards are part of the
// batch; sessions they (or a call to a ready session) leave committed with a
// reward build their experiences after the batch, which needs the calls
// visible. Calls with a Durable channel get their answer once all of that
// is synced. It returns the emptied batch.
func (s *Store) flushCalls(batch []item) []item {
	if len(batch) == 0 {
		return batch
	}
	var size int64
	for i := range batch {
		size += batch[i].size
	}
	defer s.queued.Add(-size)
	start := time.Now()
	if s.w.wb == nil {
		s.w.wb = s.db.NewWriteBatch()
	}
	var t *tx
	var bytes, stored int
	durable := false
	err := s.db.View(func(txn *badger.Txn) error {
		t = s.newTx(s.w.wb, txn)
		for i := range batch {
			c := batch[i].call
			durable = durable || c.Durable != nil
			if err := checkCall(c); err != nil {
				s.m.dropped.Inc()
				s.log.Warn("drop captured call", "err", err)
				batch[i].err = err
				continue
			}
			n, err := s.putCall(t, c, batch[i].enc)
			if err != nil {
				return err
			}
			batch[i].err = c.refused
			bytes += n
			stored++
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
		answerDurable(batch, err, nil)
		clear(batch)
		return batch[:0]
	}
	t.committed()
	s.m.stored.Add(float64(stored))
	s.m.storedBytes.Add(float64(bytes))
	s.m.batchSeconds.Observe(time.Since(start).Seconds())
	var failed map[string]error
	if len(t.ready) > 0 || durable {
		failed = s.readyAfterBatch(t.ready)
	}
	if durable {
		var err error
		if failed[""] == nil {
			err = s.db.Sync() // Badger's SyncWrites is off: one fsync for the calls that wait on it
		}
		answerDurable(batch, err, failed)
	}
	clear(batch)
	return batch[:0]
}

// readyAfterBatch syncs the batch's writes and builds the experiences of
// the sessions it left committed with a reward, in one transaction (one per
// session when that fails, so one bad session does not hold back the
// others). It returns the errors by session ("" for the sync of the batch).
func (s *Store) readyAfterBatch(ids []string) map[string]error {
	if err := s.syncWrites(); err != nil {
		return map[string]error{"": err}
	}
	if len(ids) == 0 {
		return nil
	}
	build := func(ids []string) error {
		return s.update(false, func(t *tx) error {
			for _, id := range ids {
				rec, err := t.session(id)
				if err != nil {
					return err
				}
				if rec != nil {
					if err := t.tryReady(rec); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
	if len(ids) > 1 && build(ids) == nil {
		return nil
	}
	var failed map[string]error
	for _, id := range ids {
		if err := build([]string{id}); err != nil {
			s.log.Error("ready session after its calls", "session", id, "err", err)
			if failed == nil {
				failed = map[string]error{}
			}
			failed[id] = err
		}
	}
	return failed
}

// answerDurable sends each waiting call its result: its own error, the
// batch's, or its session's.
func answerDurable(batch []item, err error, failed map[string]error) {
	for _, it := range batch {
		c := it.call
		if c == nil || c.Durable == nil {
			continue
		}
		e := it.err
		if e == nil {
			e = err
		}
		if e == nil {
			e = failed[""]
		}
		if e == nil {
			e = failed[c.Session]
		}
		if e != nil {
			e = fmt.Errorf("capture call %s: %w", c.ID, e)
		}
		sendDurable(c, e)
	}
}

// sendDurable answers a call's Durable channel without ever blocking.
func sendDurable(c *Call, err error) {
	if c.Durable == nil {
		return
	}
	select {
	case c.Durable <- err:
	default:
	}
	c.Durable = nil
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
	sent := c.Session
	rec, err := s.sessionFor(t, c)
	if err != nil {
		return 0, err
	}
	if c.Session != sent {
		enc = nil // stored in another session than the encoder saw
	}
	if err := s.noteCall(t, rec, c); err != nil {
		return 0, err
	}
	ttl := s.opts.Retention.CallTTL
	if enc == nil {
		enc = compactCall(encodeCall(nil, c), nil)
	}
	patchSeq(enc, c.Seq)
	entries := []*badger.Entry{
		badger.NewEntry(callKey(c.ID), enc),
		badger.NewEntry(seqKey(c.Session, c.Seq), []byte(c.ID)),
	}
	if c.ResponseID != "" && !ownResponseID(c) {
		entries = append(entries, badger.NewEntry(respIndexKey(c.ResponseID, c.ID), []byte(c.Session+"\x00"+c.ID)))
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

// maxChain bounds the continuation links followed for one call.
const maxChain = 64

// sessionFor returns the session a call is stored in, creating it when
// needed, and sets c.Session to it (doc.go, Sessions and Ownership):
//   - a session id of another owner: the caller's own <id>@<owner tag>;
//   - a consumed session: its continuation, made on first need;
//   - a ready one: it takes the call and goes back to committed, and its
//     experiences are rebuilt after the batch;
//   - a session old enough that its first calls may expire before a new
//     call could be trained on (retention.call_ttl): closed, and continued;
//   - a dropped one: the call is an orphan (stored, counted, never trained).
func (s *Store) sessionFor(t *tx, c *Call) (*Session, error) {
	rec, err := t.sessionOf(c)
	if err != nil {
		return nil, err
	}
	if rec != nil && foreign(c.Owner, rec) {
		s.countForeign(t, "header", c.Hone.Reward != nil, c.Hone.Commit)
		c.Session = ownedID(rec.ID, c.Owner)
		if rec, err = t.session(c.Session); err != nil {
			return nil, err
		}
	}
	if rec == nil {
		return t.newSession(c.Session, c.Owner, c.Start, !c.NewSession)
	}
	if rec, err = t.latest(rec); err != nil {
		return nil, err
	}
	if rec.State != StateDropped && rec.State != StateConsumed && s.aging(rec, t.now) {
		if err := t.close(rec, "ttl"); err != nil {
			return nil, err
		}
		t.readyLater(rec)
		rec, err = t.continueSession(rec)
	} else {
		switch rec.State {
		case StateConsumed:
			rec, err = t.continueSession(rec)
		case StateReady:
			err = t.setState(rec, StateCommitted) // rebuilt with this call after the batch
		case StateDropped:
			rec.Orphans++
			t.touch(rec)
			t.after = append(t.after, s.m.orphans.Inc)
		}
	}
	if err != nil {
		return nil, err
	}
	c.Session = rec.ID
	return rec, nil
}

// aging reports whether a session is so old that a call joining it now
// might lose its first calls to retention.call_ttl before the session is
// built: its age is past call_ttl minus the longest it can still take to
// close and get its reward (idle timeout + reward deadline + margin).
func (s *Store) aging(rec *Session, now time.Time) bool {
	ttl := s.opts.Retention.CallTTL
	if ttl <= 0 || rec.Created.IsZero() {
		return false
	}
	return now.Sub(rec.Created) >= ttl-s.opts.Session.IdleTimeout-s.opts.Reward.Deadline-ttlMargin
}

func (s *Store) countForeign(t *tx, source string, reward, commit bool) {
	t.after = append(t.after, func() {
		if reward {
			s.m.foreign.WithLabelValues(source, "reward").Inc()
		}
		if commit {
			s.m.foreign.WithLabelValues(source, "commit").Inc()
		}
	})
}

// noteCall folds a call into its session record: sequence number, counts,
// task, tags, and its header reward and commit.
func (s *Store) noteCall(t *tx, rec *Session, c *Call) error {
	t.touch(rec)
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
	rec.addTags(c.Hone.Tags)
	if c.Hone.Reward != nil {
		if err := t.addReward(rec, Reward{Value: *c.Hone.Reward, Source: "header", At: t.now}); err != nil {
			c.refused = err // the call (and its commit) are stored; the agent is told the reward was not
		} else {
			s.m.feedback.WithLabelValues("header").Inc()
		}
	}
	t.touch(rec)
	if c.Hone.Commit {
		if err := t.close(rec, "header"); err != nil {
			return err
		}
	}
	switch rec.State {
	case StateOpen:
		id, last := rec.ID, rec.LastCall
		t.after = append(t.after, func() { s.w.open.set(id, last) })
	case StateCommitted:
		t.readyLater(rec)
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
