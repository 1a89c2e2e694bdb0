package publish

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hone-rl/hone/rollout"
)

// Aliases is the proxy's policy alias table, as the publisher needs it.
// The proxy implements it; Swap must be atomic for requests in flight.
type Aliases interface {
	// Get returns what alias routes to now and the live policy version.
	Get(alias string) (target string, version int64, ok bool)
	// Swap makes alias route to target, serving policy version.
	Swap(alias, target string, version int64)
	// InFlight counts the calls of alias still running on version.
	InFlight(alias string, version int64) int
}

// Rollouts runs guarded rollouts (*rollout.Manager): with it a published
// version becomes a candidate serving a share of sessions, and the alias
// moves only when the rollout promotes it (Decided).
type Rollouts interface {
	Begin(alias string, inc, cand rollout.Version) error
	Running(alias string) (rollout.Rollout, bool)
}

// Published records one version the publisher made live.
type Published struct {
	Alias   string    `json:"alias"`
	Version int64     `json:"version"`
	Target  string    `json:"target"` // adapter name on the engines (or base model name)
	Path    string    `json:"path"`
	At      time.Time `json:"at"`
}

// Publisher hot-swaps policy versions into a set of engines.
type Publisher struct {
	Engines []Engine
	Aliases Aliases
	// Rollouts, when set, makes each published adapter a candidate of a
	// guarded rollout instead of swapping it in for everyone.
	Rollouts Rollouts
	HTTP     *http.Client // nil: a client with a 60 s timeout
	// DrainTimeout bounds the wait for the old version's calls to finish
	// before it is unloaded anyway (0: 2 minutes).
	DrainTimeout time.Duration
	// PollInterval is how often InFlight is checked while draining (0: 50 ms).
	PollInterval time.Duration
	Log          *slog.Logger

	mu      sync.Mutex
	pending map[string]Published // per alias: the newest version waiting for a running rollout to decide
	history map[string][]Published
	loaded  map[string]bool // adapter names this publisher loaded
	retire  sync.WaitGroup
}

func (p *Publisher) clients() []client {
	hc := p.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	cs := make([]client, len(p.Engines))
	for i, e := range p.Engines {
		cs[i] = client{http: hc, eng: e}
	}
	return cs
}

func (p *Publisher) log() *slog.Logger {
	if p.Log != nil {
		return p.Log
	}
	return slog.Default()
}

// AdapterName is the name a version of alias is loaded under.
func AdapterName(alias string, version int64) string {
	return fmt.Sprintf("%s-v%d", alias, version)
}

// PublishAdapter makes the PEFT adapter in dir the live version of alias:
// load on every engine, verify each lists it, swap the alias, then unload
// the previous adapter in the background once its calls have drained. If
// any engine fails, the adapter is unloaded where it was loaded and the
// alias is left untouched.
func (p *Publisher) PublishAdapter(ctx context.Context, alias string, version int64, dir string) error {
	if len(p.Engines) == 0 {
		return fmt.Errorf("publish %s v%d: no engines", alias, version)
	}
	if _, cur, ok := p.Aliases.Get(alias); ok && version <= cur {
		return fmt.Errorf("publish %s v%d: live version is already %d", alias, version, cur)
	}
	if p.Rollouts != nil {
		if r, running := p.Rollouts.Running(alias); running {
			// one candidate at a time: the newest version waits for this decision
			p.mu.Lock()
			if p.pending == nil {
				p.pending = map[string]Published{}
			}
			p.pending[alias] = Published{Alias: alias, Version: version, Path: dir, At: time.Now()}
			p.mu.Unlock()
			p.log().Info("version waits for the running rollout", "alias", alias, "version", version,
				"candidate", r.Candidate.Version)
			return nil
		}
	}
	name := AdapterName(alias, version)
	cs := p.clients()
	for i, c := range cs {
		err := c.loadLoRA(ctx, name, dir)
		if err == nil {
			err = c.verify(ctx, name)
		}
		if err != nil {
			p.rollback(cs[:i+1], name)
			return fmt.Errorf("publish %s v%d on %s (rolled back): %w", alias, version, c.eng.URL, err)
		}
	}
	prev, prevVersion, hadPrev := p.Aliases.Get(alias)
	if p.Rollouts != nil && hadPrev {
		return p.beginRollout(alias, rollout.Version{Version: prevVersion, Target: prev},
			rollout.Version{Version: version, Target: name}, dir, cs)
	}
	p.Aliases.Swap(alias, name, version)
	if target, v, _ := p.Aliases.Get(alias); target != name || v != version {
		p.rollback(cs, name)
		return fmt.Errorf("publish %s v%d: the alias did not move (routes to %s v%d); rolled back", alias, version, target, v)
	}
	p.record(Published{Alias: alias, Version: version, Target: name, Path: dir, At: time.Now()}, name)
	if hadPrev && p.ownsAdapter(alias, prev) {
		p.retire.Add(1)
		go p.retireAdapter(alias, prev, prevVersion)
	}
	return nil
}

