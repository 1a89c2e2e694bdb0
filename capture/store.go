package capture

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// encodedQueue bounds encoded batches waiting for the writer.
const encodedQueue = 4

// ErrClosed is returned by operations on a closed store.
var ErrClosed = errors.New("capture store closed")

// ErrNotFound is returned for unknown sessions, calls or response ids.
var ErrNotFound = errors.New("not found")

// ErrInvalid is wrapped by errors about bad requests (HTTP 400).
var ErrInvalid = errors.New("invalid request")

// ErrQueueFull is what Call.Durable gets for a call dropped because the
// capture queue was full (capture.on_full: drop).
var ErrQueueFull = errors.New("capture queue full")

// Store is the capture store: the proxy's Recorder, the control plane's
// feedback and commit target and the trainer's experience source.
type Store struct {
	db   *badger.DB
	dir  string
	opts Options
	m    *metrics
	log  *slog.Logger

	// hot path, safe for concurrent use
	live  *lru.Cache[string, bool]   // session id -> selected
	infer *lru.Cache[uint64, string] // hash(messages + reply) -> session id
	// hash(a line of a reply) -> session id, for agents that compacted
	// their conversation (compaction.go)
	summaries *lru.Cache[uint64, string]
	pending   *lru.Cache[string, pendingHash] // call id -> hash of its request messages
	owners    *lru.Cache[string, string]      // session id -> owner, claimed at admission (owner.go)
	claims    *claimBook                      // skipped sessions' claims, kept in the store (claims.go)

	mu     sync.RWMutex // guards closed against sends on q
	closed bool
	q      chan item // the bounded hot-path queue
	// queued estimates the bytes the calls in the queue and in the encoder
	// and writer hold (their bodies, tokens and encoded records); with
	// on_full=drop a call that would take it past maxQueued is dropped as
	// on a full queue. Calls are the memory a writer that falls behind
	// piles up: 65536 of them could hold gigabytes.
	queued    atomic.Int64
	maxQueued int64
	encoded   chan []item // batches of q after encoding, to the writer

	hookMu     sync.Mutex
	readyHooks []func(ReadySession) // OnReady
	readyCh    chan ReadySession    // to the hooks' goroutine; nil without hooks

	w       *writerState // owned by the writer goroutine
	done    chan struct{}
	stopJan chan struct{}
	janDone chan struct{}
}

// item is one queued unit of work: a call to store or an operation to run
// on the writer goroutine after everything queued before it.
type item struct {
	call *Call
	enc  []byte // the call's record, encoded by the encoder goroutine
	op   *op
	err  error // why the writer did not store call
	size int64 // callBytes, counted in Store.queued
}

type op struct {
	fn   func() error
	done chan error
}

// Open opens (creating if needed) the Badger store in dir. reg may be nil.
func Open(dir string, opts Options, reg prometheus.Registerer) (*Store, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	// No block compression: with it Badger builds every flushed or compacted
	// table with 2 x NumCPU compressing goroutines, which take all of the
	// proxy's cores for the length of a flush (~70 ms for a 64 MB memtable
	// on two cores); the values that dominate the store live in the value
	// log, which is never compressed, so the LSM grows by only ~1% per call.
	//
	// Memory (memtables, block and index caches) is sized from the process's
	// memory budget (memory.go).
	bo := sizesFor(MemoryBudget()).apply(badger.DefaultOptions(dir)).
		WithCompression(options.None).
		WithLogger(badgerLogger{slog.Default().With("component", "badger")}).
		WithNumVersionsToKeep(1).
		WithValueThreshold(1 << 10).
		WithDetectConflicts(false) // one writer goroutine
	db, err := badger.Open(bo)
	if err != nil {
		return nil, fmt.Errorf("open capture store %s (is another hone using it?): %w", dir, err)
	}
	s := &Store{db: db, dir: dir, opts: opts, maxQueued: sizesFor(MemoryBudget()).queueBytes, log: slog.Default().With("component", "capture"),
		q: make(chan item, opts.Queue.Size), encoded: make(chan []item, encodedQueue), done: make(chan struct{}),
		stopJan: make(chan struct{}), janDone: make(chan struct{})}
	s.m, err = newMetrics(reg, func() float64 { return float64(len(s.q)) })
	if err == nil {
		err = s.migrateStateIndex()
	}
	if err == nil {
		err = s.initCaches()
	}
	if err == nil {
		s.w, err = loadWriterState(s)
	}
	if err == nil {
		err = s.recoverReady()
	}
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	s.restoreInference() // agents in the middle of a conversation keep their sessions
	go s.runEncoder()
	go s.runWriter()
	go s.runJanitor()
	return s, nil
}

