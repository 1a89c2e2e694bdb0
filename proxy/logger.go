package proxy

import (
	"fmt"
	"log/slog"
	"regexp"
	"strings"
)

// serverLog is the data plane's fasthttp logger. fasthttp's own prints
// connection errors with the request head they were reading, credentials
// included; this one keeps the message, cuts the echoed bytes and redacts
// anything that looks like a credential.
type serverLog struct{ log *slog.Logger }

func (l serverLog) Printf(format string, args ...any) {
	l.log.Warn("data plane connection", "detail", redact(fmt.Sprintf(format, args...)))
}

var (
	// echoed request bytes in fasthttp's parse errors ("... contents: ..."
	// or a quoted request line)
	echoMarkers  = []string{"contents:", "Buffer size", "buffer size"}
	quotedLong   = regexp.MustCompile(`"[^"]{48,}"`)
	credential   = regexp.MustCompile(`(?i)(authorization|x-api-key|api-key|cookie|key|token)(\s*[:=]\s*)((bearer|basic)\s+)?[^\s"',;&]+`)
	bearerScheme = regexp.MustCompile(`(?i)\b(bearer|basic)\s+[^\s"',;&]+`)
)

// redact removes request bytes and credentials from a log message.
func redact(s string) string {
	for _, m := range echoMarkers {
		if i := strings.Index(s, m); i >= 0 {
			s = s[:i] + "[request bytes omitted]"
		}
	}
	s = quotedLong.ReplaceAllString(s, `"[omitted]"`)
	s = credential.ReplaceAllString(s, "${1}${2}[redacted]")
	return bearerScheme.ReplaceAllString(s, "${1} [redacted]")
}
