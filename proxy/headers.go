package proxy

import (
	"bytes"
	"slices"

	"github.com/hone-rl/hone/capture"
	"github.com/valyala/fasthttp"
)

// Header names are case-insensitive (RFC 9110 §5.1), and fetch-based clients
// and HTTP/2 hops send them lowercase. The data plane keeps the spelling the
// client sent (DisableHeaderNamesNormalizing: the engine receives the agent's
// headers as sent), which makes fasthttp's Peek and Del match one exact
// spelling; every header hone reads, deletes or compares goes through the
// helpers below instead.

// credentialHeaders carry an agent's credentials (OpenAI, Anthropic and
// Azure keys; cookies of a session with a gateway in front): none of them
// reaches an engine that has its own engine.api_key.
var credentialHeaders = []string{"Authorization", "X-Api-Key", "Api-Key", "Proxy-Authorization", "Cookie"}

// delFold deletes every spelling of names from h and reports whether h has
// seek (not one of names) in any spelling, from the same pass.
func delFold(h *fasthttp.RequestHeader, names []string, seek string) (sought bool) {
	// The spellings found are copied (k is h's memory, which deleting
	// moves) into keys and found as offsets, not slices, so that neither
	// array holds a pointer and both stay on the stack.
	var keyBuf [256]byte
	var endBuf [8]int
	keys, ends := keyBuf[:0], endBuf[:0]
	for k := range h.All() {
		sought = sought || foldEq(k, seek)
		for _, n := range names {
			if foldEq(k, n) {
				keys = append(keys, k...)
				ends = append(ends, len(keys))
				break
			}
		}
	}
	start := 0
	for _, end := range ends {
		h.DelBytes(keys[start:end])
		start = end
	}
	for _, n := range names {
		if parsedField(n) {
			h.Del(n) // the canonical spelling also clears the field fasthttp parsed it into
		}
	}
	return sought
}

// parsedField reports whether fasthttp keeps the request header name in a
// field of its own, which only a Del of the canonical spelling clears.
func parsedField(name string) bool {
	switch name {
	case fasthttp.HeaderHost, fasthttp.HeaderContentType, fasthttp.HeaderUserAgent, fasthttp.HeaderCookie,
		fasthttp.HeaderContentLength, fasthttp.HeaderConnection, fasthttp.HeaderTrailer:
		return true
	}
	return false
}

// requestIDHeader names a request to the engine; vLLM makes its response
// id from it.
const requestIDHeader = "X-Request-Id"

// upstreamDrops are the request headers that never reach an engine, in any
// spelling: hop-by-hop ones, Accept-Encoding (hone reads the body; engines
// rarely compress anyway), hone's own, and the agent's credentials when the
// engine has its own key or they are hone's client keys (which the engine
// has no business seeing: a key hone checked is not passed on).
func upstreamDrops(o *Options) []string {
	// Origin: CORS is hone's (cors.go); an engine's own answer to it is dropped
	// Sec-Fetch-*: a browser's view of its request to hone, which a keyless
	// engine's same-site guard would read as the page's request to it
	names := append(append(append([]string(nil), hopHeaders...), "Accept-Encoding", "Origin", "Sec-Fetch-Site",
		"Sec-Fetch-Mode", "Sec-Fetch-Dest", "Sec-Fetch-User"), o.Headers.requestNames()...)
	if o.Upstream.APIKey != "" || len(o.ClientKeys) > 0 {
		names = append(names, credentialHeaders...)
	}
	return names
}

// connectionNamed returns the header names the Connection header lists
// (other than its own options keep-alive and close), in any spelling: they
// are hop-by-hop and must not be forwarded. Nil, without allocating, for
// the usual request.
func connectionNamed(h *fasthttp.RequestHeader) []string {
	var names []string
	for k, v := range h.All() {
		if !foldEq(k, "Connection") {
			continue
		}
		for tok := range bytes.SplitSeq(v, []byte(",")) {
			tok = bytes.TrimSpace(tok)
			if len(tok) > 0 && !foldEq(tok, "keep-alive") && !foldEq(tok, "close") {
				names = append(names, string(tok))
			}
		}
	}
	return names
}

