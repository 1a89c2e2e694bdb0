package proxy

import (
	"encoding/json"

	"github.com/hone-rl/hone/internal/jsonerr"
	"github.com/valyala/fasthttp"
)

// apiError is an OpenAI-style error answered by hone itself.
type apiError struct {
	status int
	typ    string
	code   string
	msg    string
	param  string // the request field at fault, when known
}

func (e *apiError) Error() string { return e.msg }

var (
	errBadJSON       = &apiError{400, "invalid_request_error", "invalid_json", "request body is not valid JSON", ""}
	errTooLarge      = &apiError{413, "invalid_request_error", "request_too_large", "request body exceeds the size limit", ""}
	errUnauthorized  = &apiError{401, "invalid_request_error", "invalid_api_key", "missing or invalid API key", ""}
	errNoEngine      = &apiError{503, "service_unavailable", "no_healthy_engine", "no healthy engine serves this model", ""}
	errUnreachable   = &apiError{502, "bad_gateway", "engine_unreachable", "engine unreachable", ""}
	errTimeout       = &apiError{504, "timeout", "upstream_timeout", "engine did not answer in time", ""}
	errUpstreamLarge = &apiError{502, "bad_gateway", "upstream_answer_too_large", "the engine's answer exceeds 256 MiB", ""}
)

// writeError answers ctx with an OpenAI-style JSON error.
func writeError(ctx *fasthttp.RequestCtx, e *apiError) {
	ctx.Response.Reset()
	ctx.SetStatusCode(e.status)
	ctx.SetContentType("application/json")
	ctx.SetBody(appendErrorJSON(nil, e))
}

// appendErrorJSON appends {"error":{"message","type","param","code"}}.
// Strings go through encoding/json: strconv's quoting writes invalid UTF-8
// (a header or an item type echoed in a message) as \xNN, which is not JSON.
func appendErrorJSON(b []byte, e *apiError) []byte {
	b = append(b, `{"error":{"message":`...)
	b = appendJSONString(b, e.msg)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, e.typ)
	if e.param == "" {
		b = append(b, `,"param":null`...)
	} else {
		b = append(b, `,"param":`...)
		b = appendJSONString(b, e.param)
	}
	b = append(b, `,"code":`...)
	b = appendJSONString(b, e.code)
	return append(b, "}}"...)
}

func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals; invalid UTF-8 becomes U+FFFD
	return append(b, q...)
}

// errSessionOwned answers a call naming a session another client opened:
// nothing is run or stored, and the agent learns to pick another id rather
// than being told an id its rewards would not reach.
func errSessionOwned(header string) *apiError {
	return &apiError{409, "invalid_request_error", "session_conflict", "the session id in " + header +
		" was opened by another client: every client must use its own session ids", header}
}

// clip cuts a value echoed in an error to 64 bytes.
func clip(s string) string { return jsonerr.Clip(s, 64) }

// clipTo cuts s to at most n bytes, on a rune boundary, marking the cut.
func clipTo(s string, n int) string { return jsonerr.Clip(s, n) }
