package proxy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/hone-rl/hone/proxy/internal/sse"
	"github.com/tidwall/gjson"
)

// FuzzMessagesRequest: any body either translates into a valid chat
// completions request (a model, messages with roles, every tool message
// answering a tool call made before it) or is refused with an Anthropic
// 400; never a panic. count_tokens' translation holds to the same.
func FuzzMessagesRequest(f *testing.F) {
	files, _ := filepath.Glob("testdata/messages/*/request.json")
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	f.Add([]byte(`{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":"{"}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"image","source":{"type":"url","url":"u"}}]}]}]}`))
	f.Add([]byte(`{"model":"m","max_tokens":1,"system":[],"messages":[{"role":"system","content":[]},{"role":"user","content":[]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if !gjson.ValidBytes(body) || !gjson.ParseBytes(body).IsObject() {
			return // refused before translation
		}
		for _, count := range []bool{false, true} {
			chat, err := messagesChat(gjson.ParseBytes(body), count, "")
			if err != nil {
				if err.status != 400 || err.msg == "" || !gjson.ValidBytes(appendAnthropicError(nil, err.status, err.msg)) {
					t.Fatalf("error %+v", err)
				}
				continue
			}
			var req struct {
				Model    string `json:"model"`
				Messages []struct {
					Role       string `json:"role"`
					ToolCallID string `json:"tool_call_id"`
					ToolCalls  []struct {
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"messages"`
				MaxTokens int64 `json:"max_tokens"`
			}
			if e := json.Unmarshal(chat, &req); e != nil || req.Model == "" || len(req.Messages) == 0 || (!count && req.MaxTokens < 1) {
				t.Fatalf("translated into %s (%v)", chat, e)
			}
			calls := map[string]bool{}
			for _, m := range req.Messages {
				switch m.Role {
				case "system", "user", "assistant", "tool":
				default:
					t.Fatalf("role %q in %s", m.Role, chat)
				}
				for _, tc := range m.ToolCalls {
					if tc.ID == "" || tc.Function.Name == "" {
						t.Fatalf("tool call without id or name in %s", chat)
					}
					calls[tc.ID] = true
				}
				if m.Role == "tool" && !calls[m.ToolCallID] {
					t.Fatalf("tool message for an unknown call in %s", chat)
				}
			}
		}
	})
}

// FuzzMessagesStream: any sequence of engine chunks becomes a well-formed
// Anthropic event stream (checkMessagesEvents) that accumulates into a
// Message; the same chunks as one whole answer become a Message too.
func FuzzMessagesStream(f *testing.F) {
	for _, name := range []string{"chat_stream", "chat_tools_stream", "chat_reasoning_content_stream", "chat_n2_stream"} {
		b, _ := os.ReadFile(filepath.Join("testdata", "cases", name, "upstream.sse"))
		f.Add(b)
	}
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":3,\"function\":{\"arguments\":\" [\"}}]}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\",\"reasoning\":\"y\"}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":3,\"function\":{\"arguments\":\"1]\"}}]},\"finish_reason\":\"stop\",\"stop_reason\":\"E\"}]}\n\n" +
		"data: [DONE]\n\n"))
	f.Fuzz(func(t *testing.T, events []byte) {
		enc := newMessagesEncoder("m")
		out := msgEncodeStream(enc, events)
		if !enc.started || len(out) == 0 || !endsWithStop(out) {
			out = append(out, enc.end()...) // the engine sent no [DONE]: end as the test stream would
		}
		msg := checkMessagesEvents(t, out)
		if !gjson.ValidBytes(msg) {
			t.Fatalf("accumulated %s", msg)
		}
		for _, ev := range splitEvents(events) {
			if data, ok := sse.Data(ev); ok && string(data) != "[DONE]" {
				b := newMessagesEncoder("m").body(data, 200)
				if !gjson.ValidBytes(b) || gjson.GetBytes(b, "type").String() != "message" {
					t.Fatalf("whole answer %s became %s", data, b)
				}
			}
		}
	})
}

func endsWithStop(out []byte) bool {
	evs := splitEvents(out)
	d, _ := sse.Data(evs[len(evs)-1])
	return gjson.GetBytes(d, "type").String() == "message_stop"
}
