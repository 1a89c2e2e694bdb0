package proxy

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hone-rl/hone/internal/jsonerr"
	"github.com/hone-rl/hone/rollout"
)

// ControlRoutes mounts more control-plane routes (capture, trainer) on the
// token-protected router.
type ControlRoutes func(r chi.Router)

// NewControl returns the control plane (chi on net/http): /healthz and
// /readyz open, everything else behind the bearer token when one is set:
// /metrics, /admin/policies and the mounted routes.
func NewControl(s *Server, token string, g prometheus.Gatherer, mounts ...ControlRoutes) http.Handler {
	r := chi.NewRouter()
	if token == "" { // a loopback listener (Options.Validate): browsers on the machine reach it
		r.Use(SameSiteOnly)
	}
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	r.Get("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if !s.Ready() {
			httpError(w, http.StatusServiceUnavailable, "no healthy engine")
			return
		}
		status := ""
		if validBearer(r, token) { // the engines' URLs and states are the operator's
			status = s.ContinuityStatus() // lines only in tokens mode
		}
		_, _ = w.Write([]byte("ready\n" + status))
	})
	r.Group(func(r chi.Router) {
		r.Use(bearer(token))
		// a family that fails to collect (NVML answering an error now and
		// then) is left out of that scrape, not the whole page
		r.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
		r.Get("/admin/policies", s.listPolicies)
		r.Put("/admin/policies", s.swapPolicy)
		r.Post("/admin/rollouts/{alias}", s.setRollout)
		for _, m := range mounts {
			m(r)
		}
	})
	return r
}

// bearer requires "Authorization: Bearer token" when token is not empty.
func bearer(token string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if token == "" {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !validBearer(r, token) {
				httpError(w, http.StatusUnauthorized, "missing or invalid control-plane token")
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// validBearer reports whether r carries "Authorization: Bearer token"
// (always, when token is empty).
func validBearer(r *http.Request, token string) bool {
	if token == "" {
		return true
	}
	auth := r.Header.Get("Authorization")
	if len(auth) <= 7 || !strings.EqualFold(auth[:7], "Bearer ") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(auth[7:])), []byte(token)) == 1
}

// versionView is a policy version with the calls it is still serving.
type versionView struct {
	Policy
	InFlight int `json:"in_flight"`
}

type policyView struct {
	versionView
	Names   []string      `json:"names"`   // the model names agents send that route to this policy
	History []versionView `json:"history"` // the versions the alias has pointed at, oldest first
	// Rollout is the alias's running or last decided guarded rollout.
	Rollout *rollout.Rollout `json:"rollout,omitempty"`
}

func (s *Server) listPolicies(w http.ResponseWriter, _ *http.Request) {
	out := []policyView{} // [] with no policy, not null
	for _, p := range s.aliases.List() {
		v := policyView{versionView: versionView{p, s.aliases.InFlight(p.Alias, p.Version)}, Names: s.aliases.Names(p.Alias)}
		for _, h := range s.aliases.History(p.Alias) {
			v.History = append(v.History, versionView{h, s.aliases.InFlight(h.Alias, h.Version)})
		}
		if s.rollouts != nil {
			for _, r := range s.rollouts.List() {
				if r.Alias == p.Alias {
					r.Held = nil // sessions, not for display
					v.Rollout = &r
				}
			}
		}
		out = append(out, v)
	}
	writeJSON(w, http.StatusOK, map[string]any{"policies": out})
}

func (s *Server) swapPolicy(w http.ResponseWriter, r *http.Request) {
	var p struct { // Policy's fields, spelled out so a decode error names them alone
		Alias   string   `json:"alias"`
		Target  string   `json:"target"`
		Version int64    `json:"version"`
		Names   []string `json:"names"` // more model names that follow the alias
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		badBody(w, "bad policy", err)
		return
	}
	if p.Alias == "" || p.Target == "" {
		httpError(w, http.StatusBadRequest, "alias and target are required")
		return
	}
	for _, n := range p.Names {
		s.aliases.Link(n, p.Alias)
	}
	s.aliases.Swap(p.Alias, p.Target, p.Version)
	s.log.Info("policy swapped", "alias", p.Alias, "target", p.Target, "version", p.Version, "names", s.aliases.Names(p.Alias))
	writeJSON(w, http.StatusOK, Policy{Alias: p.Alias, Target: p.Target, Version: p.Version})
}

// setRollout applies an operator's action to an alias's rollout:
// {"action": "promote" | "rollback" | "pin" | "unpin", "share": 0.5}, or
// {"action": "begin", "target": "agent-v3", "version": 3} to make a version
// already loaded on the engines the candidate (a remote trainer's publish).
func (s *Server) setRollout(w http.ResponseWriter, r *http.Request) {
	if s.rollouts == nil {
		httpError(w, http.StatusNotFound, "guarded rollouts are off (rollout.enabled)")
		return
	}
	var req struct {
		Action  string  `json:"action"`
		Share   float64 `json:"share"`
		Target  string  `json:"target"`
		Version int64   `json:"version"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		badBody(w, "bad rollout action", err)
		return
	}
	alias := chi.URLParam(r, "alias")
	if req.Action == "begin" {
		target, version, ok := s.aliases.Get(alias)
		if !ok || req.Target == "" || req.Version <= version {
			httpError(w, http.StatusBadRequest, "begin needs a known alias and a target with a version above the live one")
			return
		}
		if err := s.rollouts.Begin(alias, rollout.Version{Version: version, Target: target},
			rollout.Version{Version: req.Version, Target: req.Target}); err != nil {
			httpError(w, http.StatusInternalServerError, err.Error())
			return
		}
		ro, _ := s.rollouts.Running(alias)
		ro.Held = nil
		writeJSON(w, http.StatusOK, ro)
		return
	}
	ro, err := s.rollouts.Set(alias, req.Action, req.Share)
	switch {
	case errors.Is(err, rollout.ErrNoRollout):
		httpError(w, http.StatusNotFound, err.Error())
		return
	case err != nil:
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	ro.Held = nil
	s.log.Info("rollout set by hand", "alias", alias, "action", req.Action, "decision", ro.Decision)
	writeJSON(w, http.StatusOK, ro)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// badBody answers 400 for a body that did not decode, naming the field at
// fault in the message and in "param" (jsonerr), not Go's types.
func badBody(w http.ResponseWriter, what string, err error) {
	msg, field := jsonerr.Describe(err)
	status := http.StatusBadRequest
	if me := (*http.MaxBytesError)(nil); errors.As(err, &me) {
		status = http.StatusRequestEntityTooLarge
	}
	writeAPIError(w, &apiError{status: status, typ: "invalid_request_error", code: "invalid_body", msg: what + ": " + msg,
		param: field})
}

func httpError(w http.ResponseWriter, status int, msg string) {
	typ := "invalid_request_error" // 4xx: the caller's (OpenAI's type for a bad key too)
	switch {
	case status == http.StatusServiceUnavailable:
		typ = "service_unavailable" // as the data plane's errNoEngine
	case status >= 500:
		typ = "server_error"
	}
	writeAPIError(w, &apiError{status: status, typ: typ, code: strings.ToLower(strings.ReplaceAll(
		http.StatusText(status), " ", "_")), msg: msg})
}

func writeAPIError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	_, _ = w.Write(appendErrorJSON(nil, e))
}
