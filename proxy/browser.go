package proxy

import (
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/valyala/fasthttp"
)

// A plane without credentials (the data plane without client keys, the
// control plane without a token) trusts whoever reaches it, and a browser on
// the same machine reaches a loopback listener: any web page may POST to
// http://127.0.0.1:8080 without a CORS preflight (a "simple" request), and a
// page whose DNS name is rebound to 127.0.0.1 reads the answers too
// (captured prompts, experiences) and swaps policies. Such planes refuse a
// request a browser marks as coming from another site (Origin that is not a
// loopback origin, Sec-Fetch-Site: cross-site) and, on a loopback listener,
// a Host that a rebound page could send (hostAllowed). Agents' SDKs, curl
// and peers send no Origin and name the address they dialled.

// crossSite returns why a request on a plane without credentials is
// refused, or "" when it may proceed. checkHost is set on a loopback
// listener, where every legitimate Host is a loopback name.
func crossSite(host, origin, fetchSite string, checkHost bool) string {
	if origin != "" {
		u, err := url.Parse(origin)
		if err != nil || !loopbackName(u.Hostname()) {
			return "a web page of another origin may not use a hone plane that has no " +
				"credentials; give hone client keys or a control token to call it from a browser"
		}
	}
	if origin == "" && strings.EqualFold(fetchSite, "cross-site") { // with an Origin, the Origin decides
		return "a cross-site browser request may not use a hone plane that has no credentials"
	}
	if checkHost && host != "" {
		h := host
		if hh, _, err := net.SplitHostPort(host); err == nil {
			h = hh
		}
		if !hostAllowed(h) {
			return "the Host header is not this machine's name: a loopback listener without credentials " +
				"answers only requests addressed to localhost, an IP address or the machine's host name"
		}
	}
	return ""
}

// loopbackName reports whether h is localhost (or a name under .localhost,
// which browsers resolve to loopback themselves) or a loopback address.
func loopbackName(h string) bool {
	h = strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// hostAllowed reports whether a request to a loopback listener may name
// h as its Host: a loopback name, an IP address (a page whose DNS name was
// rebound to 127.0.0.1 sends that name, never an address) or this
// machine's host name (which the machine resolves itself: Debian maps it
// to 127.0.1.1, so an agent given http://<hostname>:8080 reaches hone over
// loopback).
func hostAllowed(h string) bool {
	h = strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
	if loopbackName(h) || net.ParseIP(h) != nil {
		return true
	}
	return h != "" && h == machineName
}

// machineName is os.Hostname in lower case ("" when unknown).
var machineName = func() string {
	n, err := os.Hostname()
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(strings.ToLower(n), ".")
}()

// browserGuard answers 403 and reports true for a request the data plane,
// without client keys, refuses (crossSite); cors is set for a page of an
// origin proxy.cors_origins allows. The Host is checked on requests
// that arrived over loopback, whose client dialled a loopback address,
// unless agents_trust_each_other says whoever reaches hone is trusted (a
// reverse proxy on the same host passes its clients' Host on).
func (s *Server) browserGuard(ctx *fasthttp.RequestCtx, cors bool) bool {
	v := peekFold(&ctx.Request.Header, "Origin", "Sec-Fetch-Site")
	origin, site := v[0], v[1]
	if cors { // a page of an origin proxy.cors_origins lets in: only its Host is checked
		origin, site = nil, nil
	}
	local := !s.opts.AgentsTrustEachOther && ctx.LocalIP().IsLoopback()
	if len(origin) == 0 && len(site) == 0 && !local {
		return false
	}
	why := crossSite(string(ctx.Host()), string(origin), string(site), local)
	if why == "" {
		return false
	}
	s.failAPI(ctx, surfaceOf(ctx), &apiError{403, "permission_error", "cross_site_request", why, ""})
	return true
}

// SameSiteOnly refuses (403) what a web page in a browser on the machine
// could send to a plane without credentials on loopback (crossSite): a
// cross-site Origin or Sec-Fetch-Site, or a Host that is not this
// machine's name (DNS rebinding). It guards the control plane without a
// token, and a standalone engine without a key.
func SameSiteOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if why := crossSite(r.Host, r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site"), true); why != "" {
			httpError(w, http.StatusForbidden, why)
			return
		}
		next.ServeHTTP(w, r)
	})
}
