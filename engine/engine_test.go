package engine

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
)

type chatResp struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role      string          `json:"role"`
			Content   *string         `json:"content"`
			Reasoning *string         `json:"reasoning"`
			ToolCalls json.RawMessage `json:"tool_calls"`
		} `json:"message"`
		Logprobs *struct {
			Content []struct {
				Token       string  `json:"token"`
				Logprob     float64 `json:"logprob"`
				Bytes       []int   `json:"bytes"`
				TopLogprobs []struct {
					Token   string  `json:"token"`
					Logprob float64 `json:"logprob"`
				} `json:"top_logprobs"`
			} `json:"content"`
		} `json:"logprobs"`
		FinishReason string  `json:"finish_reason"`
		StopReason   any     `json:"stop_reason"`
		TokenIDs     []int32 `json:"token_ids"`
	} `json:"choices"`
	PromptTokenIDs []int32 `json:"prompt_token_ids"`
	Usage          struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
	SystemFingerprint *string `json:"system_fingerprint"`
}

type complResp struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Choices []struct {
		Index    int    `json:"index"`
		Text     string `json:"text"`
		Logprobs *struct {
			TextOffset    []int                `json:"text_offset"`
			TokenLogprobs []float64            `json:"token_logprobs"`
			Tokens        []string             `json:"tokens"`
			TopLogprobs   []map[string]float64 `json:"top_logprobs"`
		} `json:"logprobs"`
		FinishReason   string  `json:"finish_reason"`
		StopReason     any     `json:"stop_reason"`
		TokenIDs       []int32 `json:"token_ids"`
		PromptTokenIDs []int32 `json:"prompt_token_ids"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

var hello = []map[string]any{{"role": "user", "content": "Say hello."}}

func postChat(t *testing.T, url string, body map[string]any) chatResp {
	t.Helper()
	if body["messages"] == nil {
		body["messages"] = hello
	}
	code, b := post(t, url+"/v1/chat/completions", body)
	if code != 200 {
		t.Fatalf("chat: %d %s", code, b)
	}
	var r chatResp
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func complete(t *testing.T, url string, body map[string]any) complResp {
	t.Helper()
	code, b := post(t, url+"/v1/completions", body)
	if code != 200 {
		t.Fatalf("completions: %d %s", code, b)
	}
	var r complResp
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestChatGreedyShapeAndTokenIDs(t *testing.T) {
	e, srv := newTestEngine(t, DefaultOptions())
	r := postChat(t, srv.URL, map[string]any{"temperature": 0, "max_tokens": 12, "return_token_ids": true})
	if !strings.HasPrefix(r.ID, "chatcmpl-") || r.Object != "chat.completion" || r.Model != testModel || r.SystemFingerprint != nil {
		t.Fatalf("bad envelope %+v", r)
	}
	c := r.Choices[0]
	if c.Message.Role != "assistant" || c.FinishReason != "length" || len(c.TokenIDs) != 12 {
		t.Fatalf("bad choice %+v", c)
	}
	var content []int32
	for _, id := range c.TokenIDs {
		if !e.tok.IsSpecial(id) {
			content = append(content, id)
		}
	}
	if got := e.tok.Decode(content); c.Message.Content == nil || got != *c.Message.Content {
		t.Fatalf("token_ids decode to %q, content %v", got, c.Message.Content)
	}
	code, tb := post(t, srv.URL+"/tokenize", map[string]any{"model": testModel, "messages": hello})
	var tr tokenizeResponse
	if err := json.Unmarshal(tb, &tr); code != 200 || err != nil {
		t.Fatalf("tokenize: %d %s", code, tb)
	}
	if !equalIDs(tr.Tokens, r.PromptTokenIDs) || tr.Count != r.Usage.PromptTokens || tr.MaxModelLen != 1024 {
		t.Fatalf("prompt ids %v != tokenize %v", r.PromptTokenIDs, tr.Tokens)
	}
	if r.Usage.CompletionTokens != 12 || r.Usage.TotalTokens != r.Usage.PromptTokens+12 {
		t.Fatalf("usage %+v", r.Usage)
	}
	again := postChat(t, srv.URL, map[string]any{"temperature": 0, "max_tokens": 12, "return_token_ids": true})
	if !equalIDs(again.Choices[0].TokenIDs, c.TokenIDs) {
		t.Fatalf("greedy not deterministic")
	}
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestSeedReproducibleAndN(t *testing.T) {
	_, srv := newTestEngine(t, DefaultOptions())
	req := func(seed int) map[string]any {
		return map[string]any{"prompt": "abc", "temperature": 1.0, "top_p": 0.9, "top_k": 50, "seed": seed,
			"max_tokens": 16, "n": 2, "return_token_ids": true}
	}
	a, b, c := complete(t, srv.URL, req(7)), complete(t, srv.URL, req(7)), complete(t, srv.URL, req(8))
	if len(a.Choices) != 2 || a.Choices[1].Index != 1 {
		t.Fatalf("n=2 gave %d choices", len(a.Choices))
	}
	for i := range a.Choices {
		if !equalIDs(a.Choices[i].TokenIDs, b.Choices[i].TokenIDs) {
			t.Fatalf("same seed differs in choice %d", i)
		}
	}
	if equalIDs(a.Choices[0].TokenIDs, c.Choices[0].TokenIDs) {
		t.Fatalf("different seeds gave identical samples")
	}
	if equalIDs(a.Choices[0].TokenIDs, a.Choices[1].TokenIDs) {
		t.Fatalf("the two choices of one request are identical")
	}
	if a.Usage.PromptTokens != 3 || a.Usage.CompletionTokens != 32 {
		t.Fatalf("usage %+v", a.Usage)
	}
}

func TestStopStrings(t *testing.T) {
	_, srv := newTestEngine(t, DefaultOptions())
	base := complete(t, srv.URL, map[string]any{"prompt": "hello", "temperature": 0, "max_tokens": 40})
	full := base.Choices[0].Text
	if len(full) < 10 {
		t.Fatalf("greedy output too short: %q", full)
	}
	stop := full[5:8]
	cut := strings.Index(full, stop)
	for _, stream := range []bool{false, true} {
		body := map[string]any{"prompt": "hello", "temperature": 0, "max_tokens": 40, "stop": []string{"\x00never", stop}, "stream": stream}
		var text, finish string
		var reason any
		if stream {
			text, finish, reason = streamCompletionText(t, srv.URL, body)
		} else {
			r := complete(t, srv.URL, body)
			text, finish, reason = r.Choices[0].Text, r.Choices[0].FinishReason, r.Choices[0].StopReason
		}
		if text != full[:cut] || finish != "stop" || reason != stop {
			t.Fatalf("stream=%v: got %q %s %v, want %q stop %q", stream, text, finish, reason, full[:cut], stop)
		}
	}
}

func TestLogprobsMatchModel(t *testing.T) {
	e, srv := newTestEngine(t, DefaultOptions())
	r := postChat(t, srv.URL, map[string]any{"temperature": 0.8, "seed": 3, "max_tokens": 8, "logprobs": true,
		"top_logprobs": 3, "return_token_ids": true})
	c := r.Choices[0]
	lm := e.model().(*hashLM)
	ctx := append([]int32(nil), r.PromptTokenIDs...)
	for i, id := range c.TokenIDs {
		logits := lm.logits(ctx, 0)
		lse := float64(logSumExp(logits))
		want := float64(logits[id]) - lse
		got := c.Logprobs.Content[i]
		if math.Abs(got.Logprob-want) > 1e-4 {
			t.Fatalf("token %d: logprob %v, want %v", i, got.Logprob, want)
		}
		if got.Token != e.tok.Decode([]int32{id}) || len(got.TopLogprobs) != 3 {
			t.Fatalf("token %d: %+v", i, got)
		}
		best := float64(logits[argmax(logits)]) - lse
		if math.Abs(got.TopLogprobs[0].Logprob-best) > 1e-4 || got.TopLogprobs[1].Logprob > got.TopLogprobs[0].Logprob {
			t.Fatalf("top logprobs %+v, best %v", got.TopLogprobs, best)
		}
		ctx = append(ctx, id)
	}
}

func TestCompletionLogprobsAndTokenIDsFormat(t *testing.T) {
	_, srv := newTestEngine(t, DefaultOptions())
	r := complete(t, srv.URL, map[string]any{"prompt": "hi", "temperature": 0, "max_tokens": 5, "logprobs": 2,
		"return_token_ids": true, "return_tokens_as_token_ids": true})
	c := r.Choices[0]
	lp := c.Logprobs
	if len(lp.Tokens) != 5 || len(lp.TextOffset) != 5 || lp.TextOffset[0] != 0 || len(c.PromptTokenIDs) != 2 {
		t.Fatalf("bad logprobs %+v", c)
	}
	for i, tok := range lp.Tokens {
		if want := "token_id:" + itoa(c.TokenIDs[i]); tok != want {
			t.Fatalf("token %q want %q", tok, want)
		}
		if _, ok := lp.TopLogprobs[i][tok]; !ok || len(lp.TopLogprobs[i]) < 2 || len(lp.TopLogprobs[i]) > 3 {
			t.Fatalf("top_logprobs %v", lp.TopLogprobs[i])
		}
		if i > 0 && lp.TextOffset[i] != lp.TextOffset[i-1]+len(lp.Tokens[i-1]) {
			t.Fatalf("text_offset %v", lp.TextOffset)
		}
	}
}

func itoa(id int32) string { b, _ := json.Marshal(id); return string(b) }

// TestResponseIDFromRequestID: as vLLM does, an answer is named after the
// request's X-Request-Id (hone's proxy sends its call id), chatcmpl-<id> or
// cmpl-<id>; without one its id is random.
func TestResponseIDFromRequestID(t *testing.T) {
	_, srv := newTestEngine(t, DefaultOptions())
	for _, tc := range []struct{ path, body, reqID, want string }{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":1}`, "call-7", "chatcmpl-call-7"},
		{"/v1/completions", `{"prompt":"hi","max_tokens":1}`, "call-8", "cmpl-call-8"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":1,"stream":true}`, "call-9", "chatcmpl-call-9"},
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+tc.path, strings.NewReader(tc.body))
		req.Header.Set("x-request-id", tc.reqID)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), `"id":"`+tc.want+`"`) {
			t.Errorf("%s with X-Request-Id %s answered %s; want id %s", tc.path, tc.reqID, b, tc.want)
		}
	}
	a, b := postChat(t, srv.URL, map[string]any{"max_tokens": 1}), postChat(t, srv.URL, map[string]any{"max_tokens": 1})
	if a.ID == b.ID || len(a.ID) != len("chatcmpl-")+32 {
		t.Fatalf("ids without X-Request-Id: %q and %q, want distinct random ones", a.ID, b.ID)
	}
}
