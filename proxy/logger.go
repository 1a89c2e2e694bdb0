package proxy

import (
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"unicode/utf8"
)

// serverLog is the data plane's fasthttp logger. fasthttp prints connection
// errors with the request bytes it was parsing, credentials included; this
// one keeps the error's kind and drops every byte of the request (redact).
type serverLog struct{ log *slog.Logger }

func (l serverLog) Printf(format string, args ...any) {
	l.log.Warn("data plane connection", "detail", redact(fmt.Sprintf(format, args...)))
}

// redact returns a fasthttp (or net, mime/multipart, net/textproto) error
// message with no byte of the request in it, whatever the request looked
// like: no byte of the request head (nor of a body fasthttp parsed) ever
// reaches a log line. It does not look for credentials, which need not be
// spelt as a header ("X-Api-Key sk-…", "Authorization\tBearer sk-…", a query
// string, a folded line): it cuts the bytes wherever fasthttp quotes them.
//
// Every error of fasthttp v1.78 (header.go, headerscanner.go, http.go,
// uri.go, bytesconv.go, server.go, workerpool.go) and of the standard
// library's parsers it calls (net/textproto, mime/multipart) that carries
// request bytes carries them as Go-quoted strings (%q). SecureErrorLogMessage,
// which the data plane sets, drops only those marked (s); the others quote
// the request whatever it says:
//
//	error when reading request headers: <cause>: buffer size=N[, contents: %q | %q...%q] (s)
//	cannot find http request method in %q (s), unsupported http request method %q in %q (s)
//	cannot find whitespace in the first line of request %q
//	unsupported http version %q[ in %q (s)]
//	request uri cannot be empty in %q (s)
//	invalid request uri %q[ in %q: … (s)]
//	invalid header key %q, invalid header value %q
//	forbidden trailer key %q, invalid trailer value %q
//	unsupported transfer-encoding: %q (s)
//	invalid headers, headers cannot start with space or tab (no bytes)
//	malformed MIME header line: %q, malformed MIME header: missing colon: %q
//	malformed MIME header initial line: %q (multipart bodies)
//	multipart: expecting a new Part; got line %q, multipart: unexpected line in Next(): %q
//	invalid scheme %q, invalid host %q[ with multiple port delimiters], invalid port %q after host
//	cannot find dot in ip string %q, cannot parse ip string %q: …
//	invalid character %q after chunk size, unexpected char %q at the end of chunk size: expected %q
//	non-zero body for non-post request: body=%q (s; client side)
//	invalid response status code %q: response %q (client side)
//	error when serving connection %q<->%q: <error> (the local and remote addresses)
//
// and RequestCtx.Logger prefixes its lines with the method and full URI
// unquoted ("#%016X - local<->remote - METHOD URI - msg"). So redact, in
// order:
//
//  1. cuts everything after "contents:" (fasthttp's buffer snippet);
//  2. cuts everything after a RequestCtx.Logger prefix's addresses;
//  3. replaces every Go-quoted string, any length, escapes included, by
//     "[omitted]", except an ip:port (the connection's addresses), and a
//     quoted body byte ('x', '\r') by '?';
//  4. cuts the rest of the message at a quote left unpaired, at a control
//     byte and at invalid UTF-8: raw request bytes that were not quoted;
//  5. cuts the rest of the message after a known parse-error prefix that is
//     not followed by an omitted string (should a later fasthttp stop
//     quoting what follows it);
//  6. as a last layer, redacts credential-looking words: a credential header
//     name followed by any separator (or none but blanks) and a value, and
//     a Bearer or Basic token.
//
// The fixed text stays (the error's kind: "invalid header key", "missing
// colon", "Buffer size=N", the addresses), so logs stay useful.
func redact(s string) string {
	if i := strings.Index(s, contentsMarker); i >= 0 {
		s = s[:i+len(contentsMarker)] + " " + cutMark
	}
	if loc := ctxLoggerPrefix.FindStringIndex(s); loc != nil {
		s = s[:loc[1]] + cutMark
	}
	s = goQuoted.ReplaceAllStringFunc(s, func(q string) string {
		if isAddress(q[1 : len(q)-1]) {
			return q
		}
		return omitted
	})
	s = goRune.ReplaceAllString(s, "${1}'?'")
	s = cutRaw(s)
	s = cutAfterPrefixes(s)
	s = credential.ReplaceAllString(s, "${1}${2}[redacted]")
	s = credentialBlank.ReplaceAllString(s, "${1}${2}[redacted]")
	return bearerScheme.ReplaceAllString(s, "${1} [redacted]")
}

