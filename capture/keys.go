package capture

import (
	"encoding/binary"

	"github.com/google/uuid"
)

// Key prefixes; see doc.go for the layout.
const (
	pCall    = 'c'
	pSeq     = 's'
	pResp    = 'r'
	pSession = 'S'
	pState   = 'x'
	pTask    = 't'
	pReady   = 'q'
	pMeta    = 'm'
	pConv    = 'C' // Responses API conversations (conversations.go)
	pClaim   = 'O' // owners of sessions capture skips (claims.go)
)

const sep = 0

// NewID returns a new id for a session or a call: a UUIDv7, whose first 48
// bits are the time in milliseconds. Keys made from ids in creation order
// are inserted next to each other, so Badger's memtable skiplist finds
// their place along paths already in the CPU's cache; a random (v4) id
// costs a cache miss on nearly every level of it. The other 74 bits are
// random, so ids stay unguessable; ownership does not rest on them.
func NewID() string { return uuid.Must(uuid.NewV7()).String() }

func key(prefix byte, parts ...string) []byte {
	n := 1
	for _, p := range parts {
		n += 1 + len(p)
	}
	k := make([]byte, 0, n+9)
	k = append(k, prefix)
	for _, p := range parts {
		k = append(k, sep)
		k = append(k, p...)
	}
	return k
}

// responsePrefixes open the response ids made from a call id: vLLM answers
// a call sent with "X-Request-Id: <id>" as chatcmpl-<id> (chat) or
// cmpl-<id> (completions), and hone sends its call id; hone names its
// translated answers resp_<call id> (Responses) and msg_<call id>
// (Messages).
var responsePrefixes = [...]string{"chatcmpl-", "cmpl-", "resp_", "msg_"}

// derivedCallID returns the call id responseID was made from, or "" when
// it has none of those prefixes.
func derivedCallID(responseID string) string {
	for _, p := range responsePrefixes {
		if len(responseID) > len(p) && responseID[:len(p)] == p {
			return responseID[len(p):]
		}
	}
	return ""
}

// ownResponseID reports whether c's response id was made from its call id:
// such a call is found by its response id through its own key, and needs no
// response-id index entry.
func ownResponseID(c *Call) bool { return c.ResponseID != "" && derivedCallID(c.ResponseID) == c.ID }

func callKey(id string) []byte         { return key(pCall, id) }
func respKey(id string) []byte         { return key(pResp, id) }
func sessionKey(id string) []byte      { return key(pSession, id) }
func taskKey(task, sess string) []byte { return key(pTask, task, sess) }
func seqPrefix(sess string) []byte     { return append(key(pSeq, sess), sep) }
func metaKey(name string) []byte       { return key(pMeta, name) }
func claimKey(sess string) []byte      { return key(pClaim, sess) }
func readyPrefix() []byte              { return []byte{pReady, sep} }
func statePrefix(st State) []byte      { return []byte{pState, sep, stateByte(st), sep} }
func seqKey(sess string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(seqPrefix(sess), seq)
}

func readyKey(cursor uint64) []byte {
	return binary.BigEndian.AppendUint64(readyPrefix(), cursor)
}

// respIndexKey is the index entry for call callID, which got response id
// respID: one entry per call, so calls that share a response id (agents
// that chose their own X-Request-Id alike) are each found, and none
// overwrites another's. Stores before it kept one entry per response id,
// under respKey alone; those are still read (sessionsOfResponse) and
// deleted with their call (respKeysOf).
func respIndexKey(respID, callID string) []byte { return key(pResp, respID, callID) }

// stateByte names a state in the state index, one distinct byte each.
// (Stores before index version 2 used the state's first letter, which
// committed and consumed share; migrateStateIndex moves them.)
func stateByte(st State) byte {
	switch st {
	case StateConsumed:
		return 'u'
	case StateCommitted:
		return 'c'
	}
	return st[0] // open, ready, dropped
}

// stateKey indexes a session by state and the time it entered the state.
func stateKey(st State, sinceNanos int64, sess string) []byte {
	k := binary.BigEndian.AppendUint64(statePrefix(st), uint64(sinceNanos))
	k = append(k, sep)
	return append(k, sess...)
}

// stateKeySession extracts the session id of a stateKey.
func stateKeySession(k []byte) string {
	const head = 4 + 8 + 1
	if len(k) < head {
		return ""
	}
	return string(k[head:])
}
