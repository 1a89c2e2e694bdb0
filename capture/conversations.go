package capture

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/klauspost/compress/zstd"
)

// Conversations keeps the OpenAI Responses API conversations the proxy
// continues for previous_response_id (one per response id: the chat
// messages up to and including that response, as JSON), and the output
// items an item_reference names (one per item id: the item as the agent
// got it), in the trace store, so that they survive a restart of hone. It is the proxy's
// ConversationStore; Store.Conversations makes it.
//
// A conversation belongs to the owner (client key id) that made it: another
// owner's lookup of the same response id finds nothing.
//
// # Storage
//
//	C 0 <owner> 0 <response id>    'j' + the conversation JSON, or from 1 KiB
//	                               'z' + the JSON zstd-compressed          TTL: see below
//
// Each is written with a Badger TTL of the ttl given to Store.Conversations
// (proxy.responses.ttl; 1h when 0), never longer than retention.call_ttl
// when that is set; Badger counts TTLs in whole seconds, so one goes up to
// a second early. Expired ones are gone for reads at once, and their space
// is reclaimed by compaction and the janitor's value-log GC. They are not
// counted by proxy.responses.max, which bounds only the copies kept in
// memory (below), nor evicted by retention.max_bytes: the TTL bounds them.
// Each record holds its whole conversation (turns are not shared between
// the records of one task), as the in-memory store did.
//
// Reads go to an in-memory LRU of recent conversations (at most the number
// of entries given to Store.Conversations and convCacheBytes of them), and
// on a miss to a Badger read.
//
// # Durability
//
//   - PutConversation (called when the response ends, before the agent has
//     its end) keeps the conversation in the LRU, so a follow-up finds it at
//     once, and queues it for the conversation writer; it never waits on disk.
//   - The writer compresses what is queued and commits it in one Badger write
//     batch, without fsync (Badger's SyncWrites is off), typically within a
//     millisecond. From then the conversation survives a crash or kill -9 of
//     hone (it is in Badger's memtable and value logs, in the kernel's page
//     cache), but not a crash of the machine or a power loss until Badger's
//     logs are next synced (the capture store's next synced write: a
//     control-plane operation, a call waiting on Durable; or Close). A kill
//     -9 thus loses the conversations of the last few milliseconds.
//   - Store.Close waits until every queued conversation is committed, then
//     closes Badger, which syncs: a graceful stop (hone serve stops the data
//     plane, then closes the store) loses none.
//   - When convQueue conversations (or convQueueBytes) already wait for the
//     writer, a new one is kept in memory only (a restart forgets it), with a
//     warning in the log.
type Conversations struct {
	s   *Store
	ttl time.Duration
	q   chan convPut

	queued   atomic.Int64 // bytes of the conversations in q and being written
	dropped  atomic.Int64 // conversations not persisted because q was full
	lastWarn atomic.Int64 // unix nanos of the last queue-full warning

	mu         sync.Mutex
	cache      *simplelru.LRU[string, convEntry]
	cacheBytes int64 // bytes of the cached conversations; guarded by mu
	maxBytes   int64

	enc *zstd.Encoder // the writer goroutine's
}

// convPut is a conversation waiting for the writer. It holds a read lock
// of Store.mu until it is written, so Store.Close (which takes the write
// lock before it closes Badger) waits for it.
type convPut struct {
	key  []byte
	conv []byte
}

type convEntry struct {
	conv    []byte
	expires int64 // unix nanos
}

const (
	convQueue    = 1024 // conversations waiting for the writer
	convBatch    = 256  // conversations per write batch
	convZstdMin  = 1024 // conversations from this size are compressed
	maxConvIDLen = 1024 // longest owner or response id stored
	convFmtJSON  = 'j'  // value format: the JSON as is
	convFmtZstd  = 'z'  // value format: zstd-compressed JSON
	convDefTTL   = time.Hour
)

// convCacheBytes bounds the conversations the LRU keeps in memory: 1/32 of
// the memory budget, 4 to 64 MiB (a conversation of a long agent task is a
// few hundred KiB of JSON).
func convCacheBytes() int64 { return max(4<<20, min(64<<20, MemoryBudget()/32)) }

// convQueueBytes bounds the bytes of the conversations waiting for the
// writer (1/16 of the memory budget, at least 16 MiB).
func convQueueBytes() int64 { return max(16<<20, MemoryBudget()/16) }

// Conversations returns the store's Responses API conversation store,
// whose conversations expire after ttl (at most retention.call_ttl; 1h
// when ttl is 0) and of which up to cacheEntries stay in memory
// (proxy.responses.max; 1024 when 0). Call it once, before traffic; its
// writer stops with the store.
func (s *Store) Conversations(ttl time.Duration, cacheEntries int) *Conversations {
	if ttl <= 0 {
		ttl = convDefTTL
	}
	if ct := s.opts.Retention.CallTTL; ct > 0 && ct < ttl {
		ttl = ct
	}
	if cacheEntries <= 0 {
		cacheEntries = 1024
	}
	c := &Conversations{s: s, ttl: ttl, q: make(chan convPut, convQueue), maxBytes: convCacheBytes()}
	c.cache, _ = simplelru.NewLRU[string, convEntry](cacheEntries, func(_ string, e convEntry) {
		c.cacheBytes -= int64(len(e.conv)) // called under mu
	})
	c.enc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	go c.run()
	return c
}

// TTL is how long a conversation is kept.
func (c *Conversations) TTL() time.Duration { return c.ttl }

