package capture

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/dgraph-io/badger/v4"
)

// ErrForbidden is wrapped by errors about sessions the caller does not own
// (HTTP 403).
var ErrForbidden = errors.New("forbidden")

type ownerKey struct{}

// WithOwner returns a context that restricts the store's feedback and
// commit operations (Feedback, Commit, TrinityFeedback, TrinityCommit and
// the HTTP routes that call them) to the sessions of owner, the opaque id
// the proxy derives from a client key. A context without an owner (the
// control plane; the data plane without client keys) may reward and commit
// any session. WithOwner(ctx, "") restricts to sessions without an owner.
func WithOwner(ctx context.Context, owner string) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// OwnerFrom returns the owner a context acts for, "" for none.
func OwnerFrom(ctx context.Context) string {
	o, _ := ownerFrom(ctx)
	return o
}

// ownerFrom returns the owner a context restricts to, if any.
func ownerFrom(ctx context.Context) (owner string, restricted bool) {
	owner, restricted = ctx.Value(ownerKey{}).(string)
	return owner, restricted
}

// ErrSessionOwned is wrapped by the refusal of a call whose session id
// another client opened (Verdict.Refused).
var ErrSessionOwned = fmt.Errorf("session id belongs to another client: %w", ErrForbidden)

// owns reports whether a caller restricted to owner may read, reward,
// commit or extend rec: only the sessions it opened (sessions without an
// owner belong to callers without one).
func owns(owner string, rec *Session) bool { return rec.Owner == owner }

// claim checks that owner may use the session id an agent sent, and claims
// it for owner when nobody holds it. The first client to send an id owns
// it: later calls of other clients naming it are refused, so the id an
// agent is told (X-Hone-Session) is always the session its calls, rewards
// and commits go to. Without an owner (no client keys) nothing is checked.
// The claim is made at admission, before the call reaches the writer, so
// two clients racing for a new id cannot both be told they have it; the
// store is read only on a cache miss. A new id's claim stays pinned until
// the store holds it (claims.go).
func (s *Store) claim(id, owner, call string) error {
	if owner == "" {
		return nil
	}
	if o, ok := s.owners.Get(id); ok {
		return checkClaim(id, o, owner)
	}
	if o, ok := s.claims.pinned(id); ok {
		s.owners.Add(id, o)
		return checkClaim(id, o, owner)
	}
	holder, held, err := s.storedOwner(id)
	if err != nil {
		s.log.Error("read session owner", "session", id, "err", err)
		return fmt.Errorf("session %s: owner unreadable: %w", id, err)
	}
	if held {
		s.owners.Add(id, holder)
		return checkClaim(id, holder, owner)
	}
	holder, found, pinned := s.claims.pin(id, owner, call, time.Now())
	if !pinned {
		holder, found, _ = s.owners.PeekOrAdd(id, owner)
	} else {
		s.owners.Add(id, holder)
	}
	if found {
		return checkClaim(id, holder, owner)
	}
	return nil
}

// storedOwner reads the owner of session id from its record, or, for a
// session capture skipped (no record), from the claim kept for it
// (claims.go); held is false when neither exists.
func (s *Store) storedOwner(id string) (owner string, held bool, err error) {
	err = s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(sessionKey(id))
		if errors.Is(err, badger.ErrKeyNotFound) {
			item, err = txn.Get(claimKey(id))
			if errors.Is(err, badger.ErrKeyNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			held = true
			return item.Value(func(b []byte) error { owner = string(b); return nil })
		}
		if err != nil {
			return err
		}
		return item.Value(func(b []byte) error {
			rec, err := decodeSession(b)
			if err == nil {
				owner, held = rec.Owner, true
			}
			return err
		})
	})
	return owner, held, err
}

func checkClaim(id, holder, owner string) error {
	if holder != owner {
		return fmt.Errorf("session %s: %w", id, ErrSessionOwned)
	}
	return nil
}

// foreign reports whether a call of owner names a session that belongs to
// another client. Calls without an owner (no client keys) are foreign to
// nothing.
func foreign(owner string, rec *Session) bool {
	return owner != "" && rec.Owner != "" && rec.Owner != owner
}

// ownedID is the session a call of owner is stored in when the session id
// it sent belongs to another client: <id>@<12 hex digits of the owner's
// hash>. Deterministic, so the client's later calls and its feedback with
// the same id find it.
func ownedID(id, owner string) string {
	tag := strconv.FormatUint(xxhash.Sum64String(owner), 16)
	if len(tag) > 12 {
		tag = tag[:12]
	}
	return boundedID(id, "@"+tag)
}

// continuationID is part n (2, 3, ...) of the session chain started by root.
func continuationID(root string, n int) string { return boundedID(root, "."+strconv.Itoa(n)) }

// boundedID appends suffix to id, replacing id by its hash when the result
// would be longer than an id may be.
func boundedID(id, suffix string) string {
	if len(id)+len(suffix) > maxIDLen {
		id = "x-" + strconv.FormatUint(xxhash.Sum64String(id), 16)
	}
	return id + suffix
}

// ownerSalt separates the session-inference hashes of different owners.
func ownerSalt(owner string) uint64 {
	if owner == "" {
		return 0
	}
	return xxhash.Sum64String(owner) | 1
}
