package peers

import (
	"strings"
	"testing"
)

// canonStream (with byChoice for n > 1) equates streams that differ only in
// how vLLM coalesced tokens into events and interleaved the choices, tool-call
// arguments included, and still tells a different argument apart.
func TestCanonStreamCoalescing(t *testing.T) {
	ev := func(choice, args string) string {
		return `data: {"id":"ID","choices":[{"index":` + choice + `,"delta":{"content":null,"tool_calls":[{"index":0,"function":{"arguments":"` + args + `"}}]},"logprobs":null,"finish_reason":null}]}`
	}
	stream := func(evs ...string) string { return strings.Join(append(evs, "data: [DONE]"), "\n\n") + "\n\n" }
	canon := func(s string) string { return canonStream(strings.ReplaceAll(byChoice(s), "\n", "\n\n")) }
	a := stream(ev("0", `{\"x`), ev("1", `{`), ev("0", `\": 3\"`), ev("1", `\"y\": 1}`), ev("0", `}`))
	b := stream(ev("1", `{\"y\": 1}`), ev("0", `{\"x\": 3`), ev("0", `\"}`))
	if canon(a) != canon(b) {
		t.Errorf("same arguments, coalesced and interleaved differently:\n%s\n---\n%s", canon(a), canon(b))
	}
	c := stream(ev("1", `{\"y\": 2}`), ev("0", `{\"x\": 3`), ev("0", `\"}`))
	if canon(a) == canon(c) {
		t.Error("different arguments compare equal")
	}
}

// Two streams with as many events, split at other tokens (vLLM's coalescing
// moved), are equal in canonStream; a different text is not.
func TestCanonStreamSameCountOtherSplit(t *testing.T) {
	ev := func(text, finish string) string {
		return `data: {"id":"ID","choices":[{"index":0,"delta":{"reasoning":"` + text + `"},"logprobs":null,"finish_reason":` + finish + `}]}`
	}
	stream := func(evs ...string) string { return strings.Join(append(evs, "data: [DONE]"), "\n\n") + "\n\n" }
	a := stream(ev(`\n\n`, "null"), ev(`\n`, "null"), ev(`\n`, `"length"`))
	b := stream(ev(`\n`, "null"), ev(`\n`, "null"), ev(`\n\n`, `"length"`))
	if a == b || canonStream(a) != canonStream(b) {
		t.Errorf("same text, split at other tokens:\n%s\n---\n%s", canonStream(a), canonStream(b))
	}
	c := stream(ev(`\n`, "null"), ev(`\n`, "null"), ev(`\n`, `"length"`))
	if canonStream(a) == canonStream(c) {
		t.Error("different text compares equal")
	}
}