// beginRollout makes the loaded adapter cand the candidate of alias's
// rollout against the live inc. A candidate still in rollout is replaced:
// it is unloaded once its sessions' calls have drained.
func (p *Publisher) beginRollout(alias string, inc, cand rollout.Version, dir string, cs []client) error {
	old, running := p.Rollouts.Running(alias)
	if err := p.Rollouts.Begin(alias, inc, cand); err != nil {
		p.rollback(cs, cand.Target)
		return fmt.Errorf("publish %s v%d: begin rollout (rolled back): %w", alias, cand.Version, err)
	}
	p.record(Published{Alias: alias, Version: cand.Version, Target: cand.Target, Path: dir, At: time.Now()}, cand.Target)
	if running && p.ownsAdapter(alias, old.Candidate.Target) {
		p.retire.Add(1)
		go p.retireAdapter(alias, old.Candidate.Target, old.Candidate.Version)
	}
	p.log().Info("published as a rollout candidate", "alias", alias, "version", cand.Version, "incumbent", inc.Version)
	return nil
}

// Decided retires what a rollout's decision leaves unused (register it
// with the manager's OnDecision, after the proxy's, which swaps the alias
// on a promotion): the incumbent after a promotion, the candidate after a
// rollback, each unloaded once its calls drained.
func (p *Publisher) Decided(r rollout.Rollout) {
	retire := r.Candidate
	if r.Decision == rollout.Promoted {
		retire = r.Incumbent
	}
	if p.ownsAdapter(r.Alias, retire.Target) {
		p.retire.Add(1)
		go p.retireAdapter(r.Alias, retire.Target, retire.Version)
	}
	p.mu.Lock()
	next, ok := p.pending[r.Alias]
	delete(p.pending, r.Alias)
	p.mu.Unlock()
	if !ok || r.Decision != rollout.Promoted {
		return // after a rollback the waiting version descends from the rolled-back one: dropped
	}
	p.retire.Add(1)
	go func() { // the next candidate, against the version just promoted
		defer p.retire.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := p.PublishAdapter(ctx, r.Alias, next.Version, next.Path); err != nil {
			p.log().Warn("publish the waiting version", "alias", r.Alias, "version", next.Version, "err", err)
		}
	}()
}

// rollback unloads name from the engines it may have reached. It uses its
// own context: the caller's may be the reason for the failure.
func (p *Publisher) rollback(cs []client, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range cs {
		if err := c.unloadLoRA(ctx, name); err != nil {
			p.log().Warn("rollback unload failed", "engine", c.eng.URL, "adapter", name, "err", err)
		}
	}
}

func (p *Publisher) record(pub Published, loadedName string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.history == nil {
		p.history, p.loaded = map[string][]Published{}, map[string]bool{}
	}
	p.history[pub.Alias] = append(p.history[pub.Alias], pub)
	if loadedName != "" {
		p.loaded[loadedName] = true
	}
}

// ownsAdapter reports whether name is an adapter hone's publisher loaded:
// this one, or one before a restart (it named it AdapterName(alias, v));
// the base model and adapters loaded by others are never unloaded.
func (p *Publisher) ownsAdapter(alias, name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.loaded[name] || isAdapterName(alias, name)
}

