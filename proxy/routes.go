package proxy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/valyala/fasthttp"
)

// The data plane's routes. hone serves its own APIs (surfaces in api.go,
// /v1/models, /v1/messages/count_tokens) and forwards, unchanged and
// uncaptured, only the inference routes of proxy.inference_routes. Every
// other path is answered 404 by hone itself: engine administration
// (adapters, sleep and wake, weight updates, cache resets, RPC, profiling)
// is hone's alone, done by the trainer and publisher over the control plane,
// so an agent can neither swap the weights others are served nor learn
// which admin routes an engine exposes.

// DefaultInferenceRoutes are the routes vLLM and SGLang clients call
// during inference besides the APIs hone serves itself: embeddings,
// scoring, reranking, pooling, classification, audio transcription and
// tokenization (vLLM at the root, SGLang and others under /v1).
func DefaultInferenceRoutes() []string {
	return append(slices.Clone(poolingRoutes),
		"/v1/audio/transcriptions", "/v1/audio/translations",
		"/tokenize", "/detokenize", "/v1/tokenize", "/v1/detokenize",
	)
}

// poolingRoutes are vLLM's pooling routes: embeddings, scoring, reranking,
// pooling and classification. Their requests go through the engine's prefix
// cache and take cache_salt (cachesalt.go).
var poolingRoutes = []string{
	"/v1/embeddings",
	"/v1/score", "/score",
	"/v1/rerank", "/v2/rerank", "/rerank",
	"/pooling", "/classify",
}

// adminRoutes are engine administration routes of vLLM and SGLang. They
// are never forwarded: naming one in proxy.inference_routes is an error.
var adminRoutes = []string{
	// vLLM
	"/v1/load_lora_adapter", "/v1/unload_lora_adapter", "/sleep", "/wake_up", "/is_sleeping",
	"/reset_prefix_cache", "/reset_mm_cache", "/collective_rpc", "/start_profile", "/stop_profile",
	"/scale_elastic_ep", "/is_scaling_elastic_ep", "/server_info", "/pause", "/resume", "/is_paused",
	"/update_weights", "/init_weight_transfer", "/invocations",
	// SGLang
	"/load_lora_adapter", "/unload_lora_adapter", "/flush_cache", "/update_weights_from_disk",
	"/update_weights_from_tensor", "/update_weights_from_distributed", "/init_weights_update_group",
	"/release_memory_occupation", "/resume_memory_occupation", "/get_server_info", "/configure_logging",
	"/abort_request", "/start_expert_distribution_record", "/stop_expert_distribution_record",
	"/dump_expert_distribution_record", "/set_internal_state", "/get_internal_state", "/update_weight_version",
	"/slow_down", "/open_session", "/close_session",
}

// checkInferenceRoutes validates proxy.inference_routes: absolute paths,
// none of them engine administration or a route hone serves itself.
func checkInferenceRoutes(routes []string) error {
	for i, r := range routes {
		switch {
		case !strings.HasPrefix(r, "/") || strings.ContainsAny(r, "?#* \t") || strings.Contains(r, "//") ||
			strings.Contains(r, "/./") || strings.Contains(r, "/../") || strings.HasSuffix(r, "/.."):
			return fmt.Errorf("proxy.inference_routes[%d]: %q is not a plain absolute path such as /v1/embeddings", i, r)
		case slices.Contains(adminRoutes, r):
			return fmt.Errorf("proxy.inference_routes[%d]: %s is engine administration; hone alone calls it, "+
				"through its control plane", i, r)
		case ownRoute(r):
			return fmt.Errorf("proxy.inference_routes[%d]: %s is served by hone itself", i, r)
		}
	}
	return nil
}

// countTokensPath is Anthropic's token count, answered from the engine's
// /tokenize; its errors are in Anthropic's shape (surfaceOf).
const countTokensPath = "/v1/messages/count_tokens"

// ownRoutes are the routes hone answers itself besides the API surfaces
// (api.go, the calls it proxies and captures): the method each takes and
// its handler.
var ownRoutes = map[string]struct {
	method string
	handle func(*Server, *fasthttp.RequestCtx)
}{
	"/v1/models":    {"GET", (*Server).handleModels},
	countTokensPath: {"POST", (*Server).handleCountTokens},
}

// ownRoute reports whether hone answers path itself.
func ownRoute(path string) bool {
	_, api := surfaces[path]
	_, own := ownRoutes[path]
	return api || own
}

// routeKind is what the data plane does with a path.
type routeKind int

const (
	routeUnknown   routeKind = iota // 404
	routeOwn                        // an API hone serves
	routeInference                  // forwarded as it is
)

// newRoutes indexes the forwarded routes.
func newRoutes(routes []string) map[string]bool {
	m := make(map[string]bool, len(routes))
	for _, r := range routes {
		m[r] = true
	}
	return m
}

// routeOf classifies a request's (normalised) path.
func (s *Server) routeOf(path string) routeKind {
	switch {
	case ownRoute(path):
		return routeOwn
	case s.forward[path]:
		return routeInference
	}
	return routeUnknown
}

// notFound answers a path hone neither serves nor forwards. The answer
// names the config key, never whether the engine has such a route, and
// echoes no request bytes.
func (s *Server) notFound(ctx *fasthttp.RequestCtx) {
	s.fail(ctx, "other", &apiError{404, "invalid_request_error", "not_found",
		"Invalid URL: hone serves the inference APIs (chat/completions, completions, responses, messages, " +
			"models) and forwards the routes in proxy.inference_routes; engine administration is hone's own, " +
			"on its control plane", ""})
}

// methodNotAllowed answers a route of hone's with a method it does not take.
func (s *Server) methodNotAllowed(ctx *fasthttp.RequestCtx, allow string) {
	s.failAPI(ctx, surfaceOf(ctx), &apiError{405, "invalid_request_error", "method_not_allowed",
		"this route takes only " + allow, ""})
	ctx.Response.Header.Set("Allow", allow) // after fail, which resets the response
}
