package proxy

import (
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
)

// Policy is what an agent-visible model name currently routes to.
type Policy struct {
	Alias   string `json:"alias"`   // the policy's name (trainer.name); in-flight counts are kept per alias
	Target  string `json:"target"`  // engine model or LoRA adapter name
	Version int64  `json:"version"` // policy version; 0 is the base model
}

// maxHistory bounds the versions an alias remembers for /admin/policies.
const maxHistory = 64

// Aliases is the policy alias table: agent-visible model name → Policy. A
// policy is swapped under its alias; other names may follow it (Link), so an
// agent that keeps the model name it always used (the engines' served name)
// gets the newest published version. Reads are lock-free (one atomic load
// per request); writers copy the table. It counts in-flight calls per
// (alias, version) so a publisher can unload an old version once nothing
// uses it.
type Aliases struct {
	mu       sync.Mutex // serializes writers
	table    atomic.Pointer[map[string]Policy]
	links    map[string][]string // alias → the other names that follow it
	history  map[string][]Policy
	trained  atomic.Pointer[map[string]Policy] // engine-side name of a trained version (agent-v3) → its policy
	inflight sync.Map                          // policyKey → *atomic.Int64
}

type policyKey struct {
	alias   string
	version int64
}

// NewAliases returns a table holding the given policies and their names.
func NewAliases(initial []AliasConfig) *Aliases {
	a := &Aliases{history: map[string][]Policy{}, links: map[string][]string{}}
	m, t := map[string]Policy{}, map[string]Policy{}
	a.table.Store(&m)
	a.trained.Store(&t)
	for _, c := range initial {
		a.Swap(c.Name, c.Target, c.Version)
		for _, n := range c.Names {
			a.Link(n, c.Name)
		}
	}
	return a
}

// Lookup returns the policy for a model name.
func (a *Aliases) Lookup(model string) (Policy, bool) {
	p, ok := (*a.table.Load())[model]
	return p, ok
}

// Get returns an alias's target and version.
func (a *Aliases) Get(alias string) (target string, version int64, ok bool) {
	p, ok := a.Lookup(alias)
	return p.Target, p.Version, ok
}

// Swap points alias, and every name that follows it, at target/version
// atomically. New calls see the new policy at once; calls already running
// keep the one they started with.
func (a *Aliases) Swap(alias, target string, version int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := Policy{Alias: alias, Target: target, Version: version}
	m := a.copyTable()
	m[alias] = p
	for _, n := range a.links[alias] {
		m[n] = p
	}
	h := append(a.history[alias], p)
	if len(h) > maxHistory {
		h = slices.Clone(h[len(h)-maxHistory:])
	}
	a.history[alias] = h
	a.table.Store(&m)
	a.storeTrained()
	a.forgetIdle(alias, version)
}

// storeTrained rebuilds the map of trained versions' engine-side names from
// the history; a.mu is held.
func (a *Aliases) storeTrained() {
	t := map[string]Policy{}
	aliases := slices.Sorted(maps.Keys(a.history)) // two aliases naming one adapter: the same one wins each time
	for _, alias := range aliases {
		for _, p := range a.history[alias] {
			if p.Version > 0 {
				t[p.Target] = p
			}
		}
	}
	a.trained.Store(&t)
}

// Link makes name follow alias: a call for name is served by alias's live
// policy from now on. Linking a name to itself or to an alias that has no
// policy yet is an error-free no-op until the alias is swapped in.
func (a *Aliases) Link(name, alias string) {
	if name == "" || name == alias {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for other, names := range a.links {
		a.links[other] = slices.DeleteFunc(names, func(n string) bool { return n == name })
	}
	a.links[alias] = append(a.links[alias], name)
	m := a.copyTable()
	if p, ok := m[alias]; ok {
		m[name] = p
		a.table.Store(&m)
	}
}

// Names returns the agent-visible names that route to alias: alias itself
// and the names that follow it.
func (a *Aliases) Names(alias string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string{alias}, a.links[alias]...)
}

func (a *Aliases) copyTable() map[string]Policy {
	old := *a.table.Load()
	m := make(map[string]Policy, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	return m
}

// forgetIdle drops the in-flight counters of alias's versions other than
// live that have nothing in flight, so the counters do not grow with every
// published version. A call that raced with the drop re-verifies in
// acquire and retries.
func (a *Aliases) forgetIdle(alias string, live int64) {
	a.inflight.Range(func(k, v any) bool {
		pk := k.(policyKey)
		if pk.alias == alias && pk.version != live && v.(*atomic.Int64).Load() == 0 {
			a.inflight.CompareAndDelete(k, v)
		}
		return true
	})
}

// List returns the live policies, one per alias, sorted by alias.
func (a *Aliases) List() []Policy {
	m := *a.table.Load()
	out := make([]Policy, 0, len(m))
	for name, p := range m {
		if name == p.Alias {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Alias < out[j].Alias })
	return out
}

// History returns the policies an alias has pointed at, oldest first (the
// last maxHistory).
func (a *Aliases) History(alias string) []Policy {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Policy(nil), a.history[alias]...)
}

// published returns the policy of the published version whose
// engine-side name (agent-v3) is name.
func (a *Aliases) published(name string) (Policy, bool) {
	p, ok := (*a.trained.Load())[name]
	return p, ok
}

// InFlight is the number of calls currently served by alias at version.
func (a *Aliases) InFlight(alias string, version int64) int {
	if c, ok := a.inflight.Load(policyKey{alias, version}); ok {
		return int(c.(*atomic.Int64).Load())
	}
	return 0
}

// hold counts a call against alias at version (a rollout's candidate,
// which the table does not point at) and returns its release.
func (a *Aliases) hold(alias string, version int64) func() {
	k := policyKey{alias, version}
	for {
		c, ok := a.inflight.Load(k)
		if !ok {
			c, _ = a.inflight.LoadOrStore(k, new(atomic.Int64))
		}
		n := c.(*atomic.Int64)
		n.Add(1)
		if cur, ok := a.inflight.Load(k); ok && cur == c { // not dropped by forgetIdle in between
			return func() { n.Add(-1) }
		}
		n.Add(-1)
	}
}

// acquire resolves model to its live policy and counts a call against it;
// the returned func releases it. The count is taken before the policy is
// read again and kept only if the policy is still live, so a publisher that
// swapped in between either sees the call in InFlight or the call moves to
// the new version: an adapter is never unloaded under a call about to use it.
func (a *Aliases) acquire(model string) (Policy, func(), bool) {
	for {
		p, ok := a.Lookup(model)
		if !ok {
			return Policy{}, nil, false
		}
		k := policyKey{p.Alias, p.Version}
		c, ok := a.inflight.Load(k)
		if !ok {
			c, _ = a.inflight.LoadOrStore(k, new(atomic.Int64))
		}
		n := c.(*atomic.Int64)
		n.Add(1)
		cur, ok := a.inflight.Load(k)
		if now, _ := a.Lookup(model); now == p && ok && cur == c {
			return p, func() { n.Add(-1) }, true
		}
		n.Add(-1)
	}
}
