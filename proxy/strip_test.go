package proxy

import "testing"

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
