package proxy

import (
	"bytes"
	"strings"

	"github.com/hone-rl/hone/capture"
	"github.com/valyala/fasthttp"
)

// Header names are case-insensitive (RFC 9110 §5.1), and fetch-based clients
// and HTTP/2 hops send them lowercase. The data plane keeps the spelling the
// client sent (DisableHeaderNamesNormalizing: the engine receives the agent's
// headers as sent), which makes fasthttp's Peek and Del match one exact
// spelling; every header hone reads, deletes or compares goes through the
// helpers below instead.

// credentialHeaders carry an agent's API key (OpenAI, Anthropic, Azure).
var credentialHeaders = []string{"Authorization", "X-Api-Key", "Api-Key", "Proxy-Authorization"}

// peekFold returns the values of every spelling of name, in the order sent.
func peekFold(h *fasthttp.RequestHeader, name string) [][]byte {
	var vals [][]byte
	for k, v := range h.All() {
		if foldEq(k, name) {
			vals = append(vals, v)
		}
	}
	return vals
}

// delFold deletes every spelling of names from h.
func delFold(h *fasthttp.RequestHeader, names []string) {
	var found []string
	for k := range h.All() {
		for _, n := range names {
			if foldEq(k, n) {
				found = append(found, string(k))
				break
			}
		}
	}
	for _, k := range found {
		h.Del(k)
	}
	for _, n := range names {
		h.Del(n) // the canonical spelling also clears fasthttp's parsed fields (Content-Length, Connection, ...)
	}
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

// headerValue is a header's one value over all its spellings: values that
// are equal after trimming count once; different ones are a conflict.
func headerValue(h *fasthttp.RequestHeader, name string) (string, bool) {
	var v []byte
	for i, x := range peekFold(h, name) {
		x = bytes.TrimSpace(x)
		if i > 0 && !bytes.Equal(x, v) {
			return "", false
		}
		v = x
	}
	return string(v), true
}

// honeRead is what readHoneHeaders found: the parsed headers, warnings for
// values that were ignored, and an error that must refuse the call.
type honeRead struct {
	hh       capture.HoneHeaders
	warnings []string
	err      *apiError
}

// readHoneHeaders parses the X-Hone-* request headers in any spelling.
// Conflicting values of an identity or reward header (session, task, reward)
// refuse the call; an invalid value is ignored with a warning, or refuses the
// call when strict. The headers are deleted before the call goes upstream
// (buildUpstreamRequest drops them).
func readHoneHeaders(h *fasthttp.RequestHeader, n *HeaderNames, strict bool) honeRead {
	var r honeRead
	get := func(name string) (string, bool) {
		v, ok := headerValue(h, name)
		if !ok && r.err == nil {
			r.err = &apiError{400, "invalid_request_error", "conflicting_header",
				name + ": sent more than once with different values", ""}
		}
		return v, ok
	}
	bad := func(name string, err error) {
		msg := name + ": " + err.Error()
		if strict && r.err == nil {
			r.err = &apiError{400, "invalid_request_error", "invalid_header", msg, ""}
		}
		r.warnings = append(r.warnings, msg+" (ignored)")
	}
	var err error
	if v, ok := get(n.Session); ok {
		if r.hh.Session, err = capture.ParseID(v); err != nil {
			bad(n.Session, err)
		}
	}
	if v, ok := get(n.Task); ok {
		if r.hh.Task, err = capture.ParseID(v); err != nil {
			bad(n.Task, err)
		}
	}
	if v, ok := get(n.Reward); ok {
		if r.hh.Reward, err = capture.ParseReward(v); err != nil {
			bad(n.Reward, err)
		}
	}
	r.hh.Train = -1
	if v, ok := headerValue(h, n.Train); !ok {
		bad(n.Train, errConflict)
	} else if r.hh.Train, err = capture.ParseTrain(v); err != nil {
		bad(n.Train, err)
	}
	if v, ok := headerValue(h, n.Commit); !ok {
		bad(n.Commit, errConflict)
	} else if r.hh.Commit, err = capture.ParseBool(v); err != nil {
		bad(n.Commit, err)
	}
	var tags []string
	for _, v := range peekFold(h, n.Tags) {
		tags = append(tags, string(v))
	}
	r.hh.Tags = capture.ParseTags(strings.Join(tags, ","))
	return r
}

var errConflict = errString("sent more than once with different values")

type errString string

func (e errString) Error() string { return string(e) }

// requestNames are the hone request header names, for deletion.
func (n *HeaderNames) requestNames() []string {
	return []string{n.Session, n.Task, n.Train, n.Tags, n.Reward, n.Commit}
}

// clientKey returns the API key the agent presented, in any header spelling:
// "Authorization: Bearer KEY" (scheme in any case), "X-Api-Key: KEY"
// (Anthropic) or "Api-Key: KEY" (Azure OpenAI).
func clientKeys(h *fasthttp.RequestHeader) []string {
	var keys []string
	for k, v := range h.All() {
		switch {
		case foldEq(k, "Authorization"):
			if len(v) > 7 && foldEq(v[:7], "Bearer ") {
				keys = append(keys, string(bytes.TrimSpace(v[7:])))
			}
		case foldEq(k, "X-Api-Key"), foldEq(k, "Api-Key"):
			keys = append(keys, string(bytes.TrimSpace(v)))
		}
	}
	return keys
}
