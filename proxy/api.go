package proxy

import (
	"github.com/valyala/fasthttp"
)

// surface is one agent-facing API. Chat completions and completions are the
// engine's own and pass through (rewritten for capture, stripped on the way
// back); the OpenAI Responses API and the Anthropic Messages API are
// translated onto the engine's chat completions, so every API is captured,
// stitched and trained on alike. One file per translated API
// (responses*.go, messages*.go); the routes map to surfaces in one table.
type surface interface {
	// label names the API in metrics and errors.
	label() string
	// dialect is the engine API the call goes to.
	dialect() dialect
	// translate turns the agent's request body into the engine's. A native
	// surface returns nil: the body goes upstream as sent (plus capture's
	// rewrite). owner is the calling client's (stored state such as
	// Responses conversations is the owner's alone). Errors are answered in
	// the surface's shape.
	translate(s *Server, owner string, body []byte) (*translation, *apiError)
	// writeError answers an error in the API's own shape.
	writeError(ctx *fasthttp.RequestCtx, e *apiError)
}

// translation is a translated request and the encoder of its answer.
type translation struct {
	body []byte     // the engine request (chat completions JSON)
	in   inspection // inspect's reading of body, taken as it was written
	path string     // the engine route, e.g. /v1/chat/completions
	enc  encoder    // turns the engine's answer into the agent's API
}

// encoder turns the engine's chat completions answer into a translated
// API's answer.
type encoder interface {
	// body re-encodes a whole non-stream answer (status < 400) and returns
	// the agent's body; an engine error (status >= 400) is re-shaped.
	body(chat []byte, status int) []byte
	// event re-encodes one chunk of a stream (the JSON of a data event)
	// into zero or more SSE events for the agent.
	event(chunk []byte) []byte
	// end returns the closing events once the engine sent data: [DONE].
	end() []byte
	// fail returns the API's error event for a stream the engine broke.
	fail(msg string) []byte
	// named sets the answer's id from the call's id (before any answer)
	// and returns it.
	named(callID string) string
}

// surfaces maps POST routes to their API.
var surfaces = map[string]surface{
	"/v1/chat/completions": nativeSurface{chatDialect},
	"/v1/completions":      nativeSurface{completionsDialect},
	"/v1/responses":        responsesSurface{},
	"/v1/messages":         messagesSurface{},
}

// nativeSurface is an API the engine speaks itself.
type nativeSurface struct{ d dialect }

func (n nativeSurface) label() string                                             { return n.d.route() }
func (n nativeSurface) dialect() dialect                                          { return n.d }
func (nativeSurface) translate(*Server, string, []byte) (*translation, *apiError) { return nil, nil }
func (nativeSurface) writeError(ctx *fasthttp.RequestCtx, e *apiError)            { writeError(ctx, e) }

// otherSurface labels errors answered before routing (a path hone does not
// serve): OpenAI's shape.
type otherSurface struct{ nativeSurface }

func (otherSurface) label() string    { return "other" }
func (otherSurface) dialect() dialect { return passthroughDialect }
