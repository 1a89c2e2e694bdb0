package proxy

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Options configure the proxy. The yaml tags are the keys of the `proxy:`
// section of hone's config file; DefaultOptions documents the defaults.
type Options struct {
	Listen        string `yaml:"listen"`         // data plane address
	ControlListen string `yaml:"control_listen"` // control plane address
	// ControlToken is the bearer token of the control plane (everything but
	// /healthz and /readyz). Required when ControlListen is not loopback.
	ControlToken string `yaml:"control_token"`
	// ClientKeys, when set, are the API keys agents must present as
	// "Authorization: Bearer KEY" (or X-Api-Key / Api-Key); empty means no
	// check.
	ClientKeys []string `yaml:"client_keys"`
	// AgentsTrustEachOther lets the data plane listen beyond loopback
	// without client keys. Without keys hone cannot tell agents apart, so
	// any agent that reaches it may reward, commit and extend any session:
	// hone refuses to start that way unless this says it is intended.
	AgentsTrustEachOther bool `yaml:"agents_trust_each_other"`
	// CORSOrigins are the origins of web pages that may call the data plane
	// from a browser (exact, such as http://localhost:3000, or * for any):
	// they get CORS headers and preflight answers, and pass the cross-site
	// check of a data plane without client keys (cors.go). Empty: none.
	CORSOrigins []string `yaml:"cors_origins"`
	// InferenceRoutes are the engine routes forwarded as they are (not
	// captured) besides the APIs hone serves itself; every other path is
	// answered 404, so engine administration (adapters, sleep, weights,
	// caches, RPC, profiling) stays hone's (see routes.go).
	InferenceRoutes []string `yaml:"inference_routes"`
	// DataPlaneFeedback serves /feedback, /commit, /v1/feedback and
	// /v1/commit on the data plane too: off (default), keys or loopback (see
	// feedback.go).
	DataPlaneFeedback string `yaml:"data_plane_feedback"`
	// CacheSalt isolates the engines' prefix caches between client keys:
	// owner (default) sends each call with vLLM's cache_salt derived from
	// its key (and the agent's own cache_salt, if any), so one agent cannot
	// learn from the time to its first token whether another's prompt
	// shares a prefix with its own; off forwards the agent's cache_salt, if
	// any, unchanged. Without client keys nothing is salted.
	CacheSalt string `yaml:"cache_salt"`
	// StrictHeaders answers 400 to an invalid hone header; by default it is
	// ignored and reported in X-Hone-Warning.
	StrictHeaders bool `yaml:"strict_headers"`
	MaxBodyBytes  int  `yaml:"max_body_bytes"`
	// MaxHeaderBytes bounds the request head (request line and headers);
	// past it hone answers 431.
	MaxHeaderBytes int `yaml:"max_header_bytes"`
	// ReadTimeout bounds reading a request's head and body (slow clients,
	// slowloris); answers, streams included, are not bounded by it.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// IdleTimeout closes a keep-alive connection idle this long.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxConns bounds concurrent agent connections; past it new ones get 503.
	MaxConns int `yaml:"max_conns"`

	// Upstream configures the engines; it is the `engine:` section of
	// hone's config file.
	Upstream Upstream      `yaml:"-"`
	Headers  HeaderNames   `yaml:"headers"`
	Aliases  []AliasConfig `yaml:"aliases"`
	// Responses bounds the conversations kept for the Responses API's
	// previous_response_id.
	Responses ResponsesOptions `yaml:"responses"`
	// ShutdownGrace is how long in-flight calls may run after SIGTERM.
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
	// Continuity is capture.continuity: observe, or tokens (see
	// continuity.go); set by the config from the capture section.
	Continuity string `yaml:"-"`
}

// Upstream configures the engines hone proxies to.
type Upstream struct {
	Engines  []EngineOptions `yaml:"engines"`
	Timeouts Timeouts        `yaml:"timeouts"`
	Health   HealthOptions   `yaml:"health"`
	// TokenIDs is how prompt/completion token ids are obtained:
	// auto (ask for return_token_ids, fall back to logprob token strings and
	// /tokenize when the engine ignores it), native, tokenize, off.
	TokenIDs string `yaml:"token_ids"`
	// APIKey, when set, replaces the agent's Authorization towards engines.
	APIKey string `yaml:"api_key"`
	// Tokenizer is the model folder (tokenizer.json, tokenizer_config.json,
	// chat template) hone renders prompts with in continuity mode tokens;
	// empty: the --model folder.
	Tokenizer string `yaml:"tokenizer"`
}

