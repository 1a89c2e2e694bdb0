package jsonenc

import (
	"bytes"
	"encoding/json"
	"testing"
)

var seeds = []string{
	"", "plain", `quote " and \ backslash`, "a<b>&c", "line\nbreak\ttab\r\b\f\x00\x1f", "é ü 😀", "\u2028\u2029",
	"\xff\xfe bad", "\xe2\x80", "\xe2\x82\xac euro", `"\u0041"`, `"\q"`, `"\u12"`, `"a" `, ` "a"`, `"a"b"`, `{"a": 1}`,
	`[1, "<"]`, `"\ud800"`, `"a\"b"`, `"\\"`, `"\"`, `"tab	in"`, "\"\u2028 raw\"", "\"\xe2\x82\xac\"",
}

// FuzzAppendString: AppendString writes json.Marshal's bytes for any string.
func FuzzAppendString(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, json.Marshal %s", s, got, want)
		}
	})
}

// FuzzAppendRaw: AppendRaw writes json.Marshal's bytes for a
// json.RawMessage, and fails where it fails.
func FuzzAppendRaw(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		want, werr := json.Marshal(json.RawMessage(raw))
		got, err := AppendRaw([]byte("x"), raw)
		if (err != nil) != (werr != nil) || err == nil && !bytes.Equal(got[1:], want) {
			t.Fatalf("AppendRaw(%q) = %s, %v; json.Marshal %s, %v", raw, got, err, want, werr)
		}
	})
}
