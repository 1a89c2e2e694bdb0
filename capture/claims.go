package capture

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	lru "github.com/hashicorp/golang-lru/v2"
)

// A session capture skips has no record to hold its owner, so its claim
// (owner.go) would live in the claims cache alone: new ids pushing it out,
// or a restart, would give the id to the next client that names it, and
// the first one's calls would be refused. Such claims are kept in the store
// as keys of their own (O 0 <session> -> owner) that live as long as a
// session without calls (idle timeout, reward deadline and the TTL
// margin): written with the session's first call, and again by a later
// call once half that time has passed. They are written in one batch per
// janitor tick (and at Close), off the capture writer, whose batching of
// calls an extra unit per skipped session would break.
//
// A new id's claim is also pinned (fresh) until the store holds it: the
// session record of a captured session's first call (in flight, queued or
// in a write batch still committing) or a skipped session's claim key. The
// claims cache alone would let a client that floods new ids push the claim
// out before then, and take the id with its next call: the first client's
// calls would be refused from then on. The janitor unpins claims the store
// holds at each tick. A call that will never be stored unpins its own claim
// (abandon: no engine answered it, the queue dropped it); one nothing
// stores within freshLife (a call the writer refused) lapses.
type claimBook struct {
	mu      sync.Mutex
	due     map[string]string         // session -> owner, written at the next flush
	kept    *lru.Cache[string, int64] // session -> when its key was last queued (unix ns)
	dropped int                       // claims not queued since the last flush: too many due

	fresh        map[string]freshClaim // new ids' claims, until the store holds them
	freshOf      map[string]int        // pinned claims by owner
	freshRefused int                   // claims not pinned since the last prune: too many fresh
}

// freshClaim is the owner of a new session id, the call that claimed it,
// and when.
type freshClaim struct {
	owner, call string
	at          time.Time
}

// maxClaimsDue bounds the claims waiting for a flush (one janitor tick).
const maxClaimsDue = 1 << 16

// maxFresh bounds the pinned claims, and maxFreshPerOwner those of one
// client key (so no key can use them all up with calls hone never stores,
// such as ones it refuses after admission): past either, a new id's claim
// lives in the claims cache alone (and a warning says so).
const (
	maxFresh         = 1 << 16
	maxFreshPerOwner = 1 << 12
)

// freshLife is how long a claim stays pinned without the store holding it.
const freshLife = time.Hour

func newClaimBook(size int) (*claimBook, error) {
	kept, err := lru.New[string, int64](size)
	return &claimBook{due: map[string]string{}, kept: kept, fresh: map[string]freshClaim{}, freshOf: map[string]int{}}, err
}

// pinned returns the owner of a pinned claim of id.
func (c *claimBook) pinned(id string) (owner string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.fresh[id]
	return f.owner, ok
}

// pin claims the new id for owner unless another claim of it is pinned,
// whose owner it returns (found). With too many pinned, pinned is false
// and the caller falls back to the claims cache.
func (c *claimBook) pin(id, owner, call string, now time.Time) (holder string, found, pinned bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.fresh[id]; ok {
		return f.owner, true, true
	}
	if len(c.fresh) >= maxFresh || c.freshOf[owner] >= maxFreshPerOwner {
		c.freshRefused++
		return "", false, false
	}
	c.fresh[id] = freshClaim{owner: owner, call: call, at: now}
	c.freshOf[owner]++
	return owner, false, true
}

// abandon unpins id's claim if call made it: that call will never be
// stored (no engine answered it, the queue was full), so nothing would
// unpin it before it lapses, and the pins it holds count against its
// owner's share. The claim stays in the claims cache.
func (c *claimBook) abandon(id, call string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.fresh[id]; ok && f.call == call {
		c.unpin(id, f.owner)
	}
}

// unpin drops a pinned claim (c.mu held).
func (c *claimBook) unpin(id, owner string) {
	delete(c.fresh, id)
	if c.freshOf[owner]--; c.freshOf[owner] <= 0 {
		delete(c.freshOf, owner)
	}
}

// pruneFresh unpins the claims the store now holds and those older than
// freshLife.
func (s *Store) pruneFresh(now time.Time) error {
	c := s.claims
	c.mu.Lock()
	ids := make([]string, 0, len(c.fresh))
	for id, f := range c.fresh {
		if now.Sub(f.at) >= freshLife {
			c.unpin(id, f.owner)
			continue
		}
		ids = append(ids, id)
	}
	refused := c.freshRefused
	c.freshRefused = 0
	c.mu.Unlock()
	if refused > 0 {
		s.log.Warn("new session ids' owners kept in the claims cache only: too many new ones at once", "sessions", refused)
	}
	if len(ids) == 0 {
		return nil
	}
	var held []string
	err := s.db.View(func(txn *badger.Txn) error {
		for _, id := range ids {
			for _, k := range [][]byte{sessionKey(id), claimKey(id)} {
				if _, err := txn.Get(k); err == nil {
					held = append(held, id)
					break
				} else if !errors.Is(err, badger.ErrKeyNotFound) {
					return err
				}
			}
		}
		return nil
	})
	c.mu.Lock()
	for _, id := range held {
		if f, ok := c.fresh[id]; ok {
			c.unpin(id, f.owner)
		}
	}
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("unpin stored claims: %w", err)
	}
	return nil
}

// claimTTL is how long a skipped session's stored claim lives after it is
// written: as long as a session without calls (a day when sessions never
// close idle).
func (s *Store) claimTTL() time.Duration {
	idle := s.opts.Session.IdleTimeout
	if idle <= 0 {
		idle = 24 * time.Hour
	}
	return idle + max(s.opts.Reward.Deadline, 0) + ttlMargin
}

// keepClaim notes a call of owner in session id, which capture skips: the
// claim is queued for the store unless it was within the last half of its
// lifetime.
func (s *Store) keepClaim(id, owner string) {
	c := s.claims
	now := time.Now().UnixNano()
	if t, ok := c.kept.Get(id); ok && now-t < int64(s.claimTTL()/2) {
		return
	}
	c.kept.Add(id, now)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.due) >= maxClaimsDue {
		c.dropped++
		c.kept.Remove(id) // tried again with its next call
		return
	}
	c.due[id] = owner
}

// flushClaims writes the claims due in one batch.
func (s *Store) flushClaims() error {
	c := s.claims
	c.mu.Lock()
	due, dropped := c.due, c.dropped
	c.due, c.dropped = map[string]string{}, 0
	c.mu.Unlock()
	if dropped > 0 {
		s.log.Warn("skipped sessions' owners kept in memory only: too many new ones in one janitor tick", "sessions", dropped)
	}
	if len(due) == 0 {
		return nil
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	ttl := s.claimTTL()
	for id, owner := range due {
		if err := wb.SetEntry(badger.NewEntry(claimKey(id), []byte(owner)).WithTTL(ttl)); err != nil {
			return err
		}
	}
	return wb.Flush()
}
