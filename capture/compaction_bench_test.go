package capture

import (
	"strings"
	"testing"
)

// longAgentRequest is a coding agent's request: a 64 KB system prompt of
// paths and commands, as JavaScript writes JSON.
func longAgentRequest() []byte {
	var sys strings.Builder
	for sys.Len() < 64<<10 {
		sys.WriteString(quotedLine + "\n")
	}
	return marshalNoHTML(map[string]any{"model": "m", "messages": []map[string]string{
		{"role": "system", "content": sys.String()}, {"role": "user", "content": "fix it"}}})
}

const quotedLine = "When you edit src/app/main.go, run `go test ./...` and read the output before answering the user's request."

// agentReply is eight lines a coding agent writes, none in its request.
const agentReply = "I changed internal/server/handler.go so that the request body is read once and closed on every path.\n" +
	"- Updated `internal/server/handler.go` to close the body on every path (it was leaking on errors).\n" +
	"- The tests in handler_test.go now cover the error paths; `go test ./...` passes locally.\n" +
	"The remaining failure is in pkg/cache: it expects a warm cache, which the CI machine does not have.\n" +
	"1. Read the configuration once at start-up and pass it down instead of reading the file per request.\n" +
	"2. Replace the global mutex with a sync.Map keyed by tenant, so unrelated tenants do not contend.\n" +
	"Let me know if you want me to also update the documentation in docs/server.md for the new flag.\n" +
	"there are no other callers of the old function, so it was removed along with its tests and docs.\n"

// BenchmarkReplyMarksLongPrompt is the marks of a coding agent's reply
// (eight lines of its own) against its 64 KB request, on the request's path.
func BenchmarkReplyMarksLongPrompt(b *testing.B) {
	req, ch := longAgentRequest(), &Choice{Content: agentReply}
	b.SetBytes(int64(len(req)))
	for b.Loop() {
		_ = replyMarks(req, ch)
	}
}

// BenchmarkReplyMarksQuoted is BenchmarkReplyMarksLongPrompt with a line
// quoted from the request first: its check decodes the request's strings.
func BenchmarkReplyMarksQuoted(b *testing.B) {
	req, ch := longAgentRequest(), &Choice{Content: quotedLine + "\n" + agentReply}
	b.SetBytes(int64(len(req)))
	for b.Loop() {
		_ = replyMarks(req, ch)
	}
}