func (s *Store) initCaches() error {
	var err error
	if s.live, err = lru.New[string, bool](s.opts.Queue.CacheSize); err != nil {
		return fmt.Errorf("session cache: %w", err)
	}
	if s.infer, err = lru.New[uint64, string](s.opts.Session.InferCache); err != nil {
		return fmt.Errorf("inference cache: %w", err)
	}
	if s.summaries, err = lru.New[uint64, string](s.opts.Session.InferCache); err != nil {
		return fmt.Errorf("summary cache: %w", err)
	}
	if s.pending, err = lru.New[string, pendingHash](s.opts.Queue.CacheSize); err != nil {
		return fmt.Errorf("pending cache: %w", err)
	}
	if s.owners, err = lru.New[string, string](s.opts.Queue.CacheSize); err != nil {
		return fmt.Errorf("owner cache: %w", err)
	}
	if s.claims, err = newClaimBook(s.opts.Queue.CacheSize); err != nil {
		return fmt.Errorf("claims cache: %w", err)
	}
	return nil
}

// Close drains the queue, stops the writer and closes the database.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stopJan)
	<-s.janDone
	s.mu.Lock()
	close(s.q)
	s.mu.Unlock()
	<-s.done
	s.hookMu.Lock()
	if s.readyCh != nil {
		close(s.readyCh) // the hooks finish what is queued
	}
	s.hookMu.Unlock()
	if err := s.flushClaims(); err != nil {
		s.log.Error("skipped sessions' owners not written", "err", err)
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close capture store: %w", err)
	}
	return nil
}

// DB exposes the underlying database to the traces and export commands.
func (s *Store) DB() *badger.DB { return s.db }

// Admit resolves the session of a call and decides whether it is captured.
// It touches no disk.
func (s *Store) Admit(a *Admission) Verdict {
	sid := a.Hone.Session
	var selKey uint64
	isNew, claimed := false, false
	if sid != "" {
		selKey = xxhash.Sum64String(sid)
		if _, err := ParseID(sid); err != nil {
			// Over-long or control characters: use a stable derived id.
			sid = "x-" + strconv.FormatUint(selKey, 16)
		}
		if err := s.claim(sid, a.Owner, a.CallID); err != nil {
			s.m.foreign.WithLabelValues("header", "call").Inc()
			return Verdict{Session: sid, Refused: err}
		}
		claimed = a.Owner != ""
	} else {
		sid, selKey, isNew = s.inferSession(a)
	}
	selected, known := false, false
	if !isNew { // a new id is in no cache: no lookup
		selected, known = s.live.Get(sid)
	}
	if !known {
		selected = s.remember(sid, s.decide(a, selKey), isNew)
	}
	if !selected {
		s.countSkipped(a)
		if claimed {
			s.keepClaim(sid, a.Owner)
		}
	}
	return Verdict{Session: sid, Capture: selected, New: isNew}
}

// remember records a session's selection the first time it is seen, and
// counts it; a concurrent call that recorded it first wins. A new id is in
// no cache, so it is added without a lookup.
func (s *Store) remember(sid string, selected, isNew bool) bool {
	if isNew {
		s.live.Add(sid, selected)
	} else if prev, ok, _ := s.live.PeekOrAdd(sid, selected); ok {
		return prev
	}
	if selected {
		s.m.sessions.WithLabelValues("captured").Inc()
	} else {
		s.m.sessions.WithLabelValues("skipped").Inc()
	}
	return selected
}

// inferSession finds the open session whose last call (messages + reply)
// the request's messages extend; otherwise it makes a new id (isNew). The
// selection key of an inferred session is the hash of its opening messages,
// so every turn of a conversation gets the same decision.
func (s *Store) inferSession(a *Admission) (id string, key uint64, isNew bool) {
	if !s.opts.Session.Infer || a.Route != RouteChat {
		id := NewID()
		return id, xxhash.Sum64String(id), true
	}
	// The owner's salt: one client's call never joins another's conversation.
	salt := ownerSalt(a.Owner)
	var texts []string // what a compacting agent's summary may sit in, read in the same pass
	hs, opening, ok := conversationHashes(a.Body, salt, func(t string) { texts = append(texts, t) })
	if !ok {
		id := NewID()
		return id, xxhash.Sum64String(id), true
	}
	s.pending.Add(a.CallID, pendingHash{hs[len(hs)-1], salt})
	for i := len(hs) - 1; i >= 0; i-- {
		if id, ok := s.infer.Get(hs[i] ^ salt); ok {
			return id, opening, false
		}
	}
	if id, ok := s.summarisedSession(texts, salt); ok { // the agent compacted its conversation
		return id, opening, false
	}
	return NewID(), opening, true
}

