package capture

import (
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
type claimBook struct {
	mu      sync.Mutex
	due     map[string]string         // session -> owner, written at the next flush
	kept    *lru.Cache[string, int64] // session -> when its key was last queued (unix ns)
	dropped int                       // claims not queued since the last flush: too many due
}

// maxClaimsDue bounds the claims waiting for a flush (one janitor tick).
const maxClaimsDue = 1 << 16

func newClaimBook(size int) (*claimBook, error) {
	kept, err := lru.New[string, int64](size)
	return &claimBook{due: map[string]string{}, kept: kept}, err
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