func convKey(owner, id string) ([]byte, error) {
	for _, p := range []string{owner, id} {
		if len(p) > maxConvIDLen || strings.IndexByte(p, 0) >= 0 {
			return nil, fmt.Errorf("conversation id %.40q: %w", p, ErrInvalid)
		}
	}
	if id == "" {
		return nil, fmt.Errorf("conversation without a response id: %w", ErrInvalid)
	}
	return key(pConv, owner, id), nil
}

// PutConversation keeps owner's conversation ending with response id (see
// Conversations for when it is durable). conv must not change afterwards.
// It never waits on disk; it fails only for an id that cannot be stored
// (ErrInvalid) and on a closed store (ErrClosed).
func (c *Conversations) PutConversation(owner, id string, conv []byte) error {
	k, err := convKey(owner, id)
	if err != nil {
		return err
	}
	c.s.mu.RLock()
	if c.s.closed {
		c.s.mu.RUnlock()
		return ErrClosed
	}
	c.remember(string(k), conv, time.Now().Add(c.ttl))
	n := int64(len(conv))
	if q := c.queued.Add(n); q > convQueueBytes() && q > n {
		c.queued.Add(-n)
		c.s.mu.RUnlock()
		c.noteDropped()
		return nil
	}
	select {
	case c.q <- convPut{key: k, conv: conv}: // the writer releases the read lock
	default:
		c.queued.Add(-n)
		c.s.mu.RUnlock()
		c.noteDropped()
	}
	return nil
}

// Conversation returns owner's conversation ending with response id, and
// whether there is one (an expired one, or one of another owner, is not).
// The bytes returned must not be changed.
func (c *Conversations) Conversation(owner, id string) ([]byte, bool, error) {
	k, err := convKey(owner, id)
	if err != nil {
		return nil, false, nil // never stored
	}
	if conv, ok := c.cached(string(k)); ok {
		return conv, true, nil
	}
	c.s.mu.RLock()
	defer c.s.mu.RUnlock()
	if c.s.closed {
		return nil, false, ErrClosed
	}
	var v []byte
	var exp uint64
	err = c.s.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(k)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		exp = it.ExpiresAt()
		v, err = it.ValueCopy(nil)
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("read conversation %.40q: %w", id, err)
	}
	if v == nil {
		return nil, false, nil
	}
	conv, err := decodeConv(v)
	if err != nil {
		return nil, false, fmt.Errorf("read conversation %.40q: %w", id, err)
	}
	expires := time.Now().Add(c.ttl)
	if exp > 0 {
		expires = time.Unix(int64(exp), 0)
	}
	c.remember(string(k), conv, expires)
	return conv, true, nil
}

func (c *Conversations) remember(k string, conv []byte, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cache.Remove(k) // a replaced entry is not "evicted": take its bytes off first
	c.cacheBytes += int64(len(conv))
	c.cache.Add(k, convEntry{conv: conv, expires: expires.UnixNano()})
	for c.cacheBytes > c.maxBytes && c.cache.Len() > 1 {
		c.cache.RemoveOldest()
	}
}

func (c *Conversations) cached(k string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.cache.Get(k)
	if !ok {
		return nil, false
	}
	if time.Now().UnixNano() >= e.expires {
		c.cache.Remove(k)
		return nil, false
	}
	return e.conv, true
}

func (c *Conversations) noteDropped() {
	n := c.dropped.Add(1)
	now := time.Now().UnixNano()
	if last := c.lastWarn.Load(); now-last >= int64(10*time.Second) && c.lastWarn.CompareAndSwap(last, now) {
		c.s.log.Warn("responses conversations: the write queue is full; kept in memory only, a restart forgets them",
			"not_persisted_total", n)
	}
}

// run is the conversation writer: it writes what is queued in batches
// until the store closes. Store.Close takes Store.mu's write lock, which
// waits for every queued conversation to be written and its read lock
// released, before it closes stopJan: q is empty then.
func (c *Conversations) run() {
	batch := make([]convPut, 0, convBatch)
	for {
		select {
		case p := <-c.q:
			batch = append(batch[:0], p)
		more:
			for len(batch) < convBatch {
				select {
				case p := <-c.q:
					batch = append(batch, p)
				default:
					break more
				}
			}
			c.write(batch)
			for i := range batch {
				c.queued.Add(-int64(len(batch[i].conv)))
				c.s.mu.RUnlock()
			}
			clear(batch)
		case <-c.s.stopJan:
			return
		}
	}
}

// write commits a batch of conversations (no fsync).
func (c *Conversations) write(batch []convPut) {
	wb := c.s.db.NewWriteBatch()
	for _, p := range batch {
		e := badger.NewEntry(p.key, c.encode(p.conv)).WithTTL(c.ttl)
		if err := wb.SetEntry(e); err != nil {
			c.s.log.Error("write responses conversation", "bytes", len(p.conv), "err", err)
		}
	}
	if err := wb.Flush(); err != nil {
		c.s.log.Error("write responses conversations", "conversations", len(batch), "err", err)
	}
}

func (c *Conversations) encode(conv []byte) []byte {
	if len(conv) < convZstdMin {
		return append([]byte{convFmtJSON}, conv...)
	}
	dst := make([]byte, 1, 1+len(conv)/4)
	dst[0] = convFmtZstd
	return c.enc.EncodeAll(conv, dst)
}

func decodeConv(v []byte) ([]byte, error) {
	if len(v) == 0 {
		return nil, errors.New("empty conversation record")
	}
	switch v[0] {
	case convFmtJSON:
		return v[1:], nil
	case convFmtZstd:
		return zdec.DecodeAll(v[1:], nil)
	}
	return nil, fmt.Errorf("conversation record: unknown format %q", v[0])
}
