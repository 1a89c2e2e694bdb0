package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/hone-rl/hone/capture"
)

// FuzzTokenizeReply: the engine's /tokenize reply, as (*Server).tokenize
// reads it for the prompt ids of a call its engine returned none for. Any
// reply must not panic; ids come back only from a 200 that is a /tokenize
// reply (a JSON object whose "tokens" is a list of token ids, as vLLM and
// SGLang send) and are exactly that list; anything else (another status,
// garbage, truncated JSON, tokens that are not ids) is an error, so the
// call is recorded without prompt ids rather than with wrong ones.
func FuzzTokenizeReply(f *testing.F) {
	for _, s := range []struct {
		status uint8
		body   string
	}{
		{0, `{"count":2,"max_model_len":1024,"tokens":[42,75],"token_strs":null}`}, // engine/testdata/tokenize.golden
		{0, `{"count":5,"max_model_len":40960,"tokens":[151644,872,198,6023,151645]}`},
		{0, `{"count":0,"max_model_len":4096,"tokens":[]}`},
		{0, `{"count":2,"max_model_len":4096,"tokens":[1,2],"token_strs":["a","b"]}`},
		{0, `{"tokens":[2147483647], "count":1}`},
		{1, `{"error":{"message":"Either 'prompt' or 'messages' must be provided.","type":"BadRequestError","param":"prompt","code":400}}`},
		{2, `{"error":{"message":"The model ` + "`x`" + ` does not exist.","type":"NotFoundError","param":"model","code":404}}`},
		{3, `Internal Server Error`},
		{4, `{"tokens":[1,2,3]}`},
	} {
		f.Add(s.status, []byte(s.body))
	}
	statuses := []int{200, 400, 404, 500, 201, 204, 503}
	var mu sync.Mutex
	var status int
	var reply []byte
	eng := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		code, body := status, reply
		mu.Unlock()
		if r.URL.Path != "/tokenize" {
			code = 404
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = w.Write(body)
	}))
	f.Cleanup(eng.Close)
	s := &Server{}
	e := &engine{url: eng.URL, host: eng.Listener.Addr().String()}
	rec := &capture.Call{Route: capture.RouteChat, Upstream: "m",
		Request: []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)}
	f.Fuzz(func(t *testing.T, st uint8, body []byte) {
		mu.Lock()
		status, reply = statuses[int(st)%len(statuses)], body
		mu.Unlock()
		ids, err := s.tokenize(context.Background(), e, rec)
		want, ok := tokenizeReplyIDs(body)
		if status != 200 || !ok {
			if err == nil {
				t.Fatalf("status %d %q: ids %v and no error; want an error (the call must not be recorded with these ids)", status, body, ids)
			}
			return
		}
		if err != nil || !slices.Equal(ids, want) {
			t.Fatalf("status 200 %q: ids %v, error %v; want %v", body, ids, err, want)
		}
	})
}

// tokenizeReplyIDs is the reference reading of a /tokenize reply: valid
// JSON, an object with one "tokens" key whose value is a list of integers
// in [0, 2^31).
func tokenizeReplyIDs(body []byte) ([]int32, bool) {
	if !json.Valid(body) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var tokens json.RawMessage
	n := 0
	for dec.More() {
		key, err := dec.Token()
		var val json.RawMessage
		if err != nil || dec.Decode(&val) != nil {
			return nil, false
		}
		if key == "tokens" {
			tokens, n = val, n+1
		}
	}
	if n != 1 {
		return nil, false
	}
	var list []any
	ld := json.NewDecoder(bytes.NewReader(tokens))
	ld.UseNumber()
	if err := ld.Decode(&list); err != nil || list == nil {
		return nil, false
	}
	ids := make([]int32, 0, len(list))
	for _, x := range list {
		num, isNum := x.(json.Number)
		if !isNum {
			return nil, false
		}
		v, err := num.Int64()
		if err != nil || v < 0 || v > math.MaxInt32 {
			return nil, false
		}
		ids = append(ids, int32(v))
	}
	return ids, true
}