// isAdapterName reports whether name is AdapterName(alias, v) for some v.
func isAdapterName(alias, name string) bool {
	v, ok := strings.CutPrefix(name, alias+"-v")
	if !ok || v == "" {
		return false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return err == nil && n >= 0 && strconv.FormatInt(n, 10) == v
}

// retireAdapter waits for the old version's calls to drain (bounded by
// DrainTimeout), then unloads it from every engine.
func (p *Publisher) retireAdapter(alias, name string, version int64) {
	defer p.retire.Done()
	timeout, poll := p.DrainTimeout, p.PollInterval
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	if poll <= 0 {
		poll = 50 * time.Millisecond
	}
	deadline := time.Now().Add(timeout)
	for p.Aliases.InFlight(alias, version) > 0 {
		if time.Now().After(deadline) {
			p.log().Warn("drain timeout: unloading with calls in flight", "alias", alias, "version", version,
				"in_flight", p.Aliases.InFlight(alias, version))
			break
		}
		time.Sleep(poll)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	for _, c := range p.clients() {
		errs = append(errs, c.unloadLoRA(ctx, name))
	}
	if err := errors.Join(errs...); err != nil {
		p.log().Warn("unload of retired adapter failed", "adapter", name, "err", err)
		return
	}
	p.mu.Lock()
	delete(p.loaded, name)
	p.mu.Unlock()
}

// Live returns the version alias serves now.
func (p *Publisher) Live(alias string) (int64, bool) {
	_, v, ok := p.Aliases.Get(alias)
	return v, ok
}

// Wait blocks until every background unload has finished.
func (p *Publisher) Wait() { p.retire.Wait() }

// History lists the versions published for alias, oldest first.
func (p *Publisher) History(alias string) []Published {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Published(nil), p.history[alias]...)
}

// PublishWeights makes full weights in dir live as version of alias,
// which keeps routing to target (the engines' base model name). SGLang
// engines load dir; vLLM engines reload their model path in place. Engines
// are updated in order; if one fails, SGLang engines already updated are
// pointed back at prevDir (when given) and the alias keeps its version.
func (p *Publisher) PublishWeights(ctx context.Context, alias, target string, version int64, dir, prevDir string) error {
	cs := p.clients()
	for i, c := range cs {
		if err := c.reloadWeights(ctx, dir); err != nil {
			p.restoreWeights(cs[:i], prevDir)
			return fmt.Errorf("publish weights %s v%d on %s: %w", alias, version, c.eng.URL, err)
		}
	}
	p.Aliases.Swap(alias, target, version)
	p.record(Published{Alias: alias, Version: version, Target: target, Path: dir, At: time.Now()}, "")
	return nil
}

func (p *Publisher) restoreWeights(cs []client, prevDir string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, c := range cs {
		if !c.eng.sglang() || prevDir == "" {
			p.log().Warn("cannot restore previous weights in place", "engine", c.eng.URL)
			continue
		}
		if err := c.reloadWeights(ctx, prevDir); err != nil {
			p.log().Warn("restore previous weights failed", "engine", c.eng.URL, "err", err)
		}
	}
}

// Sleep releases accelerator memory on every engine (co-location: the
// trainer takes the GPU for a step). Engines already asleep are woken on
// failure so none is left half-way.
func (p *Publisher) Sleep(ctx context.Context) error {
	cs := p.clients()
	for i, c := range cs {
		if err := c.sleep(ctx); err != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			_ = p.wakeAll(ctx, cs[:i])
			return fmt.Errorf("sleep engine %s: %w", c.eng.URL, err)
		}
	}
	return nil
}

// Wake resumes every engine after Sleep.
func (p *Publisher) Wake(ctx context.Context) error { return p.wakeAll(ctx, p.clients()) }

func (p *Publisher) wakeAll(ctx context.Context, cs []client) error {
	var errs []error
	for _, c := range cs {
		if err := c.wake(ctx); err != nil {
			errs = append(errs, fmt.Errorf("wake engine %s: %w", c.eng.URL, err))
		}
	}
	return errors.Join(errs...)
}
