package capture

import (
	"context"
	"errors"
	"strconv"

	"github.com/cespare/xxhash/v2"
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

// owns reports whether a caller restricted to owner may reward or commit
// rec: its own sessions and sessions without an owner.
func owns(owner string, rec *Session) bool { return rec.Owner == "" || rec.Owner == owner }

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
