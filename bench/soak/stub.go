package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
)

// stub is a vLLM-format chat engine: prompt_token_ids, per-choice
// token_ids and logprobs, streams with a usage chunk when asked. Its
// tokenizer is ChatML over bytes, so each turn's prompt extends the last
// turn's prompt and completion exactly and the calls of a conversation
// stitch into one trajectory.
type stub struct {
	srv  *http.Server
	url  string
	next atomic.Int64
}

const (
	imStart = 151644
	imEnd   = 151645
	newline = 198
)

var roleIDs = map[string]int32{"system": 8948, "user": 872, "assistant": 77091, "tool": 872}

type chatMsg struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func textIDs(s string) []int32 {
	out := make([]int32, len(s))
	for i := 0; i < len(s); i++ {
		out[i] = int32(s[i]) + 300
	}
	return out
}

func render(msgs []chatMsg) []int32 {
	var out []int32
	for _, m := range msgs {
		out = append(out, imStart, roleIDs[m.Role], newline)
		out = append(out, textIDs(m.Content)...)
		out = append(out, imEnd, newline)
	}
	return append(out, imStart, roleIDs["assistant"], newline)
}

func startStub() (*stub, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &stub{url: "http://" + ln.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"object":"list","data":[{"id":"stub","object":"model","created":1763780000,"owned_by":"vllm","root":"stub","max_model_len":32768}]}`)
	})
	mux.HandleFunc("/v1/chat/completions", s.chat)
	s.srv = &http.Server{Handler: mux}
	go s.srv.Serve(ln) //nolint:errcheck
	return s, nil
}

func (s *stub) close() { _ = s.srv.Close() }

// reply is a deterministic answer of 40 to 100 bytes.
func reply(n int64, turns int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Answer %d to turn %d:", n%97, turns)
	for i := int64(0); b.Len() < 40+int(n%61); i++ {
		b.WriteString(" step " + strconv.FormatInt((n+i)%13, 10))
	}
	return b.String()
}

func (s *stub) chat(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages      []chatMsg `json:"messages"`
		Stream        bool      `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	n := s.next.Add(1)
	id := "chatcmpl-soak" + strconv.FormatInt(n, 10)
	content := reply(n, len(req.Messages))
	prompt := render(req.Messages)
	comp := append(textIDs(content), imEnd)
	usage := map[string]int{"prompt_tokens": len(prompt), "completion_tokens": len(comp), "total_tokens": len(prompt) + len(comp)}
	if !req.Stream {
		lps := make([]map[string]any, len(comp))
		for i := range lps {
			lps[i] = map[string]any{"token": "x", "logprob": -0.01 * float64(i%50+1), "bytes": []int{120}, "top_logprobs": []any{}}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": id, "object": "chat.completion", "created": 1763780000, "model": "stub",
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": content, "tool_calls": []any{}},
				"logprobs": map[string]any{"content": lps}, "finish_reason": "stop", "stop_reason": nil, "token_ids": comp}},
			"usage": usage, "prompt_token_ids": prompt,
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	bw := bufio.NewWriter(w)
	fl, _ := w.(http.Flusher)
	event := func(v any) {
		b, _ := json.Marshal(v)
		bw.WriteString("data: ")
		bw.Write(b)
		bw.WriteString("\n\n")
	}
	chunk := func(delta map[string]any, ids []int32, text string, finish any, first bool) {
		lps := make([]map[string]any, len(ids))
		for i := range lps {
			lps[i] = map[string]any{"token": "x", "logprob": -0.02, "bytes": []int{120}, "top_logprobs": []any{}}
		}
		if text != "" || delta["role"] != nil {
			delta["content"] = text
		}
		ev := map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1763780000, "model": "stub",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": map[string]any{"content": lps},
				"finish_reason": finish, "token_ids": ids}}}
		if first {
			ev["prompt_token_ids"] = prompt
		}
		event(ev)
	}
	const per = 8 // tokens per event
	for i := 0; i < len(comp); i += per {
		j := min(i+per, len(comp))
		text := ""
		if i < len(content) {
			text = content[i:min(j, len(content))]
		}
		delta := map[string]any{}
		if i == 0 {
			delta["role"] = "assistant"
		}
		var finish any
		if j == len(comp) {
			finish = "stop"
		}
		chunk(delta, comp[i:j], text, finish, i == 0)
		if i/per%4 == 3 {
			bw.Flush()
			if fl != nil {
				fl.Flush()
			}
		}
	}
	if req.StreamOptions.IncludeUsage {
		event(map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1763780000, "model": "stub", "choices": []any{}, "usage": usage})
	}
	bw.WriteString("data: [DONE]\n\n")
	bw.Flush()
}
