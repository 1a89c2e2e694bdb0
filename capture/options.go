package capture

import (
	"fmt"
	"time"
)

// Options configures the capture store. The lead config embeds it; every
// section has yaml tags and DefaultOptions documents the defaults.
type Options struct {
	Queue     QueueOptions     `yaml:"capture"`
	Session   SessionOptions   `yaml:"session"`
	Selection SelectionOptions `yaml:"selection"`
	Reward    RewardOptions    `yaml:"reward"`
	Retention RetentionOptions `yaml:"retention"`
}

// QueueOptions sizes the hot-path queue and the batching writer.
type QueueOptions struct {
	Size       int           `yaml:"queue_size"`     // bounded queue length (default 65536)
	OnFull     string        `yaml:"on_full"`        // drop (default) or block
	BatchSize  int           `yaml:"batch_size"`     // max calls per write batch (default 512)
	BatchDelay time.Duration `yaml:"batch_delay"`    // max wait before a partial batch is written (default 10ms)
	CacheSize  int           `yaml:"sessions_cache"` // sessions whose selection is kept in memory (default 100000); the writer keeps at most this many session records, fewer on a small memory limit (memory.go)
	// Continuity is observe (default: prompts go to the engine as the agent
	// sent them) or tokens (hone renders chat prompts itself and puts back
	// the token ids sampled for earlier turns; the proxy implements it).
	Continuity string `yaml:"continuity"`
}

// SessionOptions controls session closing and inference.
type SessionOptions struct {
	IdleTimeout time.Duration `yaml:"idle_timeout"` // open sessions auto-close after this idle time (default 10m; 0 disables)
	Infer       bool          `yaml:"infer"`        // infer sessions from message prefixes when no header (default true)
	InferCache  int           `yaml:"infer_cache"`  // recent (messages+reply) hashes kept for inference (default 100000)
	// MaxOpen bounds the open sessions held in memory (about 130 bytes
	// each, for idle_timeout): above it the janitor closes the longest
	// idle first, early ("capacity"). 0: the memory budget / 1 KiB.
	MaxOpen int `yaml:"max_open"`
}

// SelectionRule overrides the sample rate for sessions whose first call
// matches the model name (exact, or "*" for any) and carries the tag (if set).
type SelectionRule struct {
	Model      string  `yaml:"model"`
	Tag        string  `yaml:"tag"`
	SampleRate float64 `yaml:"sample_rate"`
}

// SelectionOptions decides which sessions are captured.
type SelectionOptions struct {
	SampleRate float64         `yaml:"sample_rate"` // fraction of sessions captured (default 1)
	Rules      []SelectionRule `yaml:"rules"`       // first matching rule wins over SampleRate
}

// RewardOptions controls how rewards combine and what happens without one.
type RewardOptions struct {
	Combine  string        `yaml:"combine"`  // last (default), sum or mean
	Deadline time.Duration `yaml:"deadline"` // closed sessions without reward after this get Default or are dropped (default 1h; 0 waits forever)
	Default  *float64      `yaml:"default"`  // reward given at the deadline; nil drops the session (default nil)
}

// RetentionOptions bounds what the store keeps.
type RetentionOptions struct {
	CallTTL  time.Duration `yaml:"call_ttl"`  // raw calls expire after this (default 0: keep)
	MaxBytes int64         `yaml:"max_bytes"` // evict consumed sessions oldest-first above this size (default 0: no cap)
	Interval time.Duration `yaml:"interval"`  // janitor period for idle, deadline and size checks (default 1s)
}

// DefaultOptions returns the documented defaults.
func DefaultOptions() Options {
	return Options{
		Queue: QueueOptions{Size: 65536, OnFull: "drop", BatchSize: 512, BatchDelay: 10 * time.Millisecond, CacheSize: 100000,
			Continuity: "observe"},
		Session:   SessionOptions{IdleTimeout: 10 * time.Minute, Infer: true, InferCache: 100000},
		Selection: SelectionOptions{SampleRate: 1},
		Reward:    RewardOptions{Combine: "last", Deadline: time.Hour},
		Retention: RetentionOptions{Interval: time.Second},
	}
}

// Validate reports the first invalid value, naming its key (zero sizes are
// defaults, as Open takes them).
func (o Options) Validate() error { return o.validate() }

// validate fills zero sizes with defaults and rejects bad values.
func (o *Options) validate() error {
	d := DefaultOptions()
	if o.Queue.Size <= 0 {
		o.Queue.Size = d.Queue.Size
	}
	if o.Queue.BatchSize <= 0 {
		o.Queue.BatchSize = d.Queue.BatchSize
	}
	if o.Queue.BatchDelay <= 0 {
		o.Queue.BatchDelay = d.Queue.BatchDelay
	}
	if o.Queue.CacheSize <= 0 {
		o.Queue.CacheSize = d.Queue.CacheSize
	}
	if o.Session.InferCache <= 0 {
		o.Session.InferCache = d.Session.InferCache
	}
	if o.Retention.Interval <= 0 {
		o.Retention.Interval = d.Retention.Interval
	}
	switch o.Queue.OnFull {
	case "":
		o.Queue.OnFull = "drop"
	case "drop", "block":
	default:
		return fmt.Errorf("capture.on_full %q: want drop or block", o.Queue.OnFull)
	}
	switch o.Reward.Combine {
	case "":
		o.Reward.Combine = "last"
	case "last", "sum", "mean":
	default:
		return fmt.Errorf("reward.combine %q: want last, sum or mean", o.Reward.Combine)
	}
	if o.Selection.SampleRate < 0 || o.Selection.SampleRate > 1 {
		return fmt.Errorf("selection.sample_rate %v: want 0..1", o.Selection.SampleRate)
	}
	return o.checkCallTTL()
}

// ttlMargin is the slack retention.call_ttl must leave beyond the longest a
// session can take to close and get its reward (a variable for tests).
var ttlMargin = 10 * time.Minute

// checkCallTTL refuses a retention.call_ttl that could expire calls of a
// session before it is built: the TTL must exceed session.idle_timeout +
// reward.deadline + 10m, and both must be set (0 lets a session live
// forever). Sessions older than call_ttl - (idle_timeout + deadline + 10m)
// are closed at their next call, which starts a continuation (doc.go).
func (o *Options) checkCallTTL() error {
	ttl := o.Retention.CallTTL
	if ttl < 0 {
		return fmt.Errorf("retention.call_ttl %v: want >= 0 (0 keeps calls)", ttl)
	}
	if ttl == 0 {
		return nil
	}
	if o.Session.IdleTimeout <= 0 || o.Reward.Deadline <= 0 {
		return fmt.Errorf("retention.call_ttl %v needs session.idle_timeout (%v) and reward.deadline (%v) set: "+
			"with either at 0 a session can outlive its calls", ttl, o.Session.IdleTimeout, o.Reward.Deadline)
	}
	if min := o.Session.IdleTimeout + o.Reward.Deadline + ttlMargin; ttl <= min {
		return fmt.Errorf("retention.call_ttl %v must exceed session.idle_timeout (%v) + reward.deadline (%v) + %v = %v, "+
			"or calls expire before their session is built", ttl, o.Session.IdleTimeout, o.Reward.Deadline, ttlMargin, min)
	}
	return nil
}