// peekFold returns the values of the headers names (one each, the last
// sent), in any spelling, from one pass over h.
func peekFold(h *fasthttp.RequestHeader, names ...string) [2][]byte {
	var vals [2][]byte
	for k, v := range h.All() {
		for i, n := range names[:min(len(names), len(vals))] {
			if foldEq(k, n) {
				vals[i] = v
			}
		}
	}
	return vals
}

// anyFold reports whether k is one of names, in any spelling.
func anyFold(k []byte, names []string) bool {
	for _, n := range names {
		if foldEq(k, n) {
			return true
		}
	}
	return false
}

func foldEq(k []byte, name string) bool {
	if len(k) != len(name) {
		return false
	}
	for i := 0; i < len(k); i++ {
		a, b := k[i], name[i]
		if a == b {
			continue
		}
		if a|0x20 != b|0x20 || a|0x20 < 'a' || a|0x20 > 'z' {
			return false
		}
	}
	return true
}

// honeRead is what readHoneHeaders found: the parsed headers, warnings for
// values that were ignored, and an error that must refuse the call.
type honeRead struct {
	hh       capture.HoneHeaders
	warnings []string
	err      *apiError
}

// readHoneHeaders parses the X-Hone-* request headers in any spelling,
// with capture's parsers, in one pass over the request's headers.
// Conflicting values of an identity or reward header (session, task, reward)
// refuse the call; an invalid value, or conflicting train/commit values, is
// ignored with a warning, or refuses the call when strict. Tags sent under
// several spellings are merged. The headers are deleted before the call goes
// upstream (buildUpstreamRequest drops them).
func readHoneHeaders(h *fasthttp.RequestHeader, n *HeaderNames, strict bool) honeRead {
	var r honeRead
	names := n.requestNames()
	var vals [6][][]byte // by the index of the name in names
	for k, v := range h.All() {
		for i, name := range names {
			if foldEq(k, name) {
				vals[i] = append(vals[i], v)
				break
			}
		}
	}
	bad := func(msg string) {
		if strict && r.err == nil {
			r.err = &apiError{400, "invalid_request_error", "invalid_header", msg, ""}
		}
		r.warnings = append(r.warnings, msg+" (ignored)")
	}
	get := func(name string) string {
		i := slices.Index(names, name)
		if name == n.Tags {
			return string(bytes.Join(vals[i], []byte(",")))
		}
		v, ok := oneValue(vals[i])
		switch {
		case ok:
		case name == n.Session || name == n.Task || name == n.Reward:
			if r.err == nil {
				r.err = &apiError{400, "invalid_request_error", "conflicting_header",
					name + ": sent more than once with different values", ""}
			}
		default:
			bad(name + ": sent more than once with different values")
		}
		return v
	}
	hh, err := capture.ParseHoneHeaders(get, capture.HeaderNames{Session: n.Session, Task: n.Task, Train: n.Train,
		Tags: n.Tags, Reward: n.Reward, Commit: n.Commit})
	r.hh = hh
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			bad(e.Error())
		}
	}
	return r
}

// oneValue is a header's one value over its spellings: values equal after
// trimming count once; different ones are a conflict ("", false).
func oneValue(vals [][]byte) (string, bool) {
	var v []byte
	for i, x := range vals {
		x = bytes.TrimSpace(x)
		if i > 0 && !bytes.Equal(x, v) {
			return "", false
		}
		v = x
	}
	return string(v), true
}

// requestNames are the hone request header names, for deletion.
func (n *HeaderNames) requestNames() []string {
	return []string{n.Session, n.Task, n.Train, n.Tags, n.Reward, n.Commit}
}

// presentedKey is the API key header k: v presents, in any header
// spelling: "Authorization: Bearer KEY" (scheme in any case), "X-Api-Key:
// KEY" (Anthropic) or "Api-Key: KEY" (Azure OpenAI); nil for another
// header. An empty value is no key. A view of v.
func presentedKey(k, v []byte) []byte {
	switch {
	case foldEq(k, "Authorization"):
		if len(v) > 7 && foldEq(v[:7], "Bearer ") {
			return bytes.TrimSpace(v[7:])
		}
	case foldEq(k, "X-Api-Key"), foldEq(k, "Api-Key"):
		return bytes.TrimSpace(v)
	}
	return nil
}
