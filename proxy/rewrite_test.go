package proxy

import (
	"testing"

	"github.com/tidwall/gjson"
)

func TestAppendMembers(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{}`, `{"a":1,"b":2}`},
		{`{ }`, `{ "a":1,"b":2}`},
		{`{"x":{"y":{}}}`, `{"x":{"y":{}},"a":1,"b":2}`},
		{"{\"x\":[1,2]\n}\n", "{\"x\":[1,2]\n,\"a\":1,\"b\":2}\n"},
	} {
		got := string(appendMembers(nil, []byte(tc.in), []string{`"a":1`, `"b":2`}))
		if got != tc.want || !gjson.Valid(got) {
			t.Errorf("appendMembers(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A request's absent fields are appended; present ones are replaced in
// place, never duplicated.
func TestRewriteAppendsOrReplaces(t *testing.T) {
	body := []byte(`{"model":"m","messages":[],"logprobs":false,"stream":true}`)
	a, model, _ := inspect(body, chatDialect)
	out, err := rewriteRequest(body, chatDialect, a, model, "auto", "t", true, "")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"t","messages":[],"logprobs":true,"stream":true,"return_token_ids":true,"stream_options":{"include_usage":true}}`
	if string(out) != want {
		t.Fatalf("rewrite:\n got %s\nwant %s", out, want)
	}
}
