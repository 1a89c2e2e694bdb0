package capture

import (
	"encoding/json"
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
			m.toolCalls = appendToolCalls(m.toolCalls[:0], f)
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
		`{"messages":[{"role":"assistant","tool_calls":null},{"role":"assistant","tool_calls":"x"},{"role":"assistant","tool_calls":[]}]}`,
		`{"messages":[{"role":"assistant","tool_calls":{"a":{"function":{"name":"f","arguments":"{}"}},"b":1}}]}`,
		`{"messages":[{"role":"assistant","tool_calls":[1,{"function":"s"},{"function":{"name":1,"arguments":{"b":1,"a":[2]}},"function":{"name":"g"}},` +
			`{"function":{"n\u0061me":"e","name":"h","name":"i","arguments":"[1, 2.0, \"\\u00e9<\"]"}}],"tool_calls":[{"function":{"name":"j"}}]}]}`,
		// CI's failure: non-JSON arguments memoised as a view of a reused buffer.
		`{"messages":[{"0000":"000000000","tool_calls":[0,{"00000000":"0"},{"00000000":{"0000":0,"000000000":{"0":0,"0":[0]}},"00000000":{"0000":"0"}},{"function":{"000000000":"0","0000":"0","0000":"0","arguments":"a"}}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !gjson.ValidBytes(b) {
			conversationHashes(b, 0, func(string) {}) // no panic
			return
		}
		var got, want []string
		hs, op, ok := conversationHashes(b, 0, func(s string) { got = append(got, s) })
		rhs, rop, rok := refConversationHashes(b, func(s string) { want = append(want, s) })
		if ok != rok || !reflect.DeepEqual(hs, rhs) || op != rop || ok && !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\nwalk %v %v %x %q\ngjson %v %v %x %q", b, ok, hs, op, got, rok, rhs, rop, want)
		}
	})
}

// refCanonArgs is canonArgs by encoding/json: the reference it is held to.
func refCanonArgs(s string) string {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return strings.TrimSpace(s)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return strings.TrimSpace(s)
	}
	return string(b)
}

// FuzzCanonArgs: canonArgs writes what encoding/json's round trip writes.
func FuzzCanonArgs(f *testing.F) {
	for _, s := range []string{
		`{"city": "Paris"}`, `{"b":1,"a":2}`, ` {"a": [1, 2.50, -0, 1e2, 1E-7, 12345678901234567890, {"z": null, "y": true}]} `,
		`{"a":1,"a":2,"b":{"d":1,"c":[]}}`, `"a<b>&c\u2028\ud83d\ude00\ud800x\u00e9\/\t\u0001"`, `{"\u0062":1,"b":2,"a\u0000":3}`,
		`{"path": "src/x.go", "old": "if err != nil {\n\treturn err\n}", "line": 10}`, "{\"k\": \"\xff\xfe\u2029\"}",
		`not json`, ``, `   `, `{"a":1}x`, `[1,]`, `{"a"}`, `1e400`, `-`, `01`, `{"a":tru}`, `"\'"`, "\"\x01\"", `[[[[]]]]`, `{}`, `[]`,
		`0.000001`, `0.0000001`, `1e21`, `123456789012345678901234`, `-1.5e-10`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := canonArgs(s), refCanonArgs(s); got != want {
			t.Fatalf("canonArgs(%q) = %q, encoding/json %q", s, got, want)
		}
	})
}

func TestCanonArgsDepth(t *testing.T) {
	for _, n := range []int{maxCanonDepth, maxCanonDepth + 1} {
		s := strings.Repeat("[", n) + strings.Repeat("]", n)
		if got, want := canonArgs(s), refCanonArgs(s); got != want {
			t.Fatalf("depth %d: %.20q..., encoding/json %.20q...", n, got, want)
		}
	}
}

// appendToolCalls is appendToolCallsAt by gjson: the reference.
func appendToolCalls(dst []canonToolCall, calls gjson.Result) []canonToolCall {
	calls.ForEach(func(_, tc gjson.Result) bool {
		fn := member(tc, "function")
		dst = append(dst, canonToolCall{name: member(fn, "name").String(), args: refCanonArgs(member(fn, "arguments").String())})
		return true
	})
	return dst
}

// argumentsOf gives canonArgs's answer whether or not argsMemo has the
// text, keeps its own copy of the key, and keeps no oversized text.
func TestArgumentsMemo(t *testing.T) {
	body := []byte(`"{\"b\": 1, \"a\": \"<x>\"}"`)
	raw := string(body) // a copy, as a view of a request would not be
	want := canonArgs(`{"b": 1, "a": "<x>"}`)
	for range 2 {
		if got := argumentsOf(raw, 1); got != want {
			t.Fatalf("argumentsOf = %q, want %q", got, want)
		}
	}
	if !argsMemo.Contains(memoKey{1, raw}) || argsMemo.Contains(memoKey{2, raw}) {
		t.Fatal("not memoised for its owner alone")
	}
	big := `"` + strings.Repeat("x", maxMemoArgs) + `"`
	if got := argumentsOf(big, 1); got != big[1:len(big)-1] || argsMemo.Contains(memoKey{1, big}) {
		t.Fatalf("oversized arguments: %.20q, memoised %v", got, argsMemo.Contains(memoKey{1, big}))
	}
	if got := argumentsOf(`{"a":1}`, 1); got != `{"a":1}` {
		t.Fatalf("object arguments: %q", got)
	}
	// Arguments that are not JSON come back as written: what the memo
	// keeps must not be a view of a request buffer that is then reused.
	buf := []byte(`"not json"`)
	if got := argumentsOf(unsafe.String(&buf[0], len(buf)), 3); got != "not json" {
		t.Fatalf("non-JSON arguments: %q", got)
	}
	copy(buf, `"XXXXXXXX"`)
	if got := argumentsOf(`"not json"`, 3); got != "not json" {
		t.Fatalf("memo holds a view of a reused buffer: %q", got)
	}
}

// TestConversationHashesRepeatedKeys: a message with a key repeated (in the
// message, a tool call, its function or a content part) hashes as the
// message of each key's last member, the one the engine read.
func TestConversationHashesRepeatedKeys(t *testing.T) {
	for _, tc := range []struct{ repeated, last string }{
		{`{"role":"system","role":"user","content":"a","content":"b"}`, `{"role":"user","content":"b"}`},
		{`{"role":"user","content":[{"type":"image_url","type":"text","text":"a","text":"b"}]}`, `{"role":"user","content":[{"type":"text","text":"b"}]}`},
		{`{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{}","name":"g","arguments":"{\"a\":1}"}}]}`,
			`{"role":"assistant","tool_calls":[{"function":{"name":"g","arguments":"{\"a\":1}"}}]}`},
		{`{"role":"assistant","tool_calls":[{"function":{"name":"f"},"function":{"name":"g"}}],"tool_calls":[{"function":{"name":"h"}}]}`,
			`{"role":"assistant","tool_calls":[{"function":{"name":"h"}}]}`},
	} {
		a, _, okA := conversationHashes([]byte(`{"messages":[`+tc.repeated+`]}`), 0, nil)
		b, _, okB := conversationHashes([]byte(`{"messages":[`+tc.last+`]}`), 0, nil)
		if !okA || !okB || a[0] != b[0] {
			t.Errorf("%s: hash %x, want %x (that of %s)", tc.repeated, a, b, tc.last)
		}
	}
}
