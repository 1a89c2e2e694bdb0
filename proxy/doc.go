// Package proxy is hone's data plane and control plane.
//
// The data plane is a fasthttp reverse proxy that speaks the OpenAI API to
// agents and the vLLM API to engines. For a call that is captured it rewrites
// the request so the engine returns token ids and logprobs, tees the response
// (one SSE event at a time for streams) into a Recorder, and strips what it
// injected so the agent sees exactly what the engine would have sent it.
//
// One file per concern, after Caddy's reverseproxy: options.go (configuration),
// server.go (routing and the handler), rewrite.go (request rewrite),
// strip.go (response strip), sse.go (SSE event reader), accumulate.go
// (aggregating a response into a capture.Call), jsonwalk.go (the
// single-pass JSON reader the accumulator walks answers with), stream.go
// (streaming body),
// upstream.go (connections and timeouts), pool.go (engine selection and
// health), aliases.go (policy alias table), tokenize.go (token-id fallback),
// errors.go (OpenAI-style errors), control.go (chi control plane), metrics.go,
// headers.go (hone's headers and credentials, any spelling), feedback.go
// (data-plane feedback and ownership), logger.go (fasthttp's logger, redacted).
// Agent APIs: api.go (routes to surfaces; the encoder interface),
// responses*.go (the OpenAI Responses API) and messages*.go (the Anthropic
// Messages API), each translated onto the engine's chat completions.
// Engine dialects: dialect.go (the interface), dialect_chat.go,
// dialect_completions.go, dialect_passthrough.go: how each engine API asks
// for logprobs, folds its answers into a capture and shapes a rebuilt one.
package proxy
