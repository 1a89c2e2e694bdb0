package engine

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// FuzzTokenize posts a /tokenize body, then a /detokenize body (vLLM's
// TokenizeCompletionRequest / TokenizeChatRequest and DetokenizeRequest
// shapes). Neither may panic or answer 5xx: a 200 is vLLM's reply shape with
// ids in the vocabulary, anything else a vLLM JSON 4xx; the engine keeps
// serving.
func FuzzTokenize(f *testing.F) {
	for _, s := range [][2]string{
		{`{"model":"test-model","prompt":"Hi"}`, `{"model":"test-model","tokens":[42,75]}`},
		{`{"prompt":"Hello, world!","add_special_tokens":false,"return_token_strs":true}`, `{"tokens":[]}`},
		{`{"model":"test-model","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"add_generation_prompt":true}`,
			`{"tokens":[0,1,2,3]}`},
		{`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":"he"}],"continue_final_message":true,"add_generation_prompt":false}`,
			`{"tokens":[-1]}`},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"chat_template_kwargs":{"enable_thinking":false},"return_token_strs":true}`,
			`{"tokens":[2147483647]}`},
		{`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"1"}]}`,
			`{"model":"nope","tokens":[1]}`},
		{`{"model":"nope","prompt":"x"}`, `{"tokens":"x"}`},
		{`{"prompt":"a","messages":[]}`, `{"tokens":null}`},
		{`{"messages":"hi"}`, `[]`},
		{`{}`, `{"tokens":[1.5]}`},
		{`{"prompt":null}`, ``},
		{`{"prompt":"\u0000\ud800"}`, `{"tokens":[1]} {"tokens":[2]}`},
		{``, `{"tokens":[1,2`},
	} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	if b, err := os.ReadFile(filepath.Join("testdata", "tokenize.golden")); err == nil {
		var r tokenizeResponse
		if json.Unmarshal(b, &r) == nil {
			d, _ := json.Marshal(map[string]any{"tokens": r.Tokens})
			f.Add([]byte(`{"prompt":"Hi"}`), d)
		}
	}
	e, _ := newTestEngine(f, DefaultOptions())
	h := e.Handler()
	f.Fuzz(func(t *testing.T, tok, detok []byte) {
		rec := serve(h, http.MethodPost, "/tokenize", tok)
		if rec.Code == http.StatusOK {
			var r struct {
				Count       *int     `json:"count"`
				MaxModelLen *int     `json:"max_model_len"`
				Tokens      []int32  `json:"tokens"`
				TokenStrs   []string `json:"token_strs"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || r.Count == nil || r.MaxModelLen == nil ||
				*r.Count != len(r.Tokens) || *r.MaxModelLen != e.maxModelLen {
				t.Fatalf("/tokenize %q: bad reply %s", tok, rec.Body.String())
			}
			for _, id := range r.Tokens {
				if id < 0 || int(id) >= e.vocab {
					t.Fatalf("/tokenize %q: id %d outside the vocabulary: %s", tok, id, rec.Body.String())
				}
			}
			if r.TokenStrs != nil && len(r.TokenStrs) != len(r.Tokens) {
				t.Fatalf("/tokenize %q: %d token_strs for %d tokens", tok, len(r.TokenStrs), len(r.Tokens))
			}
		} else {
			checkClientError(t, "/tokenize", tok, rec)
		}
		rec = serve(h, http.MethodPost, "/detokenize", detok)
		if rec.Code == http.StatusOK {
			var r struct {
				Prompt *string `json:"prompt"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || r.Prompt == nil {
				t.Fatalf("/detokenize %q: bad reply %s", detok, rec.Body.String())
			}
		} else {
			checkClientError(t, "/detokenize", detok, rec)
		}
		checkServing(t, h)
	})
}
