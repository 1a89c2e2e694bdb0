package crashtest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// stubEngine answers chat completions in vLLM's format (prompt_token_ids,
// choice token_ids and logprobs) with a deterministic ChatML-like tokenizer,
// so consecutive turns of a conversation extend each other's tokens.
type stubEngine struct {
	srv  *http.Server
	url  string
	next atomic.Int64
}

var roleIDs = map[string]int32{"system": 8948, "user": 872, "assistant": 77091, "tool": 872}

func render(msgs []chatMsg) []int32 {
	var out []int32
	for _, m := range msgs {
		out = append(out, 151644, roleIDs[m.Role], 198)
		out = append(out, textIDs(m.Content)...)
		out = append(out, 151645, 198)
	}
	return append(out, 151644, 77091, 198)
}

func textIDs(s string) []int32 {
	out := make([]int32, len(s))
	for i := 0; i < len(s); i++ {
		out[i] = int32(s[i]) + 300
	}
	return out
}

type chatMsg struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func newStub(t *testing.T) *stubEngine {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &stubEngine{url: "http://" + ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"list","data":[{"id":"stub","object":"model","created":1763780000,"owned_by":"vllm","root":"stub","max_model_len":4096}]}`)
	})
	mux.HandleFunc("/v1/chat/completions", s.chat)
	s.srv = &http.Server{Handler: mux}
	go s.srv.Serve(ln) //nolint:errcheck
	t.Cleanup(func() { s.srv.Close() })
	return s
}

func (s *stubEngine) chat(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []chatMsg `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	n := s.next.Add(1)
	content := fmt.Sprintf("answer %d to %d messages", n%7, len(req.Messages))
	prompt := render(req.Messages)
	comp := append(textIDs(content), 151645)
	lps := make([]map[string]any, len(comp))
	for i := range lps {
		lps[i] = map[string]any{"token": "x", "logprob": -0.01 * float64(i+1), "bytes": []int{120}, "top_logprobs": []any{}}
	}
	id := fmt.Sprintf("chatcmpl-stub%d", n)
	if rid := r.Header.Get("X-Request-Id"); rid != "" {
		id = "chatcmpl-" + rid // as vLLM names an answer
	}
	resp := map[string]any{
		"id": id, "object": "chat.completion", "created": 1763780000, "model": "stub",
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": content, "tool_calls": []any{}},
			"logprobs": map[string]any{"content": lps}, "finish_reason": "stop", "stop_reason": nil, "token_ids": comp}},
		"usage":            map[string]any{"prompt_tokens": len(prompt), "completion_tokens": len(comp), "total_tokens": len(prompt) + len(comp)},
		"prompt_token_ids": prompt,
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

func sleep() { time.Sleep(50 * time.Millisecond) }
