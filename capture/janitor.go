package capture

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// maxPerPass bounds the sessions one janitor pass touches in a transaction.
const maxPerPass = 256

// runJanitor periodically closes idle sessions, applies the reward deadline
// and enforces the size cap, with runRelease beside it.
func (s *Store) runJanitor() {
	released := make(chan struct{})
	go func() { defer close(released); s.runRelease() }()
	defer func() { <-released; close(s.janDone) }()
	tick := time.NewTicker(s.opts.Retention.Interval)
	defer tick.Stop()
	lastGC := time.Now()
	for {
		select {
		case <-s.stopJan:
			return
		case now := <-tick.C:
			if err := s.flushClaims(); err != nil {
				s.log.Error("skipped sessions' owners not written", "err", err)
			}
			if err := s.pruneFresh(now); err != nil {
				s.log.Error("capture janitor", "err", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if err := s.Sweep(ctx, now); err != nil && !errors.Is(err, ErrClosed) {
				s.log.Error("capture janitor", "err", err)
			}
			cancel()
			if now.Sub(lastGC) >= vlogGCInterval {
				lastGC = now
				_ = s.db.RunValueLogGC(0.5)   // reclaims expired and deleted values; ErrNoRewrite is normal
				releaseMapped(s.dir, ".vlog") // the GC read a whole value-log file through its mapping
			}
		}
	}
}

// runRelease hands the kernel back the pages of Badger's mapped value logs,
// memtable logs and tables (releaseMapped) every releaseInterval, and sooner
// when the process's file-backed RSS passes a quarter of the memory budget:
// it checks that every releaseCheck, apart from the janitor's sweeps (a
// sweep can take seconds under load, while one compaction maps a few
// hundred MB of new tables; the soak saw 275 MiB of file pages on top of
// the heap with a release every 10 s only). Stops with the janitor, or for
// good where the kernel lacks MADV_PAGEOUT.
func (s *Store) runRelease() {
	tick := time.NewTicker(releaseCheck)
	defer tick.Stop()
	budget := max(32<<20, MemoryBudget()/4)
	last := time.Now()
	for {
		select {
		case <-s.stopJan:
			return
		case now := <-tick.C:
			if now.Sub(last) < releaseInterval && mappedRSS() <= budget {
				continue
			}
			last = now
			if _, ok := releaseMapped(s.dir, ".vlog", ".mem", ".sst"); !ok {
				return
			}
		}
	}
}

// releaseInterval is the longest time between two releases. Compactions
// alone bring ~2 MB/s of table pages in at 500 calls/s; a lookup whose
// block was released reads it from the disk again.
const releaseInterval = 10 * time.Second

// releaseCheck is how often runRelease reads the file-backed RSS
// (/proc/self/status: a few microseconds).
const releaseCheck = 250 * time.Millisecond

// vlogGCInterval is how often the janitor rewrites one value-log file
// whose space is mostly expired or deleted.
const vlogGCInterval = 10 * time.Minute

// Sweep runs one janitor sweep as of now: idle sessions close, committed
// sessions past the reward deadline get the default reward or are dropped,
// and consumed sessions are evicted above the size cap. Closing and the
// deadline run in passes of at most maxPerPass sessions, one transaction
// each, with recorded calls written in between, until none is due or
// sweepBudget is spent: a store that opens more sessions per second than
// one pass closes (header-less one-call sessions at a few hundred calls
// per second) keeps up instead of falling further behind every second.
func (s *Store) Sweep(ctx context.Context, now time.Time) error {
	var errs []error // one kind of work failing holds back none of the others
	for _, pass := range []func(time.Time) (int, error){s.closeIdle, s.applyDeadline} {
		errs = append(errs, s.passes(ctx, func() (int, error) {
			// the count comes back by channel: do may return (ctx done)
			// while the pass still runs on the writer
			done := make(chan int, 1)
			if err := s.do(ctx, func() error { n, err := pass(now); done <- n; return err }); err != nil {
				return 0, err
			}
			return <-done, nil
		}))
	}
	if s.opts.Retention.MaxBytes > 0 {
		// one pass a sweep: Badger refreshes the sizes once a minute, so
		// more passes would evict on a figure that does not see them
		if lsm, vlog := s.db.Size(); lsm+vlog > s.opts.Retention.MaxBytes {
			_, err := s.Evict(ctx, maxPerPass)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// sweepBudget bounds the time one sweep spends on one kind of work.
const sweepBudget = 500 * time.Millisecond

// passes runs pass until it does less than a full pass, ctx ends or
// sweepBudget is spent. Each pass is its own unit on the writer, so calls
// recorded meanwhile are not held up behind the whole sweep.
func (s *Store) passes(ctx context.Context, pass func() (int, error)) error {
	stop := time.Now().Add(sweepBudget)
	for {
		n, err := pass()
		if err != nil || n < maxPerPass || ctx.Err() != nil || time.Now().After(stop) {
			return err
		}
	}
}

// closeIdle closes up to maxPerPass sessions idle since before now less
// the idle timeout, or, while more sessions are open than maxOpen, the
// longest idle ones ("capacity": a flood of new sessions, each held in
// memory for the idle timeout, would otherwise outgrow the memory budget),
// and returns how many it looked at.
func (s *Store) closeIdle(now time.Time) (int, error) {
	idle := s.opts.Session.IdleTimeout
	var ids []string
	by, cutoff := "idle", now.Add(-idle)
	if idle > 0 {
		ids = s.w.open.before(cutoff, maxPerPass)
	}
	if over := s.w.open.Len() - s.maxOpen(); len(ids) == 0 && over > 0 {
		var last time.Time
		ids, last = s.w.open.oldest(min(over, maxPerPass))
		by, cutoff = "capacity", last.Add(1) // drop's bound: past every one of them
	}
	if len(ids) == 0 {
		return 0, nil
	}
	closeOne := func(t *tx, id string) (bool, error) {
		rec, err := t.session(id)
		if err != nil || rec == nil {
			return false, err
		}
		return true, t.closeAndReady(rec, by)
	}
	_, err := s.together(ids, by, closeOne)
	if err == nil {
		s.w.open.drop(ids, cutoff)
		if by == "capacity" {
			s.m.capacityClosed.Add(float64(len(ids)))
		}
	}
	return len(ids), err
}

// maxOpen is Session.MaxOpen, or its default from the memory budget.
func (s *Store) maxOpen() int {
	if n := s.opts.Session.MaxOpen; n > 0 {
		return n
	}
	return int(max(10000, MemoryBudget()>>10))
}

// applyDeadline gives up to maxPerPass committed sessions past the reward
// deadline the default reward or drops them, and returns how many it
// looked at. It reads them from the state index, where committed sessions
// sort by the time they were committed, from where the last pass stopped
// (writerState.deadlineFrom; from the start after a restart, or when the
// clock went back), so that a pass goes on past sessions left committed
// (with a reward whose experiences failed to build) instead of reading
// them again every second. No set of the committed sessions is kept in
// memory: without a reward they wait reward.deadline (an hour by default),
// and at a few thousand header-less sessions a second such a set held
// millions.
func (s *Store) applyDeadline(now time.Time) (int, error) {
	dl := s.opts.Reward.Deadline
	if dl <= 0 {
		return 0, nil
	}
	cut := now.Add(-dl).UnixNano()
	if cut <= 0 { // a deadline reaching back before 1970: nothing is due
		return 0, nil
	}
	w := s.w
	if now.Before(w.deadlineAt) {
		w.deadlineFrom = nil
	}
	w.deadlineAt = now
	var ids []string
	var next []byte
	err := s.db.View(func(txn *badger.Txn) error {
		ids, next = dueCommitted(txn, w.deadlineFrom, uint64(cut))
		return nil
	})
	if err == nil {
		_, err = s.together(ids, "deadline", s.deadlineOne)
	}
	if err != nil {
		return len(ids), err // the same sessions again next pass
	}
	w.deadlineFrom = next
	return len(ids), nil
}

// deadlineOne gives session id, when still committed without a reward,
// the default reward (building its experiences) or drops it.
func (s *Store) deadlineOne(t *tx, id string) (bool, error) {
	rec, err := t.session(id)
	if err != nil || rec == nil || rec.State != StateCommitted || rec.rewarded() {
		return false, err
	}
	t.touch(rec) // changed from here on: the cache forgets it if the unit fails
	if def := s.opts.Reward.Default; def == nil {
		rec.Closed += ",no-reward"
		err = t.setState(rec, StateDropped)
	} else {
		rec.Rewards = append(rec.Rewards, Reward{Value: *def, Source: "default", At: t.now})
		err = t.tryReady(rec)
	}
	if err != nil {
		return false, fmt.Errorf("reward deadline of session %s: %w", id, err)
	}
	return true, nil
}

// together runs fn for every session of ids in one durable transaction,
// and when that fails, a session at a time (alone). It returns the ids for
// which fn reported a change.
func (s *Store) together(ids []string, by string, fn func(t *tx, id string) (bool, error)) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var changed []string
	err := s.update(true, func(t *tx) error {
		changed = changed[:0]
		for _, id := range ids {
			did, err := fn(t, id)
			if err != nil {
				return err
			}
			if did {
				changed = append(changed, id)
			}
		}
		return nil
	})
	if err != nil {
		return s.alone(ids, by, fn)
	}
	return changed, nil
}

// errUnbuildable marks a session whose experiences cannot be built from
// what is stored (a call that no longer decodes, an experience that cannot
// be encoded): trying again changes nothing.
var errUnbuildable = errors.New("experiences cannot be built")

// alone runs fn for each session of ids in a transaction of its own (after
// one transaction for all of them failed: together), so that a session whose
// experiences cannot be built (errUnbuildable, or too big for a Badger
// transaction) holds back none of the others: it is dropped (closed_by
// gets by and ",build-failed") and logged. Any other failure, which the
// next pass may not meet, stops it and is returned. It returns the ids for
// which fn reported a change, and syncs once, at the end.
func (s *Store) alone(ids []string, by string, fn func(t *tx, id string) (bool, error)) ([]string, error) {
	var changed []string
	for _, id := range ids {
		did := false
		err := s.update(false, func(t *tx) (err error) { did, err = fn(t, id); return err })
		if err == nil {
			if did {
				changed = append(changed, id)
			}
			continue
		}
		if !errors.Is(err, errUnbuildable) && !errors.Is(err, badger.ErrTxnTooBig) {
			return changed, err
		}
		s.log.Error("session dropped: its experiences cannot be built", "session", id, "closing", by, "err", err)
		err = s.update(false, func(t *tx) error {
			rec, err := t.session(id)
			if err != nil || rec == nil || rec.State == StateDropped || rec.State == StateConsumed {
				return err
			}
			if rec.Closed == "" {
				rec.Closed = by
			}
			rec.Closed += ",build-failed"
			return t.setState(rec, StateDropped)
		})
		if err != nil {
			return changed, fmt.Errorf("drop session %s: %w", id, err)
		}
	}
	return changed, s.db.Sync()
}

// dueCommitted returns up to maxPerPass sessions of the committed state
// index entered before cutoff (ns), from key from on (nil: the first), and
// the key to go on from.
func dueCommitted(txn *badger.Txn, from []byte, cutoff uint64) ([]string, []byte) {
	prefix := statePrefix(StateCommitted)
	o := badger.DefaultIteratorOptions
	o.PrefetchValues, o.Prefix = false, prefix
	it := txn.NewIterator(o)
	defer it.Close()
	if from == nil {
		from = prefix
	}
	var ids []string
	for it.Seek(from); it.Valid() && len(ids) < maxPerPass; it.Next() {
		k := it.Item().Key()
		if len(k) < len(prefix)+8 || beUint64(k[len(prefix):]) >= cutoff {
			break
		}
		ids = append(ids, stateKeySession(k))
		from = append(append(from[:0:0], k...), 0) // the next key after k
	}
	return ids, from
}

// Evict deletes up to max consumed sessions, oldest consumed first, with
// their calls, indexes and experiences. It returns how many were deleted.
func (s *Store) Evict(ctx context.Context, max int) (int, error) {
	return s.deleteOldest(ctx, StateConsumed, time.Time{}, max)
}

// deleteOldest deletes up to max sessions in state st that entered it
// before cutoff (zero: any time).
func (s *Store) deleteOldest(ctx context.Context, st State, cutoff time.Time, max int) (int, error) {
	n := 0
	err := s.do(ctx, func() error {
		var ids []string
		err := s.db.View(func(txn *badger.Txn) error {
			return iterKeys(txn, statePrefix(st), func(k []byte) error {
				if len(ids) >= max || !cutoff.IsZero() && int64(beUint64(k[4:12])) >= cutoff.UnixNano() {
					return errStop
				}
				ids = append(ids, stateKeySession(k))
				return nil
			})
		})
		if err != nil && !errors.Is(err, errStop) {
			return err
		}
		for _, id := range ids {
			if err := s.deleteSession(id); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if n > 0 {
		s.m.evicted.Add(float64(n))
	}
	return n, err
}

var errStop = errors.New("stop iteration")

// deleteSession removes a session and everything stored for it.
func (s *Store) deleteSession(id string) error {
	return s.update(true, func(t *tx) error {
		rec, err := t.session(id)
		if err != nil || rec == nil {
			return err
		}
		txn := t.w.(*badger.Txn)
		var keys [][]byte
		err = iterKeys(txn, seqPrefix(id), func(k []byte) error {
			keys = append(keys, k)
			it, err := txn.Get(k)
			if err != nil {
				return err
			}
			cid, err := it.ValueCopy(nil)
			if err != nil {
				return err
			}
			keys = append(keys, callKey(string(cid)))
			return s.respKeysOf(t, string(cid), &keys)
		})
		if err != nil {
			return fmt.Errorf("list keys of %s: %w", id, err)
		}
		for _, c := range rec.Cursors {
			keys = append(keys, readyKey(c))
		}
		keys = append(keys, sessionKey(id), stateKey(rec.State, rec.Since.UnixNano(), id))
		if rec.Task != "" {
			keys = append(keys, taskKey(rec.Task, id))
		}
		for _, k := range keys {
			if err := t.w.Delete(k); err != nil {
				return fmt.Errorf("delete %s: %w", id, err)
			}
		}
		st := rec.State
		t.after = append(t.after, func() {
			s.w.cache.Remove(id)
			s.m.states.WithLabelValues(string(st)).Dec()
			s.w.forget(id)
		})
		delete(t.touched, id)
		return nil
	})
}

// respKeysOf adds the response-id index keys of call callID to keys.
func (s *Store) respKeysOf(t *tx, callID string, keys *[][]byte) error {
	b, err := t.read(callKey(callID))
	if err != nil || b == nil {
		return err
	}
	c, err := decodeCall(b)
	if err != nil {
		return err
	}
	if c.ResponseID == "" || ownResponseID(c) {
		return nil
	}
	*keys = append(*keys, respIndexKey(c.ResponseID, callID))
	// an older store's single entry goes only when it names this call
	old, err := t.read(respKey(c.ResponseID))
	if err != nil {
		return err
	}
	if _, cid, _ := strings.Cut(string(old), "\x00"); old != nil && cid == callID {
		*keys = append(*keys, respKey(c.ResponseID))
	}
	return nil
}

// GC deletes sessions of the given state older than cutoff (all consumed
// and dropped ones when st is empty), then reclaims value-log space.
func (s *Store) GC(ctx context.Context, st State, cutoff time.Time) (int, error) {
	states := []State{StateConsumed, StateDropped}
	if st != "" {
		states = []State{st}
	}
	total := 0
	for _, x := range states {
		for {
			n, err := s.deleteOldest(ctx, x, cutoff, maxPerPass)
			total += n
			if err != nil {
				return total, err
			}
			if n < maxPerPass {
				break
			}
		}
	}
	for s.db.RunValueLogGC(0.5) == nil {
	}
	return total, nil
}
