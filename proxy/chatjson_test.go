package proxy

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/hone-rl/hone/internal/jsonwalk"

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
	if got, err := marshalRequest(out, nil); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("request: %s, %v\nwant %s", got, err, want)
	}
	bad := []chatMessage{{Role: "user", Content: json.RawMessage(`{"a":`)}}
	if _, err := appendChatMessages(nil, bad); err == nil {
		t.Fatal("invalid content: no error")
	}
	if _, err := marshalRequest(map[string]any{"messages": bad}, nil); err == nil {
		t.Fatal("invalid content in a request: no error")
	}
}

// object.Get answers as gjson's Get, for the keys it keeps and the others,
// repeated keys and nested paths included.
func TestObjectGet(t *testing.T) {
	doc := ` {"m\u006fdel":"a\n\u00e9","x":1,"model":"b","output_config":{"format":{"type":"json_schema"}},"stream":true,"messages":[1],` +
		`"temperature":1.50,"top_k":-0,"store":null,"user":false}`
	o := readObject(gjson.Parse(doc))
	for _, path := range []string{"model", "x", "output_config.format", "output_config.format.type", "stream", "messages", "nope", "tools",
		"temperature", "top_k", "store", "user"} {
		got, want := o.Get(path), gjson.Get(doc, path)
		if got.Raw != want.Raw || got.Exists() != want.Exists() || got.Type != want.Type || got.Str != want.Str || got.Num != want.Num {
			t.Errorf("Get(%q) = %+v, gjson %+v", path, got, want)
		}
	}
	if len(o.members) != 8 {
		t.Errorf("kept %d members, want the 8 of requestKeys", len(o.members))
	}
}

// FuzzObjectGet: on a valid object, Get of every key readObject keeps
// answers as gjson's Get does.
func FuzzObjectGet(f *testing.F) {
	f.Add(`{"model":"a","x":1,"model":"b","stream":true,"messages":[1],"temperature":1.50,"user":null}`)
	f.Add(`{"m\u006fdel":"a\n\u00e9","max_tokens":-0,"tools":{"a":[]},"store":false,"input":"\ud83d\ude00"}`)
	f.Fuzz(func(t *testing.T, doc string) {
		if !jsonwalk.Valid(doc) {
			return
		}
		o := readObject(gjson.Parse(doc))
		for key := range requestKeys {
			got, want := o.Get(key), gjson.Get(doc, key)
			if got.Raw != want.Raw || got.Type != want.Type || got.Str != want.Str || got.Num != want.Num {
				t.Fatalf("%s: Get(%q) = %+v, gjson %+v", doc, key, got, want)
			}
		}
	})
}
