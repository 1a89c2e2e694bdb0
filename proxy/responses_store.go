package proxy

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/hone-rl/hone/capture"
)

// ConversationStore keeps, per Responses API response id, the conversation
// up to and including that response (chat messages as JSON, without the
// request's instructions, which a follow-up does not inherit), so a request
// naming previous_response_id continues it against an engine that keeps no
// state; the Responses surface keeps each output item under its item id the
// same way (its JSON as the agent got it), for the item_reference input
// items that name it. Conversations are scoped by owner (the client key's id, "" without
// client keys): another client's response id is unknown to it, as OpenAI
// answers it (404 previous_response_not_found).
//
// PutConversation is called when a response with store (the default) ends,
// before the agent has its end: it must not wait on disk. conv is not
// changed afterwards, nor are the bytes Conversation returns. Conversation
// reports a conversation unknown (or expired) with false and no error; an
// error is a failure to read it.
type ConversationStore interface {
	PutConversation(owner, id string, conv []byte) error
	Conversation(owner, id string) ([]byte, bool, error)
}

// The capture store keeps conversations across restarts (hone serve and
// hone demo use it).
var _ ConversationStore = (*capture.Conversations)(nil)

// conversations is the Responses surface's access to the ConversationStore
// in use: by default an in-memory LRU bounded in count
// (proxy.responses.max) and age (proxy.responses.ttl), which a restart
// forgets (a follow-up then gets the 404 for an unknown
// previous_response_id); SetConversations replaces it, as hone serve does
// with the capture store's (capture.Conversations: durable, see there).
// Conversations of sessions capture skips stay in the in-memory LRU
// whatever the store (put's transient).
type conversations struct {
	cs atomic.Pointer[convStore]
	// mem keeps the conversations of sessions capture skips, in memory
	// only whatever the store in use: a skipped session stores no content
	mem *memConversations
}

type convStore struct {
	ConversationStore
	log *slog.Logger
}

func newConversations(max int, ttl time.Duration) *conversations {
	c := &conversations{mem: newMemConversations(max, ttl)}
	c.cs.Store(&convStore{ConversationStore: c.mem, log: slog.Default()})
	return c
}

// SetConversations keeps the Responses API conversations in cs from now on
// (the conversations kept before are not carried over: call it before
// Serve). hone serve passes the capture store's, which survive a restart.
func (s *Server) SetConversations(cs ConversationStore) {
	s.responses.cs.Store(&convStore{ConversationStore: cs, log: s.log})
}

// put keeps owner's conversation ending with response id: in memory only
// when transient (its session is not captured), else in the store in use.
// A failure is logged: the response has been answered; a follow-up naming
// it gets 404.
func (c *conversations) put(owner, id string, conv []byte, transient bool) {
	if transient {
		_ = c.mem.PutConversation(owner, id, conv)
		return
	}
	cs := c.cs.Load()
	if err := cs.PutConversation(owner, id, conv); err != nil {
		cs.log.Warn("responses: conversation not kept; a follow-up naming it gets 404",
			"response", id, "err", err)
	}
}

// get returns owner's conversation ending with response id. A store that
// cannot be read is logged, and the conversation treated as unknown.
func (c *conversations) get(owner, id string) ([]byte, bool) {
	if conv, ok, _ := c.mem.Conversation(owner, id); ok {
		return conv, true
	}
	cs := c.cs.Load()
	conv, ok, err := cs.Conversation(owner, id)
	if err != nil {
		cs.log.Error("responses: conversation store unreadable; previous_response_id answered as unknown",
			"response", id[:min(len(id), 64)], "err", err)
		return nil, false
	}
	return conv, ok
}

// memConversations is the default ConversationStore: in memory, bounded in
// count, age and bytes (memConvBytes: a conversation with images inlined
// can be tens of megabytes, and any agent can keep its conversations here
// with X-Hone-Train: 0); a restart forgets it.
type memConversations struct {
	lru   *expirable.LRU[string, []byte]
	mu    sync.Mutex // orders puts, so bytes stays the sum of what lru holds
	bytes atomic.Int64
	max   int64
}

// memConvBytes bounds the bytes of the in-memory conversations: 1/16 of the
// memory budget, at least 16 MiB.
func memConvBytes() int64 { return max(16<<20, capture.MemoryBudget()/16) }

func newMemConversations(max int, ttl time.Duration) *memConversations {
	m := &memConversations{max: memConvBytes()}
	m.lru = expirable.NewLRU[string, []byte](max, func(_ string, v []byte) { m.bytes.Add(-int64(len(v))) }, ttl)
	return m
}

func (m *memConversations) PutConversation(owner, id string, conv []byte) error {
	if int64(len(conv)) > m.max {
		return errors.New("conversation larger than the in-memory bound")
	}
	k := owner + "\x00" + id
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lru.Remove(k) // a replaced value is not evicted, so not uncounted
	m.bytes.Add(int64(len(conv)))
	m.lru.Add(k, conv)
	for m.bytes.Load() > m.max {
		if _, _, ok := m.lru.RemoveOldest(); !ok {
			break
		}
	}
	return nil
}

func (m *memConversations) Conversation(owner, id string) ([]byte, bool, error) {
	conv, ok := m.lru.Get(owner + "\x00" + id)
	return conv, ok, nil
}