// EngineOptions is one upstream engine.
type EngineOptions struct {
	URL string `yaml:"url"`
	// Kind is vllm, sglang or embedded; it selects the adapter-loading API.
	Kind string `yaml:"kind"`
	// MaxConns bounds the connections to this engine.
	MaxConns int `yaml:"max_conns"`
}

// Timeouts bound each upstream call. None of them is fasthttp's
// whole-response ReadTimeout, which would cut long streams.
type Timeouts struct {
	Connect   time.Duration `yaml:"connect"`    // TCP connect
	FirstByte time.Duration `yaml:"first_byte"` // request sent → first response byte (a non-streamed generation is all first byte)
	Idle      time.Duration `yaml:"idle"`       // between two reads of a response (SSE events)
	Total     time.Duration `yaml:"total"`      // whole call
}

// HealthOptions configure active health checks.
type HealthOptions struct {
	Interval time.Duration `yaml:"interval"` // GET /health and /v1/models every Interval
	Timeout  time.Duration `yaml:"timeout"`
	// FailAfter is how many consecutive 5xx answers mark an engine down;
	// connect errors mark it down at once.
	FailAfter int `yaml:"fail_after"`
}

// HeaderNames are the names of hone's request and response headers, so
// existing headers of an agent can be reused.
type HeaderNames struct {
	Session string `yaml:"session"`
	Task    string `yaml:"task"`
	Train   string `yaml:"train"`
	Tags    string `yaml:"tags"`
	Reward  string `yaml:"reward"`
	Commit  string `yaml:"commit"`
	Call    string `yaml:"call"`
	Policy  string `yaml:"policy"`
}

// ResponsesOptions bound the Responses API conversations hone keeps.
type ResponsesOptions struct {
	Max int           `yaml:"max"` // conversations kept (least recently used go first)
	TTL time.Duration `yaml:"ttl"` // how long one is kept
}

// AliasConfig is an initial policy alias: agents ask for Name (or any of
// Names, which follow it when it is swapped), engines get Target.
type AliasConfig struct {
	Name    string   `yaml:"name"`
	Target  string   `yaml:"target"`
	Version int64    `yaml:"version"`
	Names   []string `yaml:"names"`
}

// DefaultOptions returns the defaults of every option.
func DefaultOptions() Options {
	return Options{
		Listen:         "127.0.0.1:8080", // the sidecar case; containers set 0.0.0.0:8080
		ControlListen:  "127.0.0.1:8081",
		MaxBodyBytes:   32 << 20,
		MaxHeaderBytes: 32 << 10, // nginx's default too (4 x 8 KiB); fasthttp holds one such buffer per connection
		ReadTimeout:    60 * time.Second,
		IdleTimeout:    2 * time.Minute,
		MaxConns:       10000,
		Upstream: Upstream{
			Timeouts: Timeouts{
				Connect:   5 * time.Second,
				FirstByte: 300 * time.Second,
				Idle:      60 * time.Second,
				Total:     900 * time.Second,
			},
			Health:   HealthOptions{Interval: 5 * time.Second, Timeout: 2 * time.Second, FailAfter: 3},
			TokenIDs: "auto",
		},
		ShutdownGrace:     30 * time.Second,
		DataPlaneFeedback: FeedbackOff,
		CacheSalt:         CacheSaltOwner,
		InferenceRoutes:   DefaultInferenceRoutes(),
		Responses:         ResponsesOptions{Max: 10000, TTL: time.Hour},
		Headers: HeaderNames{
			Session: "X-Hone-Session", Task: "X-Hone-Task", Train: "X-Hone-Train", Tags: "X-Hone-Tags",
			Reward: "X-Hone-Reward", Commit: "X-Hone-Commit", Call: "X-Hone-Call", Policy: "X-Hone-Policy",
		},
	}
}

