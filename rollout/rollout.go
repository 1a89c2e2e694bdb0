package rollout

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	lru "github.com/hashicorp/golang-lru/v2"
)

// Version is one policy version of an alias and the engine-side name that
// serves it.
type Version struct {
	Version int64  `json:"version"`
	Target  string `json:"target"`
}

// Arms of a rollout.
const (
	Incumbent = 0
	Candidate = 1
)

// Decisions.
const (
	Running    = ""
	Promoted   = "promoted"
	RolledBack = "rolled_back"
)

// Rollout is the state of one alias's rollout: what a restart resumes and
// what /admin/policies shows.
type Rollout struct {
	Alias     string    `json:"alias"`
	Incumbent Version   `json:"incumbent"`
	Candidate Version   `json:"candidate"`
	Step      int       `json:"step"`  // index into Options.Steps
	Share     float64   `json:"share"` // of new sessions served by the candidate
	Pinned    bool      `json:"pinned"`
	Started   time.Time `json:"started"`
	Arms      [2]Stats  `json:"arms"` // incumbent, candidate
	// Looks taken at the evidence; the next one when the candidate has
	// NextLook rewarded sessions.
	Looks    int `json:"looks"`
	NextLook int `json:"next_look"`
	// The last look's one-sided interval of candidate - incumbent mean
	// session reward, each bound at level alpha/max_looks.
	Diff     float64   `json:"diff"`
	Lower    float64   `json:"lower"`
	Upper    float64   `json:"upper"`
	Decision string    `json:"decision,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Decided  time.Time `json:"decided,omitzero"`
	// Held are sessions that began on the incumbent while their hash fell
	// in the band a later step gave the candidate: they stay on the
	// incumbent, so no trajectory mixes versions.
	Held map[string]bool `json:"held,omitempty"`
}

// Store persists rollouts (capture.Store in hone serve).
type Store interface {
	PutMeta(key string, value []byte) error
	MetaPrefix(prefix string) (map[string][]byte, error)
}

const metaPrefix = "rollout/"

// maxSeen bounds the sessions a rollout remembers for stickiness.
const maxSeen = 1 << 17

// Manager runs the rollouts of every alias. Safe for concurrent use.
type Manager struct {
	opts  Options
	store Store
	log   *slog.Logger
	now   func() time.Time

	mu     sync.RWMutex                        // Route, on every aliased call, only reads (seen is safe for concurrent use)
	dirty  map[string]bool                     // aliases whose evidence changed since they were saved
	cur    map[string]*Rollout                 // by alias: running, or the last one decided
	seen   map[string]*lru.Cache[string, bool] // by alias: sessions routed in this rollout → served by the candidate
	decide []func(Rollout)
	seq    uint64 // snapshots taken

	wmu     sync.Mutex        // serialises writes to the store
	written map[string]uint64 // the newest snapshot written per key
}

// New returns a manager resuming the rollouts saved in store (nil: none
// are saved).
func New(opts Options, store Store, log *slog.Logger) (*Manager, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	m := &Manager{opts: opts, store: store, log: log.With("component", "rollout"), now: time.Now,
		cur: map[string]*Rollout{}, seen: map[string]*lru.Cache[string, bool]{}, dirty: map[string]bool{},
		written: map[string]uint64{}}
	if store == nil {
		return m, nil
	}
	saved, err := store.MetaPrefix(metaPrefix)
	if err != nil {
		return nil, fmt.Errorf("load rollouts: %w", err)
	}
	for k, b := range saved {
		var r Rollout
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("load rollout %s: %w", k, err)
		}
		m.cur[r.Alias] = &r
		m.seen[r.Alias], _ = lru.New[string, bool](maxSeen)
	}
	return m, nil
}

// Options returns the manager's options.
func (m *Manager) Options() Options { return m.opts }

// OnDecision registers fn, called (outside the lock) with the rollout
// after each promotion or rollback, automatic or by hand: the publisher
// swaps the alias or unloads the candidate, the trainer goes back to the
// incumbent's weights on a rollback.
func (m *Manager) OnDecision(fn func(Rollout)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.decide = append(m.decide, fn)
}

// Begin starts a rollout of cand against inc for alias. A candidate still
// in rollout is replaced (its sessions finish on it; the new candidate
// starts over at the first step).
func (m *Manager) Begin(alias string, inc, cand Version) error {
	m.mu.Lock()
	r := &Rollout{Alias: alias, Incumbent: inc, Candidate: cand, Share: m.opts.Steps[0], Started: m.now(),
		NextLook: m.opts.MinSessions}
	m.cur[alias] = r
	m.seen[alias], _ = lru.New[string, bool](maxSeen)
	m.log.Info("rollout begins", "alias", alias, "incumbent", inc.Version, "candidate", cand.Version, "share", r.Share)
	snap := m.snap(r)
	m.mu.Unlock()
	return m.write(snap)
}

// Running returns alias's running rollout.
func (m *Manager) Running(alias string) (Rollout, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.cur[alias]
	if !ok || r.Decision != Running {
		return Rollout{}, false
	}
	return copyRollout(r), true
}

// CandidateOf returns the alias and version whose running rollout's
// candidate is target (an adapter agents may name directly).
func (m *Manager) CandidateOf(target string) (alias string, v Version, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for a, r := range m.cur {
		if r.Decision == Running && r.Candidate.Target == target {
			return a, r.Candidate, true
		}
	}
	return "", Version{}, false
}

// List returns every alias's running or last decided rollout.
func (m *Manager) List() []Rollout {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Rollout, 0, len(m.cur))
	for _, r := range m.cur {
		out = append(out, copyRollout(r))
	}
	slices.SortFunc(out, func(a, b Rollout) int { return compare(a.Alias, b.Alias) })
	return out
}

// Route returns the version that serves session under alias's running
// rollout (ok false: no rollout; the alias's live version serves). A
// session keeps the version of its first call: a new one goes to the
// candidate when its hash falls below the current share.
func (m *Manager) Route(alias, session string) (Version, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	r, ok := m.cur[alias]
	if !ok || r.Decision != Running {
		return Version{}, false
	}
	seen := m.seen[alias]
	cand, known := seen.Get(session)
	if !known {
		cand = !r.Held[session] && unit(session) < r.Share
		seen.Add(session, cand)
	}
	if cand {
		return r.Candidate, true
	}
	return r.Incumbent, true
}

// unit maps a session id to [0, 1).
func unit(session string) float64 {
	return float64(xxhash.Sum64String(session)>>11) / (1 << 53)
}

// Call is what a finished call tells the guards.
type Call struct {
	Failed           bool // an engine error or an invalid answer
	Latency          time.Duration
	CompletionTokens int
	ToolCalls        int // tool calls the answer made
	BadToolCalls     int // of them, with arguments that are not a JSON object
}

// ObserveCall counts a call served by version under alias's rollout for
// the guards (errors, then latency, length and tool calls of successful
// calls).
func (m *Manager) ObserveCall(alias string, version int64, c Call) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, arm := m.arm(alias, version)
	if r == nil {
		return
	}
	a := &r.Arms[arm]
	a.Calls++
	if c.Failed {
		a.Errors++
		return
	}
	a.Latency.add(c.Latency.Seconds())
	a.Length.add(float64(c.CompletionTokens))
	if c.ToolCalls > 0 {
		a.ToolCalls++
		if c.BadToolCalls > 0 {
			a.BadToolCalls++
		}
	}
}

// ObserveSession counts a rewarded session of alias whose calls were served
// by versions; a session served by more than one version (it began before
// a decision) is not counted. It may decide the rollout.
func (m *Manager) ObserveSession(alias string, reward float64, versions []int64) {
	if len(versions) == 0 || math.IsNaN(reward) || math.IsInf(reward, 0) {
		return
	}
	for _, v := range versions[1:] {
		if v != versions[0] {
			return
		}
	}
	m.mu.Lock()
	r, arm := m.arm(alias, versions[0])
	if r == nil {
		m.mu.Unlock()
		return
	}
	r.Arms[arm].add(reward)
	step := r.Step
	decided := m.evaluate(r)
	var snap []snapshot
	if decided || r.Step != step { // decisions and steps are saved at once, evidence by Tick
		snap = m.snap(r)
	} else {
		m.dirty[alias] = true
	}
	fns := m.decide
	m.mu.Unlock()
	if err := m.write(snap); err != nil {
		m.log.Error("save rollout", "alias", alias, "err", err)
	}
	if decided {
		m.notify(fns, r)
	}
}

// arm finds alias's running rollout and the arm version belongs to.
func (m *Manager) arm(alias string, version int64) (*Rollout, int) {
	r, ok := m.cur[alias]
	if !ok || r.Decision != Running {
		return nil, 0
	}
	switch version {
	case r.Candidate.Version:
		return r, Candidate
	case r.Incumbent.Version:
		return r, Incumbent
	}
	return nil, 0
}

// evaluate takes a look when one is due and applies its decision: the
// error guard, then Welch's one-sided interval of the mean session reward
// difference at alpha/max_looks. Reports whether the rollout was decided.
func (m *Manager) evaluate(r *Rollout) bool {
	c, i := r.Arms[Candidate], r.Arms[Incumbent]
	if r.Pinned || c.N < r.NextLook || i.N < m.opts.MinSessions {
		return false
	}
	o := m.opts
	level := o.Alpha / float64(o.MaxLooks)
	r.Looks++
	r.NextLook = c.N + o.MinSessions
	r.Diff, r.Lower, r.Upper = interval(c, i, level)
	if reason := guardFailed(c, i, o, level); reason != "" {
		m.finish(r, RolledBack, reason)
		return true
	}
	switch {
	case r.Upper < 0:
		m.finish(r, RolledBack, fmt.Sprintf("worse: mean session reward %.4g against %.4g, difference at most %.4g "+
			"(%d and %d sessions, level %.4g)", c.Mean, i.Mean, r.Upper, c.N, i.N, level))
	case r.Lower > -o.Margin && r.Step == len(o.Steps)-1:
		m.finish(r, Promoted, fmt.Sprintf("not worse at the last step: difference at least %.4g > -margin %g "+
			"(%d and %d sessions, level %.4g)", r.Lower, o.Margin, c.N, i.N, level))
	case r.Lower > -o.Margin:
		m.stepUp(r)
		return false
	case r.Looks >= o.MaxLooks:
		m.finish(r, RolledBack, fmt.Sprintf("undecided after %d looks: difference in [%.4g, %.4g]", r.Looks, r.Lower, r.Upper))
	default:
		return false
	}
	return true
}

// guardFailed names the first guard metric on which the candidate is
// significantly worse than allowed ("" when none).
func guardFailed(c, i Stats, o Options, level float64) string {
	switch {
	case errorsWorse(c, i, o.ErrorMargin, level):
		return fmt.Sprintf("call error rate %.3f against %.3f (error_margin %g)", c.errorRate(), i.errorRate(), o.ErrorMargin)
	case toolCallsWorse(c, i, o.ToolCallMargin, level):
		return fmt.Sprintf("bad tool calls %.3f of its tool-calling calls against %.3f (tool_call_margin %g)",
			c.badToolRate(), i.badToolRate(), o.ToolCallMargin)
	case ratioWorse(c.Latency, i.Latency, o.LatencyRatio, level):
		return fmt.Sprintf("mean call latency %.3gs against %.3gs (latency_ratio %g)", c.Latency.Mean, i.Latency.Mean, o.LatencyRatio)
	case ratioWorse(c.Length, i.Length, o.LengthRatio, level):
		return fmt.Sprintf("mean completion length %.1f tokens against %.1f (length_ratio %g)", c.Length.Mean, i.Length.Mean, o.LengthRatio)
	}
	return ""
}

// stepUp gives the candidate the next share. Sessions already on the
// incumbent whose hash the new share covers are held there.
func (m *Manager) stepUp(r *Rollout) {
	r.Step++
	next := m.opts.Steps[r.Step]
	seen := m.seen[r.Alias]
	for _, s := range seen.Keys() {
		if cand, _ := seen.Peek(s); !cand && unit(s) < next {
			if r.Held == nil {
				r.Held = map[string]bool{}
			}
			r.Held[s] = true
		}
	}
	m.log.Info("rollout step", "alias", r.Alias, "candidate", r.Candidate.Version, "share", next,
		"diff", r.Diff, "lower", r.Lower, "sessions", r.Arms[Candidate].N)
	r.Share = next
}

// finish records a decision.
func (m *Manager) finish(r *Rollout, decision, reason string) {
	r.Decision, r.Reason, r.Decided, r.Held = decision, reason, m.now(), nil
	m.seen[r.Alias], _ = lru.New[string, bool](1)
	m.log.Info("rollout decided", "alias", r.Alias, "candidate", r.Candidate.Version, "decision", decision, "reason", reason)
}

func (m *Manager) notify(fns []func(Rollout), r *Rollout) {
	m.mu.Lock()
	c := copyRollout(r)
	m.mu.Unlock()
	for _, fn := range fns {
		fn(c)
	}
}

// Tick saves the evidence gathered since the last save and rolls back the
// rollouts running longer than max_wait; hone serve calls it every few
// seconds (a crash loses at most that much evidence, never a decision).
func (m *Manager) Tick() {
	m.mu.Lock()
	var done []*Rollout
	var snap []snapshot
	for alias := range m.dirty {
		if r := m.cur[alias]; r != nil {
			snap = append(snap, m.snap(r)...)
		}
		delete(m.dirty, alias)
	}
	for _, r := range m.cur {
		if r.Decision == Running && !r.Pinned && m.now().Sub(r.Started) > m.opts.MaxWait {
			m.finish(r, RolledBack, fmt.Sprintf("undecided after max_wait %s (%d and %d sessions)", m.opts.MaxWait,
				r.Arms[Candidate].N, r.Arms[Incumbent].N))
			snap = append(snap, m.snap(r)...)
			done = append(done, r)
		}
	}
	fns := m.decide
	m.mu.Unlock()
	if err := m.write(snap); err != nil {
		m.log.Error("save rollouts", "err", err)
	}
	for _, r := range done {
		m.notify(fns, r)
	}
}

// ErrNoRollout is returned for an alias without a running rollout.
var ErrNoRollout = errors.New("no rollout running")

// Set applies an operator's action: promote, rollback, pin (freeze the
// share, at share when > 0; no automatic decision) or unpin.
func (m *Manager) Set(alias, action string, share float64) (Rollout, error) {
	m.mu.Lock()
	r, ok := m.cur[alias]
	if !ok || r.Decision != Running {
		m.mu.Unlock()
		return Rollout{}, fmt.Errorf("alias %s: %w", alias, ErrNoRollout)
	}
	decided := false
	switch action {
	case "promote":
		m.finish(r, Promoted, "promoted by hand")
		decided = true
	case "rollback":
		m.finish(r, RolledBack, "rolled back by hand")
		decided = true
	case "pin":
		if share < 0 || share > 1 {
			m.mu.Unlock()
			return Rollout{}, fmt.Errorf("share %g: want 0..1", share)
		}
		r.Pinned = true
		if share > 0 {
			r.Share = share
		}
	case "unpin":
		r.Pinned = false
	default:
		m.mu.Unlock()
		return Rollout{}, fmt.Errorf("action %q: want promote, rollback, pin or unpin", action)
	}
	snap := m.snap(r)
	fns := m.decide
	c := copyRollout(r)
	m.mu.Unlock()
	if err := m.write(snap); err != nil {
		return c, fmt.Errorf("save rollout: %w", err)
	}
	if decided {
		m.notify(fns, r)
	}
	return c, nil
}

// snapshot is a rollout's saved form, taken under the lock and written
// outside it: Route, on every call's path, never waits for the disk.
type snapshot struct {
	key string
	seq uint64 // a newer snapshot of the same key is never overwritten by an older one
	b   []byte
}

func (m *Manager) snap(r *Rollout) []snapshot {
	if m.store == nil {
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		m.log.Error("encode rollout", "alias", r.Alias, "err", err)
		return nil
	}
	m.seq++
	return []snapshot{{metaPrefix + r.Alias, m.seq, b}}
}

func (m *Manager) write(snaps []snapshot) error {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	var errs []error
	for _, s := range snaps {
		if s.seq < m.written[s.key] {
			continue
		}
		if err := m.store.PutMeta(s.key, s.b); err != nil {
			errs = append(errs, err)
			continue
		}
		m.written[s.key] = s.seq
	}
	return errors.Join(errs...)
}

func copyRollout(r *Rollout) Rollout {
	c := *r
	if r.Held != nil {
		c.Held = make(map[string]bool, len(r.Held))
		for k, v := range r.Held {
			c.Held[k] = v
		}
	}
	return c
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