const (
	omitted        = `"[omitted]"`
	cutMark        = "[request bytes omitted]"
	contentsMarker = "contents:"
)

var (
	// a Go-quoted string as strconv.Quote writes it: no raw quote, any
	// escape (\", \\, \x00, \u2028, …) inside
	goQuoted = regexp.MustCompile(`(?s)"(?:[^"\\]|\\.)*"`)
	// a Go-quoted rune: %q of a request byte in the chunked body's errors
	// ("invalid character %q after chunk size", "unexpected char %q at the
	// end of chunk size: expected %q"; "Expected" before fasthttp 1.78)
	goRune = regexp.MustCompile(`\b(char(?:acter)? |[Ee]xpected )'(?:[^'\\\x00-\x1f]|\\(?:x[0-9A-Fa-f]{2}|u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|[0-7]{3}|[abfnrtv\\'"]))'`)
	// RequestCtx.String in RequestCtx.Logger's lines: what follows the
	// addresses is the method and the full URI, unquoted
	ctxLoggerPrefix = regexp.MustCompile(`#[0-9A-F]{16} - [^ ]*<->[^ ]* - `)
	// ip:port, [ipv6]:port: the connection's addresses, which fasthttp
	// quotes too. No token of eight letters or digits fits in one.
	address = regexp.MustCompile(`^(?:[0-9]{1,3}(?:\.[0-9]{1,3}){3}|\[[0-9A-Fa-f:.]{2,45}\]):[0-9]{1,5}$`)

	// parse errors followed by request bytes (quoted today), matched in any
	// case: fasthttp 1.70 wrote "unsupported HTTP version", 1.78 writes
	// "unsupported http version"
	payloadPrefixes = []string{
		"request method in ", "unsupported http request method ", "first line of request ",
		"unsupported http version ", "requesturi cannot be empty in ", "request uri cannot be empty in ",
		"invalid requesturi ", "invalid request uri ", "invalid header key ", "invalid header value ",
		"unsupported transfer-encoding: ", "forbidden trailer key ", "invalid trailer value ",
		"invalid response status code ", ": response ",
		"malformed mime header line: ", "missing colon: ", "malformed mime header initial line: ",
		"got line ", "unexpected line in next(): ", "invalid scheme ", "invalid host ", "invalid port ",
		"ipstr ", "ip string ", "invalid character ", "unexpected char ", "body=",
	}

	// second layer: a credential header however it is separated from its
	// value, and bearer or basic tokens
	credential      = regexp.MustCompile(`(?i)\b(proxy-authorization|authorization|x-api-key|api-key|api_key|apikey|access_token|cookie|key|token|secret|password)(\s*[:=]\s*)((?:bearer|basic)\s+)?[^\s"',;&]+`)
	credentialBlank = regexp.MustCompile(`(?i)\b(proxy-authorization|authorization|x-api-key|api-key|cookie)(\s+)((?:bearer|basic)\s+)?[^\s"',;&\[]+`)
	bearerScheme    = regexp.MustCompile(`(?i)\b(bearer|basic)\s+[^\s"',;&\[]+`)
)

func isAddress(s string) bool { return len(s) <= 53 && address.MatchString(s) }

// cutRaw cuts s at the first quote left after the quoted strings were
// replaced, the first control byte and the first invalid UTF-8: request
// bytes that reached the message without quoting.
func cutRaw(s string) string {
	for i := 0; i < len(s); {
		c := s[i]
		if c == '"' {
			if strings.HasPrefix(s[i:], omitted) {
				i += len(omitted)
				continue
			}
			if j := strings.IndexByte(s[i+1:], '"'); j >= 0 && isAddress(s[i+1:i+1+j]) {
				i += j + 2
				continue
			}
			return s[:i] + cutMark
		}
		if c < 0x20 || c == 0x7f {
			return s[:i] + cutMark
		}
		if c < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			return s[:i] + cutMark
		}
		i += n
	}
	return s
}

// cutAfterPrefixes cuts the message after a parse-error prefix whose
// request bytes are not an omitted string.
func cutAfterPrefixes(s string) string {
	lower := asciiLower(s)
	for _, p := range payloadPrefixes {
		for from := 0; ; {
			i := strings.Index(lower[from:], p)
			if i < 0 {
				break
			}
			j := from + i + len(p)
			if !strings.HasPrefix(s[j:], omitted) && !strings.HasPrefix(s[j:], "'?'") {
				if strings.HasPrefix(s[j:], cutMark) {
					return s
				}
				return s[:j] + cutMark
			}
			from = j
		}
	}
	return s
}

// asciiLower lowercases s's ASCII letters only, so that its offsets are s's.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