// Validate checks the options and names the offending key.
func (o *Options) Validate() error {
	u := &o.Upstream
	switch o.Continuity {
	case "", ContinuityObserve, ContinuityTokens:
	default:
		return fmt.Errorf("capture.continuity: %q is not one of observe, tokens", o.Continuity)
	}
	switch u.TokenIDs {
	case "auto", "native", "tokenize", "off":
	default:
		return fmt.Errorf("engine.token_ids: %q is not one of auto, native, tokenize, off", u.TokenIDs)
	}
	for key, v := range map[string]int{"max_body_bytes": o.MaxBodyBytes, "max_header_bytes": o.MaxHeaderBytes,
		"max_conns": o.MaxConns} {
		if v <= 0 {
			return fmt.Errorf("proxy.%s: must be > 0, got %d", key, v)
		}
	}
	if o.MaxHeaderBytes < 4<<10 {
		return fmt.Errorf("proxy.max_header_bytes: %d is below 4096; agents' SDKs send a few KB of headers", o.MaxHeaderBytes)
	}
	for key, d := range map[string]time.Duration{"read_timeout": o.ReadTimeout, "idle_timeout": o.IdleTimeout} {
		if d <= 0 {
			return fmt.Errorf("proxy.%s: must be > 0, got %s", key, d)
		}
	}
	for i, e := range u.Engines {
		u, err := url.Parse(e.URL)
		if err == nil && u.User != nil {
			// the URL names the engine in metrics, logs, /readyz and
			// stored calls: a password in it would show everywhere
			return fmt.Errorf("engine.engines[%d].url: %s carries credentials (user:password@); "+
				"give the engine's key as engine.api_key instead", i, u.Scheme+"://"+u.Host)
		}
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			shown := strconv.Quote(e.URL)
			if strings.Contains(e.URL, "@") {
				shown = "(not shown: it may carry credentials)"
			}
			return fmt.Errorf("engine.engines[%d].url: %s is not an http(s) URL", i, shown)
		}
		switch e.Kind {
		case "", "vllm", "sglang", "embedded":
		default:
			return fmt.Errorf("engine.engines[%d].kind: %q is not one of vllm, sglang, embedded", i, e.Kind)
		}
	}
	for name, d := range map[string]time.Duration{"timeouts.connect": u.Timeouts.Connect,
		"timeouts.first_byte": u.Timeouts.FirstByte, "timeouts.idle": u.Timeouts.Idle, "timeouts.total": u.Timeouts.Total,
		"health.interval": u.Health.Interval, "health.timeout": u.Health.Timeout} {
		if d <= 0 {
			return fmt.Errorf("engine.%s: must be > 0, got %s", name, d)
		}
	}
	if o.Responses.Max <= 0 || o.Responses.TTL <= 0 {
		return fmt.Errorf("proxy.responses: max and ttl must be > 0, got %d and %s", o.Responses.Max, o.Responses.TTL)
	}
	for i, k := range o.ClientKeys {
		if k == "" || strings.TrimSpace(k) != k || strings.ContainsFunc(k, unicode.IsControl) {
			return fmt.Errorf("proxy.client_keys: entry %d is empty, or starts or ends with a space or holds a control "+
				"character: no agent could present it as sent, and an empty one would let in a request without a key", i)
		}
	}
	switch o.DataPlaneFeedback {
	case FeedbackOff, FeedbackLoopback:
	case FeedbackKeys:
		if len(o.ClientKeys) == 0 {
			return fmt.Errorf("proxy.data_plane_feedback: keys needs proxy.client_keys: without keys anyone " +
				"reaching the data plane could reward any session")
		}
	default:
		return fmt.Errorf("proxy.data_plane_feedback: %q is not one of off, keys, loopback", o.DataPlaneFeedback)
	}
	if o.CacheSalt != CacheSaltOwner && o.CacheSalt != CacheSaltOff {
		return fmt.Errorf("proxy.cache_salt: %q is not one of owner, off", o.CacheSalt)
	}
	if err := checkCORSOrigins(o.CORSOrigins); err != nil {
		return err
	}
	if err := checkInferenceRoutes(o.InferenceRoutes); err != nil {
		return err
	}
	if len(o.ClientKeys) == 0 && !o.AgentsTrustEachOther && !LoopbackAddr(o.Listen) {
		return fmt.Errorf("proxy.listen: %q is not a loopback address and proxy.client_keys is empty: any agent "+
			"that reaches it could reward, commit and extend every other agent's sessions; give each agent a key "+
			"(HONE_PROXY_CLIENT_KEYS), listen on 127.0.0.1, or set proxy.agents_trust_each_other: true "+
			"(HONE_PROXY_AGENTS_TRUST_EACH_OTHER=1) if every agent that can reach it may act on the others' sessions", o.Listen)
	}
	if o.ControlToken == "" && !LoopbackAddr(o.ControlListen) {
		return fmt.Errorf("proxy.control_listen: %q is not a loopback address and proxy.control_token is empty: "+
			"set a token (HONE_PROXY_CONTROL_TOKEN) or listen on 127.0.0.1", o.ControlListen)
	}
	return nil
}

// LoopbackAddr reports whether a listen address (host:port) is on loopback only.
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
