package proxy

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
)

// engine is one upstream of the pool.
type engine struct {
	url         string // base URL without trailing slash
	host        string
	kind        string
	hc          *fasthttp.HostClient
	healthy     atomic.Bool
	outstanding atomic.Int64
	fails       atomic.Int32 // consecutive 5xx answers
	models      atomic.Pointer[[]string]
	base        atomic.Pointer[string] // the base models it lists, with their max_model_len
}

func (e *engine) serves(model string) bool {
	if m := e.models.Load(); m != nil {
		for _, id := range *m {
			if id == model {
				return true
			}
		}
	}
	return false
}

// pool picks engines: session affinity (rendezvous hashing over the healthy
// engines serving the model) when the call has a session, least outstanding
// requests otherwise. Active health checks bring engines back; connect errors
// and repeated 5xx take them out.
type pool struct {
	engines []*engine
	opts    *Options
	log     *slog.Logger
	rr      atomic.Uint64
	onState func(e *engine, up bool)
	// onBase is called when a healthy engine's base models (not its
	// adapters) change between two health checks: it was replaced without
	// going down.
	onBase  func(e *engine)
	onPanic func() // a call goes to an unhealthy engine: no healthy one is left
}

func newPool(o *Options, log *slog.Logger) (*pool, error) {
	p := &pool{opts: o, log: log}
	for _, eo := range o.Upstream.Engines {
		u, err := url.Parse(eo.URL)
		if err != nil {
			return nil, err
		}
		e := &engine{url: strings.TrimSuffix(eo.URL, "/"), host: u.Host, kind: eo.Kind}
		e.hc = newHostClient(u.Host, u.Scheme == "https", eo, &o.Upstream.Timeouts)
		e.healthy.Store(true)
		p.engines = append(p.engines, e)
	}
	return p, nil
}

// pick returns the engine for a call, or nil when every engine was tried.
// When no healthy engine is left it tries the unhealthy ones (panic mode, as
// Envoy's panic threshold does): a health check that fails, or an engine
// that flapped, must not turn into 503s for calls the engine would answer.
func (p *pool) pick(model, session string, exclude []*engine) *engine {
	cands := p.candidates(model, exclude, true)
	if len(cands) == 0 {
		if cands = p.candidates(model, exclude, false); len(cands) > 0 && p.onPanic != nil {
			p.onPanic()
		}
	}
	switch {
	case len(cands) == 0:
		return nil
	case len(cands) == 1:
		return cands[0]
	case session != "":
		return rendezvous(cands, session)
	}
	start := int(p.rr.Add(1) % uint64(len(cands)))
	best := cands[start]
	for i := 1; i < len(cands); i++ {
		if e := cands[(start+i)%len(cands)]; e.outstanding.Load() < best.outstanding.Load() {
			best = e
		}
	}
	return best
}

// candidates are the engines not yet tried (healthy ones only, when asked)
// that list model, or all of them when none lists it (an unknown model, or
// lists not fetched yet).
func (p *pool) candidates(model string, exclude []*engine, healthy bool) []*engine {
	var cands, all []*engine
	for _, e := range p.engines {
		if (healthy && !e.healthy.Load()) || contains(exclude, e) {
			continue
		}
		all = append(all, e)
		if e.serves(model) {
			cands = append(cands, e)
		}
	}
	if len(cands) == 0 {
		return all
	}
	return cands
}

func rendezvous(cands []*engine, key string) *engine {
	var best *engine
	var bestScore uint64
	for _, e := range cands {
		h := fnv.New64a()
		h.Write([]byte(key))
		h.Write([]byte(e.url))
		if s := h.Sum64(); best == nil || s > bestScore {
			best, bestScore = e, s
		}
	}
	return best
}

func contains(list []*engine, e *engine) bool {
	for _, x := range list {
		if x == e {
			return true
		}
	}
	return false
}

// passive records the outcome of a call for passive health checking.
func (p *pool) passive(e *engine, status int, err error) {
	switch {
	case err != nil && isDialError(err):
		p.setHealthy(e, false, "connect error: "+err.Error())
	case status >= 500:
		if int(e.fails.Add(1)) >= p.opts.Upstream.Health.FailAfter {
			p.setHealthy(e, false, "repeated 5xx")
		}
	case err == nil:
		e.fails.Store(0)
	}
}

func (p *pool) setHealthy(e *engine, up bool, why string) {
	if e.healthy.Swap(up) != up {
		p.log.Warn("engine health changed", "engine", e.url, "healthy", up, "reason", why)
		if p.onState != nil {
			p.onState(e, up)
		}
	}
	if up {
		e.fails.Store(0)
	}
}

// checkAll runs one active health check of every engine, concurrently.
func (p *pool) checkAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, e := range p.engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.check(ctx, e)
		}()
	}
	wg.Wait()
}

func (p *pool) check(ctx context.Context, e *engine) {
	status, _, err := p.get(ctx, e, "/health")
	if err != nil || status != 200 {
		why := "GET /health: "
		if err != nil {
			why += err.Error()
		} else {
			why += fasthttp.StatusMessage(status)
		}
		p.setHealthy(e, false, why)
		return
	}
	changed := false
	if status, body, err := p.get(ctx, e, "/v1/models"); err == nil && status == 200 {
		var ids []string
		var base strings.Builder
		gjson.GetBytes(body, "data").ForEach(func(_, m gjson.Result) bool {
			ids = append(ids, m.Get("id").String())
			if pa := m.Get("parent"); !pa.Exists() || pa.Type == gjson.Null {
				fmt.Fprintf(&base, "%s:%d\n", m.Get("id").String(), m.Get("max_model_len").Int())
			}
			return true
		})
		e.models.Store(&ids)
		b := base.String()
		prev := e.base.Swap(&b)
		changed = prev != nil && *prev != b
	}
	up := e.healthy.Load()
	p.setHealthy(e, true, "health check passed")
	if changed && up && p.onBase != nil {
		p.log.Warn("engine base models changed", "engine", e.url)
		p.onBase(e) // an engine that was down is probed by onState
	}
}

// get fetches a small control resource of an engine (not through the
// streaming client, so its own timeout applies).
func (p *pool) get(ctx context.Context, e *engine, path string) (int, []byte, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(e.url + path)
	if p.opts.Upstream.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+p.opts.Upstream.APIKey)
	}
	deadline := time.Now().Add(p.opts.Upstream.Health.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := controlClient.DoDeadline(req, resp, deadline); err != nil {
		return 0, nil, err
	}
	return resp.StatusCode(), append([]byte(nil), resp.Body()...), nil
}

// maxControlBody bounds an engine's answer to a control request (health,
// /v1/models, /tokenize): 64 MiB holds a model list of thousands of adapters
// and the token ids of any context window, and keeps a broken engine from
// making hone read without end.
const maxControlBody = 64 << 20

// controlClient serves health checks, model listing and /tokenize.
var controlClient = &fasthttp.Client{NoDefaultUserAgentHeader: true, MaxIdleConnDuration: 4 * time.Second,
	MaxResponseBodySize: maxControlBody}

// run checks every engine each interval until ctx ends.
func (p *pool) run(ctx context.Context) {
	t := time.NewTicker(p.opts.Upstream.Health.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.checkAll(ctx)
		}
	}
}

func (p *pool) anyHealthy() bool {
	for _, e := range p.engines {
		if e.healthy.Load() {
			return true
		}
	}
	return false
}
