package proxy

import (
	"encoding/json"
	"strings"
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

// A key hone sets that the agent sent twice reaches the engine once, with
// hone's value: sjson alone would set the first, and vLLM (like
// encoding/json) reads the last, the agent's.
func TestRewriteDuplicateKeys(t *testing.T) {
	body := []byte(`{"model":"m","cache_salt":"a","messages":[],"cache_salt":"b","logprobs":false,"model":"m","logprobs":false,"stream":false}`)
	a, model, ok := inspect(body, chatDialect)
	if !ok || a.cacheSalt != `"b"` || a.dups == 0 {
		t.Fatalf("inspect: %v %+v", ok, a)
	}
	salt := keySalt("k")
	out, err := rewriteRequest(body, chatDialect, a, model, "auto", "t", true, salt)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got["cache_salt"] != agentSalt(salt, `"b"`) || got["logprobs"] != true || got["model"] != "t" || got["return_token_ids"] != true {
		t.Fatalf("the engine reads %v from %s", got, out)
	}
	for _, k := range takenKeys {
		if n := countKey(out, k); n > 1 {
			t.Errorf("%d %q keys: %s", n, k, out)
		}
	}
	// Go's encoding/json (the embedded engine) matches keys in any case
	for _, body := range []string{
		`{"model":"m","cache_salt":"a","messages":[],"CACHE_SALT":null}`,
		`{"model":"m","messages":[],"Cache_Salt":"raw"}`,
		`{"model":"m","cache_salt":"a","messages":[],"cache_ſalt":"raw"}`,
	} {
		a, model, _ := inspect([]byte(body), chatDialect)
		out, err := rewriteRequest([]byte(body), chatDialect, a, model, "auto", "t", true, salt)
		if err != nil {
			t.Fatal(err)
		}
		var req struct {
			CacheSalt *string `json:"cache_salt"`
			Model     string  `json:"model"`
		}
		if err := json.Unmarshal(out, &req); err != nil {
			t.Fatal(err)
		}
		if req.CacheSalt == nil || !strings.HasPrefix(*req.CacheSalt, "hone-") || req.Model != "t" {
			t.Errorf("%s: encoding/json reads cache_salt %v, model %q from %s", body, req.CacheSalt, req.Model, out)
		}
	}
}

func TestTakenBits(t *testing.T) {
	for i, k := range takenKeys {
		if takenBit(k) != 1<<i {
			t.Errorf("takenBit(%q) = %d, want %d", k, takenBit(k), 1<<i)
		}
	}
	if takenBit("messages") != 0 {
		t.Error("messages has a bit")
	}
}

// A top-level key the agent repeats reaches every reader as the engine
// reads it (the last member): the engine's body, the captured request and
// the translations see the same conversation.
func TestRepeatedKeysLastOnly(t *testing.T) {
	stub := newStub(t)
	h := startHone(t, nil, stub)
	first, second := `[{"role":"user","content":"first"}]`, `[{"role":"user","content":"second"}]`
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"m","messages":` + first + `,"max_tokens":3,"messages":` + second + `}`},
		{"/v1/chat/completions", `{"model":"m","mess\u0061ges":` + first + `,"messages":` + second + `}`},
		{"/v1/messages", `{"model":"m","max_tokens":3,"messages":` + first + `,"messages":` + second + `}`},
	} {
		if r := post(t, h.url, tc.path, []byte(tc.body), nil); r.status != 200 {
			t.Fatalf("%s %s: %d %s", tc.path, tc.body, r.status, r.body)
		}
		up, _ := stub.lastRequest()
		if n := countKey(up, "messages"); n != 1 || !strings.Contains(string(up), "second") || strings.Contains(string(up), "first") {
			t.Errorf("%s %s: the engine got %s", tc.path, tc.body, up)
		}
	}
	for _, c := range waitCalls(t, h.rec, 3) {
		if req := string(c.Request); countKey(c.Request, "messages") != 1 || strings.Contains(req, "first") {
			t.Errorf("captured request %s", req)
		}
	}
	body := `{"a":1,"b":[1,{"a":2}],"a":{"x":1},"c":null,"b":"z"}`
	if got, want := string(lastOfEach([]byte(body))), `{"a":{"x":1},"c":null,"b":"z"}`; got != want {
		t.Errorf("lastOfEach(%s) = %s, want %s", body, got, want)
	}
}
