package proxy

import (
	"bytes"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/valyala/fasthttp"
)

// CORS for proxy.cors_origins: a web page of a listed origin may call the
// data plane from a browser, as vLLM's --allowed-origins allows. hone
// answers its preflights itself (OPTIONS with Access-Control-Request-Method:
// 204, never forwarded), and marks the answers to its requests with
// Access-Control-Allow-Origin (the page's origin, never a wildcard, with
// Vary: Origin) and the hone headers the page may read. Credentials are
// the client keys the page sends in Authorization or X-Api-Key, which a
// preflight allows; cookies are not used, so Allow-Credentials is not sent.

// corsExposed lists the response headers a page may read: hone's own, by
// their configured names.
func corsExposed(n HeaderNames) string {
	return strings.Join([]string{n.Session, n.Call, n.Policy, warningHeader}, ", ")
}

// isCORS reports whether an engine's response header is a CORS one, which
// hone does not pass on (an engine's Access-Control-Allow-Origin: * would
// let pages of any origin read answers hone did not let them have).
func isCORS(k []byte) bool {
	const p = "access-control-"
	return len(k) > len(p) && strings.EqualFold(string(k[:len(p)]), p)
}

// corsMaxHeaders bounds the request headers a preflight may ask for, echoed
// back in Access-Control-Allow-Headers.
const corsMaxHeaders = 1024

// checkCORSOrigins refuses an entry that is neither * nor an origin
// (scheme://host[:port], no path): a page's Origin never matches one.
func checkCORSOrigins(origins []string) error {
	for _, o := range origins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.Path != "" || u.RawQuery != "" || u.User != nil || u.Fragment != "" {
			return fmt.Errorf("proxy.cors_origins: %q is not an origin (scheme://host[:port], such as "+
				"http://localhost:3000) nor *", o)
		}
	}
	return nil
}

// corsAllowed reports whether a page of origin may call the data plane.
func (s *Server) corsAllowed(origin []byte) bool {
	if len(origin) == 0 || len(s.opts.CORSOrigins) == 0 {
		return false
	}
	o := string(origin)
	return slices.ContainsFunc(s.opts.CORSOrigins, func(a string) bool { return a == "*" || strings.EqualFold(a, o) })
}

// corsPreflight answers a CORS preflight of an allowed origin and reports
// true; any other request is left to the routes.
func corsPreflight(ctx *fasthttp.RequestCtx) bool {
	if !ctx.IsOptions() {
		return false
	}
	v := peekFold(&ctx.Request.Header, "Access-Control-Request-Method", "Access-Control-Request-Headers")
	if len(v[0]) == 0 {
		return false
	}
	ctx.SetStatusCode(fasthttp.StatusNoContent)
	r := &ctx.Response.Header
	r.Set("Access-Control-Allow-Methods", "GET, POST")
	if asked := v[1]; len(asked) > 0 && len(asked) <= corsMaxHeaders {
		r.SetBytesV("Access-Control-Allow-Headers", asked) // any header: hone reads its own, and keys decide
	}
	r.Set("Access-Control-Max-Age", "600")
	return true
}

// corsMark adds the CORS headers of an allowed origin to the answer, once
// the handler has set it (the body, streamed or not, is written after).
func (s *Server) corsMark(ctx *fasthttp.RequestCtx, origin []byte) {
	r := &ctx.Response.Header
	r.SetBytesV("Access-Control-Allow-Origin", origin)
	vary := false
	for k, v := range r.All() { // any spelling: uvicorn sends header names lowercase
		vary = vary || foldEq(k, "Vary") && bytes.Contains(bytes.ToLower(v), []byte("origin"))
	}
	if !vary {
		r.Add("Vary", "Origin")
	}
	r.Set("Access-Control-Expose-Headers", s.corsExposed)
}
