package proxy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/hone-rl/hone/proxy/internal/sse"
	"github.com/tidwall/gjson"
)

// FuzzResponsesRequest: any body either translates into a valid chat
// completions request with messages, or is refused with a 4xx; never a
// panic.
func FuzzResponsesRequest(f *testing.F) {
	files, _ := filepath.Glob("testdata/responses/*/request.json")
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	f.Add([]byte(`{"model":"m","input":[{"type":"function_call","call_id":"a","name":"f","arguments":"{"},{"type":"function_call_output","call_id":"a","output":[{"type":"input_text","text":"x"}]}]}`))
	f.Add([]byte(codexRequest))
	f.Add([]byte(`{"model":"m","input":[{"type":"custom_tool_call","call_id":"a","namespace":"n","name":"f","input":"x"},{"type":"custom_tool_call_output","call_id":"a","output":"y"},{"type":"additional_tools","tools":[{"type":"namespace","name":"n","tools":[{"type":"custom","name":"f"}]}]}],"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[{"type":"custom","name":"f"}]}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if !gjson.ValidBytes(body) || !gjson.ParseBytes(body).IsObject() {
			return // refused before translation
		}
		tr, err := responsesSurface{}.translate(testServer(), "", body)
		if err != nil {
			if err.status/100 != 4 {
				t.Fatalf("status %d", err.status)
			}
			return
		}
		var chat struct {
			Model    string            `json:"model"`
			Messages []json.RawMessage `json:"messages"`
		}
		if e := json.Unmarshal(tr.body, &chat); e != nil || chat.Model == "" || len(chat.Messages) == 0 {
			t.Fatalf("translated into %s (%v)", tr.body, e)
		}
	})
}

// FuzzResponsesStream: any sequence of engine chunks becomes a well-formed
// Responses event stream (checkResponsesEvents) ending in a final response.
func FuzzResponsesStream(f *testing.F) {
	for _, name := range []string{"chat_stream", "chat_tools_stream", "chat_reasoning_content_stream", "chat_n2_stream"} {
		b, _ := os.ReadFile(filepath.Join("testdata", "cases", name, "upstream.sse"))
		f.Add(b)
	}
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":3,\"function\":{\"arguments\":\"{\"}}]}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\",\"reasoning\":\"y\"}}]}\n\ndata: [DONE]\n\n"))
	f.Add(sseOf(engineToolStream))
	f.Fuzz(func(t *testing.T, events []byte) {
		// Codex's tools: namespaced and custom calls are mapped back too
		tr, err := responsesSurface{}.translate(testServer(), "", []byte(codexRequest))
		if err != nil {
			t.Fatal(err)
		}
		var out []byte
		for _, ev := range splitEvents(events) {
			if data, ok := sse.Data(ev); ok && string(data) != "[DONE]" {
				out = append(out, tr.enc.event(data)...)
			}
		}
		out = append(out, tr.enc.end()...)
		checkResponsesEvents(t, out)
	})
}
