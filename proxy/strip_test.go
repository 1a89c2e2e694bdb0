package proxy

import (
	"testing"

	"github.com/hone-rl/hone/capture"
)

// strip returns body stripped as by stripInto, or body itself when nothing
// changes (for tests).
func strip(body []byte, spans []injected, a asked) []byte {
	if !stripping(spans, a) {
		return body
	}
	return stripInto(nil, body, spans, a)
}

// TestPromptIDSpans: the spans a record stores as null are the prompt ids,
// top-level and per choice, and nothing else; an answer without them has
// none.
func TestPromptIDSpans(t *testing.T) {
	for _, tc := range []struct {
		chat       bool
		body, want string
	}{
		{true, `{"choices":[{"index":0,"message":{"content":"hi"},"logprobs":{"content":[{"token":"hi","logprob":-1}]},"token_ids":[1]}],"prompt_token_ids":[2,3]}`,
			`{"choices":[{"index":0,"message":{"content":"hi"},"logprobs":{"content":[{"token":"hi","logprob":-1}]},"token_ids":[1]}],"prompt_token_ids":null}`},
		{false, `{"choices":[{"index":0,"text":"x","prompt_token_ids":[1,2],"token_ids":[5]},{"index":1,"text":"y","prompt_token_ids":[1, 2],"token_ids":[6]}]}`,
			`{"choices":[{"index":0,"text":"x","prompt_token_ids":null,"token_ids":[5]},{"index":1,"text":"y","prompt_token_ids":null,"token_ids":[6]}]}`},
		{true, `{"choices":[{"index":0,"message":{"content":"hi"},"token_ids":[1]}],"prompt_token_ids":null}`, ""},
	} {
		d := completionsDialect
		if tc.chat {
			d = chatDialect
		}
		body := []byte(tc.body)
		a := accumulator{dialect: d}
		a.addBody(body)
		spans := promptIDSpans(a.injected)
		if tc.want == "" {
			if len(spans) != 0 {
				t.Errorf("%s: spans %v", tc.body, spans)
			}
			continue
		}
		got := nulled(body, spans)
		if string(got) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.body, got, tc.want)
		}
		if string(body) != tc.body {
			t.Errorf("the answer itself changed: %s", body)
		}
	}
}

// nulled is body with spans written as null, as the capture store writes a
// record's response.
func nulled(body []byte, spans [][2]int) []byte {
	var out []byte
	last := 0
	for _, sp := range spans {
		out = append(append(out, body[last:sp[0]]...), "null"...)
		last = sp[1]
	}
	return append(out, body[last:]...)
}

// TestTexts: deltas appended through texts read as the concatenation, a
// value set in between starts over from it, and strings handed out before
// never change.
func TestTexts(t *testing.T) {
	var tx texts
	var s string
	var seen []string
	want := ""
	for i := range 200 {
		d := string(rune('a' + i%26))
		tx.set(&s, d, true)
		want += d
		seen = append(seen, s)
		if i == 100 {
			tx.set(&s, "reset", false)
			want = "reset"
		}
	}
	if s != want {
		t.Fatalf("got %q, want %q", s, want)
	}
	for i, v := range seen {
		if len(v) > 0 && v[len(v)-1] != byte('a'+i%26) {
			t.Fatalf("string %d changed to %q", i, v)
		}
	}
	chunks := []*capture.Choice{{}}
	tx.set(&chunks[0].Content, "x", true)
	moved := *chunks[0] // a choices slice that grew: the field at a new address
	tx.set(&moved.Content, "y", true)
	if moved.Content != "xy" || chunks[0].Content != "x" {
		t.Fatalf("after a move: %q and %q", moved.Content, chunks[0].Content)
	}
}
