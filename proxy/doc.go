// Package proxy is hone's data plane and control plane.
//
// The data plane is a fasthttp reverse proxy that speaks the OpenAI API to
// agents and the vLLM API to engines. For a call that is captured it rewrites
// the request so the engine returns token ids and logprobs, tees the response
// (one SSE event at a time for streams) into a Recorder, and strips what it
// injected so the agent sees exactly what the engine would have sent it.
//
// One file per concern, after Caddy's reverseproxy. Every file:
//
//   - Setup: options.go (configuration), server.go (the Server, the request
//     handler, handleCall and finishBody), routes.go (the route table: every
//     route hone answers, with its method), listener.go (accepting through
//     EMFILE), logger.go (fasthttp's logger, redacted), metrics.go.
//   - Agent APIs: api.go (surfaces: the route's API and its encoder
//     interface); responses.go, responses_encode.go, responses_tools.go and
//     responses_store.go (the OpenAI Responses API, its conversations for
//     previous_response_id); messages.go, messages_encode.go and
//     messages_tools.go (the Anthropic Messages API), each translated onto the
//     engine's chat completions, each reading the conversation in one walk
//     (jsonval.go: a value as its raw text); chatjson.go (the chat request
//     both write, json.Marshal's bytes without re-encoding the
//     conversation); models.go
//     (/v1/models and the forwarded inference routes).
//   - Engine dialects: dialect.go (the interface), dialect_chat.go,
//     dialect_completions.go, dialect_passthrough.go: how each engine API asks
//     for logprobs, folds its answers into a capture and shapes a rebuilt one.
//   - Per call, in order: cors.go (CORS for proxy.cors_origins), browser.go
//     (a browser's cross-site request to a plane without credentials
//     refused), headers.go (hone's headers and
//     credentials, any spelling), cachesalt.go (each client key's cache_salt,
//     so keys share no engine prefix cache), aliases.go and rollout.go (policy aliases, guarded
//     rollouts), rewrite.go (the request rewrite), continuity.go (the glue to
//     package continuity, token continuity), forward.go (the round trip,
//     retried on another engine before any byte reached the agent), pool.go
//     (engine selection and health), upstream.go (connections and timeouts),
//     reply.go (how the answer reaches the agent: native or translated),
//     stream.go (the streamed body), accumulate.go (folding an answer into a
//     capture.Call in one pass of internal/jsonwalk), strip.go (removing what hone
//     injected), call.go (the call's state and its end), recorder.go (the
//     Recorder interface, MemRecorder), tokenize.go (the /tokenize fallback for
//     prompt ids), errors.go (OpenAI-style errors).
//   - Control plane and feedback: control.go (chi: health, metrics, the
//     admin routes), feedback.go (data-plane feedback and session ownership).
//
// Subpackages: continuity (token continuity: prompts rendered in hone, the
// sampled ids of served turns put back) and internal/sse (the SSE event
// reader both use).
package proxy
