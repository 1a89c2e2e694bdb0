package capture

import (
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	"github.com/tidwall/gjson"
)

// refConversationHashes is conversationHashes as gjson reads it: the
// reference the walk is held to.
func refConversationHashes(body []byte, text func(string)) (hs []uint64, opening uint64, ok bool) {
	if len(body) == 0 {
		return nil, 0, false
	}
	msgs := gjson.Get(unsafe.String(&body[0], len(body)), "messages")
	if !msgs.IsArray() {
		return nil, 0, false
	}
	var h uint64
	openingSet := false
	d := xxhash.New()
	msgs.ForEach(func(_, v gjson.Result) bool {
		m := canonFromJSON(v)
		h = m.extend(d, h)
		hs = append(hs, h)
		if !openingSet && m.role == "user" {
			opening, openingSet = h, true
		}
		if text != nil && v.IsObject() && summarised(m.role) {
			text(m.content)
		}
		return true
	})
	if len(hs) == 0 {
		return nil, 0, false
	}
	if !openingSet {
		opening = hs[len(hs)-1]
	}
	return hs, opening, true
}

func canonFromJSON(v gjson.Result) canonMessage {
	var m canonMessage
	v.ForEach(func(k, f gjson.Result) bool {
		switch k.Str {
		case "role":
			m.role = f.String()
		case "content":
			m.content = canonContent(f)
		case "name":
			m.name = f.String()
		case "tool_call_id":
			m.toolCallID = f.String()
		case "tool_calls":
			m.toolCalls = appendToolCalls(m.toolCalls, f)
		}
		return true
	})
	return m
}

// FuzzConversationHashes: on valid JSON the walk gives gjson's hashes,
// opening and texts.
func FuzzConversationHashes(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"system","content":" Be careful.\n\u00e9 "},{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"text":"b"}]},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"b\":1,\"a\":2}"}}]},{"role":"tool","tool_call_id":"c","content":"3"},"odd",[1],{"role":"developer","content":{"x":1},"name":"n"}],"tools":[]}`,
		`{"messages":"nope"}`, `{"messages":[]}`, `{"messages":[{"role":"user","role":"system","content":"a","content":"b"}]}`,
		`{"a":{"messages":[1]},"messages":[{"role":"user"}],"messages":[{"role":"system"}]}`,
		`{"messages":[{"role":"user","content":"` + strings.Repeat("a long prompt line\n", 40) + `"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !gjson.ValidBytes(b) {
			conversationHashes(b, func(string) {}) // no panic
			return
		}
		var got, want []string
		hs, op, ok := conversationHashes(b, func(s string) { got = append(got, s) })
		rhs, rop, rok := refConversationHashes(b, func(s string) { want = append(want, s) })
		if ok != rok || !reflect.DeepEqual(hs, rhs) || op != rop || ok && !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\nwalk %v %v %x %q\ngjson %v %v %x %q", b, ok, hs, op, got, rok, rhs, rop, want)
		}
	})
}
