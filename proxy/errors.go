package proxy

import (
	"strconv"

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
	errBadJSON      = &apiError{400, "invalid_request_error", "invalid_json", "request body is not valid JSON", ""}
	errTooLarge     = &apiError{413, "invalid_request_error", "request_too_large", "request body exceeds the size limit", ""}
	errUnauthorized = &apiError{401, "invalid_request_error", "invalid_api_key", "missing or invalid API key", ""}
	errNoEngine     = &apiError{503, "service_unavailable", "no_healthy_engine", "no healthy engine serves this model", ""}
	errUnreachable  = &apiError{502, "bad_gateway", "engine_unreachable", "engine unreachable", ""}
	errTimeout      = &apiError{504, "timeout", "upstream_timeout", "engine did not answer in time", ""}
	errNotFound     = &apiError{404, "invalid_request_error", "not_found", "no such route", ""}
)

// writeError answers ctx with an OpenAI-style JSON error.
func writeError(ctx *fasthttp.RequestCtx, e *apiError) {
	ctx.Response.Reset()
	ctx.SetStatusCode(e.status)
	ctx.SetContentType("application/json")
	ctx.SetBody(appendErrorJSON(nil, e))
}

func appendErrorJSON(b []byte, e *apiError) []byte {
	b = append(b, `{"error":{"message":`...)
	b = strconv.AppendQuote(b, e.msg)
	b = append(b, `,"type":`...)
	b = strconv.AppendQuote(b, e.typ)
	if e.param == "" {
		b = append(b, `,"param":null`...)
	} else {
		b = append(b, `,"param":`...)
		b = strconv.AppendQuote(b, e.param)
	}
	b = append(b, `,"code":`...)
	b = strconv.AppendQuote(b, e.code)
	return append(b, "}}"...)
}