// decide applies X-Hone-Train, the selection rules and the sample rate.
func (s *Store) decide(a *Admission, key uint64) bool {
	switch a.Hone.Train {
	case 1:
		return true
	case 0:
		return false
	}
	rate := s.opts.Selection.SampleRate
	for _, r := range s.opts.Selection.Rules {
		if (r.Model == "" || r.Model == "*" || r.Model == a.Model) && (r.Tag == "" || contains(a.Hone.Tags, r.Tag)) {
			rate = r.SampleRate
			break
		}
	}
	if rate >= 1 {
		return true
	}
	if rate <= 0 {
		return false
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], key)
	return unitInterval(xxhash.Sum64(b[:])) < rate
}

func (s *Store) countSkipped(a *Admission) {
	s.m.skippedCalls.Inc()
	if a.Hone.Reward != nil {
		s.m.skippedEvents.WithLabelValues("reward").Inc()
	}
	if a.Hone.Commit {
		s.m.skippedEvents.WithLabelValues("commit").Inc()
	}
}

// Abandon tells the store that the call Admit captured as callID (for
// session, of owner) will never be recorded: no engine answered it, or its
// request could not be rewritten. The new session id's claim that call
// pinned is released now rather than after an hour (claims.go).
func (s *Store) Abandon(callID, session, owner string) {
	if owner != "" {
		s.claims.abandon(session, callID)
	}
}

// Record enqueues a captured call; the store owns c afterwards. It never
// waits on disk: with on_full=drop a full queue drops the call and counts it
// (and answers c.Durable with ErrQueueFull).
func (s *Store) Record(c *Call) {
	s.registerReply(c)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		s.m.dropped.Inc()
		sendDurable(c, fmt.Errorf("capture call %s: %w", c.ID, ErrClosed))
		return
	}
	size := callBytes(c)
	if s.opts.Queue.OnFull == "block" {
		s.queued.Add(size)
		s.q <- item{call: c, size: size}
		return
	}
	if n := s.queued.Add(size); n > s.maxQueued && n > size { // one call always fits in an empty pipeline
		s.drop(c, size, fmt.Errorf("capture call %s: %w (%d MiB queued)", c.ID, ErrQueueFull, (n-size)>>20))
		return
	}
	select {
	case s.q <- item{call: c, size: size}:
	default:
		s.drop(c, size, fmt.Errorf("capture call %s: %w", c.ID, ErrQueueFull))
	}
}

// drop gives back the queue room Record took for c, counts c dropped,
// releases its claim (Abandon) and answers its Durable with err.
func (s *Store) drop(c *Call, size int64, err error) {
	s.queued.Add(-size)
	s.m.dropped.Inc()
	s.Abandon(c.ID, c.Session, c.Owner)
	sendDurable(c, err)
}

// callBytes estimates the memory a queued call holds until it is written:
// its bodies, token ids, logprobs and text, and about as much again for its
// encoded record.
func callBytes(c *Call) int64 {
	n := len(c.Request) + len(c.Response) + 4*len(c.PromptIDs) + len(c.Error) + 512
	for i := range c.Choices {
		ch := &c.Choices[i]
		n += 4*len(ch.TokenIDs) + 4*len(ch.Logprobs) + 4*len(ch.PromptIDs) + len(ch.Content) + len(ch.Reasoning)
		for _, tc := range ch.ToolCalls {
			n += len(tc.Name) + len(tc.Arguments) + 64
		}
	}
	return 2 * int64(n)
}

// registerReply remembers hash(messages + reply) of each choice so that the
// agent's next turn joins this session.
func (s *Store) registerReply(c *Call) {
	if c.Hone.Session != "" || !s.opts.Session.Infer {
		return
	}
	p, ok := s.pending.Peek(c.ID)
	if !ok {
		return
	}
	s.pending.Remove(c.ID)
	d := xxhash.New()
	for i := range c.Choices {
		m := replyMessage(&c.Choices[i])
		s.infer.Add(m.extend(d, p.h)^p.salt, c.Session)
	}
	s.registerSummaries(c, p.salt)
}

// pendingHash is the message-prefix hash of an admitted call and its
// owner's salt.
type pendingHash struct{ h, salt uint64 }

// do runs fn on the writer goroutine after everything queued before it and
// waits for its result.
func (s *Store) do(ctx context.Context, fn func() error) error {
	o := &op{fn: fn, done: make(chan error, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	select {
	case s.q <- item{op: o}:
		s.mu.RUnlock()
	case <-ctx.Done():
		s.mu.RUnlock()
		return ctx.Err()
	}
	select {
	case err := <-o.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// unitInterval maps a hash uniformly to [0,1).
func unitInterval(h uint64) float64 { return float64(h>>11) / math.Exp2(53) }

// RewardRule is the configured reward.combine rule.
func (s *Store) RewardRule() string { return s.opts.Reward.Combine }
