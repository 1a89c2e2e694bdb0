package proxy

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"
)

// appendChatMessages and marshalRequest write json.Marshal's bytes, and
// fail where it fails.
func TestChatJSONMatchesMarshal(t *testing.T) {
	call := chatToolCall{ID: "c<1>", Type: "function"}
	call.Function.Name, call.Function.Arguments = "f", `{"a": "<b>"}`
	msgs := []chatMessage{
		{Role: "system", Content: jsonString("Be brief & <polite>.\u2028")},
		{Role: "user", Content: json.RawMessage(` [ {"type": "text", "text": "a<b"} , {"type":"image_url","image_url":{"url":"x"}} ] `)},
		{Role: "assistant", ReasoningContent: "hmm\n\"quoted\"", ToolCalls: []chatToolCall{call}},
		{Role: "tool", ToolCallID: "c<1>", Content: jsonString("42\x00\xff")},
		{Role: "assistant", Content: json.RawMessage(`"plain \"escaped\" \u00e9 é"`)},
		{Role: "user"},
	}
	for name, ms := range map[string][]chatMessage{"messages": msgs, "none": nil, "empty": {}} {
		want, _ := json.Marshal(ms)
		got, err := appendChatMessages(nil, ms)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %s, %v\nwant %s", name, got, err, want)
		}
	}
	out := map[string]any{"model": "m<", "messages": msgs, "max_tokens": int64(7), "temperature": json.RawMessage(" 0.5 "),
		"stream_options": map[string]any{"include_usage": true}, "stop": []string{"</s>"}, "tools": []json.RawMessage{json.RawMessage(`{"a" : 1}`)}}
	want, _ := json.Marshal(out)
	if got, err := marshalRequest(out); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("request: %s, %v\nwant %s", got, err, want)
	}
	bad := []chatMessage{{Role: "user", Content: json.RawMessage(`{"a":`)}}
	if _, err := appendChatMessages(nil, bad); err == nil {
		t.Fatal("invalid content: no error")
	}
	if _, err := marshalRequest(map[string]any{"messages": bad}); err == nil {
		t.Fatal("invalid content in a request: no error")
	}
}

// object.Get answers as gjson's Get, for the keys it keeps and the others,
// repeated keys and nested paths included.
func TestObjectGet(t *testing.T) {
	doc := `{"model":"a","x":1,"model":"b","output_config":{"format":{"type":"json_schema"}},"stream":true,"messages":[1]}`
	o := readObject(gjson.Parse(doc))
	for _, path := range []string{"model", "x", "output_config.format", "output_config.format.type", "stream", "messages", "nope", "tools"} {
		if got, want := o.Get(path), gjson.Get(doc, path); got.Raw != want.Raw || got.Exists() != want.Exists() {
			t.Errorf("Get(%q) = %q, gjson %q", path, got.Raw, want.Raw)
		}
	}
	if len(o.members) != 4 {
		t.Errorf("kept %d members, want the 4 of requestKeys", len(o.members))
	}
}
