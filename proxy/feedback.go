package proxy

import (
	"crypto/sha256"
	"fmt"
	"net/http"

	"github.com/hone-rl/hone/capture"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// Data-plane feedback. Rewards and commits belong on the control plane,
// which is loopback-only or token-protected. Some clients can use only one
// base URL for everything (AgentScope's TrainingRunner posts Trinity's
// /feedback and /commit next to its chat calls), so the same routes may be
// served on the data plane, by proxy.data_plane_feedback:
//
//	off       (default) not served: 404 naming the option
//	keys      a client key is required (proxy.client_keys must be set), and
//	          a key may reward or commit only the sessions it opened
//	loopback  only from a loopback peer (the sidecar case: the agent in the
//	          same pod or host); with client keys set, the key rule too
const (
	FeedbackOff      = "off"
	FeedbackKeys     = "keys"
	FeedbackLoopback = "loopback"
)

// ownerKey is the request-context key of the owner a data-plane request
// acts for (fasthttp's RequestCtx serves user values as context values).
type ownerKey struct{}

// ownerOf derives the owner id of a client key: a hash, so neither the
// store nor the logs ever hold the key itself.
func ownerOf(key string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte("hone-owner\x00" + key))
	return fmt.Sprintf("key:%x", sum[:12])
}

// Mount serves path on the data plane with a net/http handler, under the
// rules of proxy.data_plane_feedback (used for /feedback, /commit,
// /v1/feedback and /v1/commit). The handler's request context carries the
// caller's owner (capture.WithOwner). Call it before Serve.
func (s *Server) Mount(path string, h http.Handler) {
	if s.mounted == nil {
		s.mounted = map[string]fasthttp.RequestHandler{}
	}
	withOwner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// the handler routes on what hone checked: the mounted path, not
		// the raw target (fasthttp cleans "/v1/sessions%2F..%2F..%2Ffeedback/../../feedback"
		// to /feedback; a chi router read the raw one as a session read)
		r.URL.Path, r.URL.RawPath = path, ""
		if owner, _ := r.Context().Value(ownerKey{}).(string); owner != "" {
			r = r.WithContext(capture.WithOwner(r.Context(), owner))
		}
		h.ServeHTTP(w, r)
	})
	s.mounted[path] = fasthttpadaptor.NewFastHTTPHandler(withOwner)
}

// serveMounted applies proxy.data_plane_feedback to a mounted route.
func (s *Server) serveMounted(ctx *fasthttp.RequestCtx, h fasthttp.RequestHandler) {
	mode := s.opts.DataPlaneFeedback
	switch {
	case mode != FeedbackKeys && mode != FeedbackLoopback:
		s.fail(ctx, "feedback", &apiError{404, "invalid_request_error", "not_found", "rewards and commits are " +
			"served on hone's control plane; set proxy.data_plane_feedback (keys or loopback) to accept them here", ""})
		return
	case mode == FeedbackLoopback && !ctx.RemoteIP().IsLoopback():
		s.fail(ctx, "feedback", &apiError{403, "permission_error", "forbidden",
			"data-plane feedback is accepted only from loopback (proxy.data_plane_feedback: loopback)", ""})
		return
	}
	key, ok := s.clientKey(ctx)
	if len(s.keys) > 0 && !ok {
		s.fail(ctx, "feedback", errUnauthorized)
		return
	}
	ctx.SetUserValue(ownerKey{}, ownerOf(key))
	h(ctx)
}
