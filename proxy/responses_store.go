package proxy

import (
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
)

// conversations keeps, per Responses API response id, the conversation up
// to and including that response (chat messages, without the request's
// instructions, which a follow-up does not inherit), so a request naming
// previous_response_id continues it against an engine that keeps no state.
// Bounded in count (proxy.responses.max) and age (proxy.responses.ttl);
// kept in memory: a restart forgets them, and a follow-up then gets the
// API's 404 for an unknown previous_response_id.
type conversations struct {
	lru *expirable.LRU[string, []byte]
}

func newConversations(max int, ttl time.Duration) *conversations {
	return &conversations{lru: expirable.NewLRU[string, []byte](max, nil, ttl)}
}

// put keeps owner's conversation ending with response id.
func (c *conversations) put(owner, id string, conv []byte) { c.lru.Add(owner+"\x00"+id, conv) }

// get returns owner's conversation ending with response id. Another
// client's response id is unknown to it, as OpenAI answers it.
func (c *conversations) get(owner, id string) ([]byte, bool) { return c.lru.Get(owner + "\x00" + id) }
