package jsonenc

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"
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

// Every byte value at every place of a string long enough for the
// word-at-a-time pass: AppendRaw writes json.Marshal's bytes.
func TestAppendRawEveryByte(t *testing.T) {
	for c := range 256 {
		for at := range 20 {
			in := []byte(`"` + strings.Repeat("a", 20) + `"`)
			in[1+at] = byte(c)
			want, werr := json.Marshal(json.RawMessage(in))
			got, err := AppendRaw(nil, in)
			if (err != nil) != (werr != nil) || err == nil && !bytes.Equal(got, want) {
				t.Fatalf("byte %#x at %d: %q, %v; json.Marshal %q, %v", c, at, got, err, want, werr)
			}
		}
	}
}

// FuzzEncoded: a literal Encoded accepts is what AppendString writes of
// the string json.Unmarshal reads from it.
func FuzzEncoded(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if !Encoded(raw) {
			return
		}
		var s string
		if err := json.Unmarshal([]byte(raw), &s); err != nil {
			t.Fatalf("Encoded(%q), but json.Unmarshal: %v", raw, err)
		}
		if got := AppendString(nil, s); string(got) != raw {
			t.Fatalf("Encoded(%q), but AppendString writes %s", raw, got)
		}
	})
}

// Encoded takes what AppendString writes, and every byte value at every
// place of a long literal is judged right.
func TestEncoded(t *testing.T) {
	for _, s := range seeds {
		if !utf8.ValidString(s) {
			continue // AppendString writes \ufffd for a byte of invalid UTF-8, which reads back as U+FFFD
		}
		if raw := string(AppendString(nil, s)); !Encoded(raw) {
			t.Errorf("Encoded(%q) is false for AppendString's own output", raw)
		}
	}
	for c := range 0x80 {
		if raw := string(AppendString(nil, "x"+string(rune(c)))); !Encoded(raw) {
			t.Errorf("Encoded(%q) is false for AppendString's own output", raw)
		}
	}
	for _, raw := range []string{`"\u0041"`, `"\u00e9"`, `"\u000A"`, `"\u000a"`, `"\u003C"`, `"\/"`, `"\ufffd"`, `"\u0020"`, `"\ud83d\ude00"`} {
		if Encoded(raw) {
			t.Errorf("Encoded(%s): AppendString writes its string otherwise", raw)
		}
	}
	for c := range 256 {
		for at := range 20 {
			in := []byte(`"` + strings.Repeat("a", 20) + `"`)
			in[1+at] = byte(c)
			var s string
			ok := json.Unmarshal(in, &s) == nil && string(AppendString(nil, s)) == string(in)
			if Encoded(string(in)) != ok {
				t.Fatalf("byte %#x at %d: Encoded %v, want %v", c, at, !ok, ok)
			}
		}
	}
}

var literalSeeds = []string{
	`""`, `"plain"`, `"a<b>&c"`, `"\u003cb\u003e \u0026"`, `"\u003Cb\u003E"`, `"\/ \" \\ \b\f\n\r\t"`, `"\u0000\u001f\u0008\u000a\u007f"`,
	`"\u00e9 \u00E9 é"`, `"\ud83d\ude00 \uD83D\uDE00"`, `"\ud800"`, `"\udc00\ud800x"`, `"\ud800\u0041"`, `"\ud800\ud800\udc00"`,
	`"\u2028 \u2029"`, "\"\u2028 raw \u2029\"", "\"\xff\xfe bad \xe2\x80\"", "\"\xe2\x82\xac euro\"", `"{\"output\":\"a\\nb <c>\"}"`,
	`"` + strings.Repeat(`if x < y && z > 0 {\n\treturn \"ok\"\n}\n`, 20) + `"`,
}

// FuzzAppendLiteral: AppendLiteral writes what AppendString writes for the
// string gjson reads from a literal.
func FuzzAppendLiteral(f *testing.F) {
	for _, s := range literalSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if !gjson.Valid(raw) || raw[0] != '"' || raw[len(raw)-1] != '"' { // a literal as a walk gives it: no space around
			return
		}
		if got, want := AppendLiteral(nil, raw), AppendString(nil, gjson.Parse(raw).String()); !bytes.Equal(got, want) {
			t.Fatalf("AppendLiteral(%q) = %s, want %s", raw, got, want)
		}
	})
}

// TestLiteralRuns: the word-at-a-time scan stops at the first byte it must
// look at, wherever it falls in a word and after an escape earlier in the
// same word (a scan that took a later byte of the word would pass over it).
func TestLiteralRuns(t *testing.T) {
	specials := []string{`\"`, `\n`, `\/`, `\u0041`, `\u003c`, "<", "&", ">", "\u2028", "é", "\xff", "\x01", `\q`}
	for _, first := range []string{"", `\n`, `\\`, "é"} {
		for p := range 12 {
			for q := p; q < 26; q++ {
				for _, c := range specials {
					in := strings.Repeat("a", p) + first + strings.Repeat("b", q-p) + c + strings.Repeat("c", 26-q)
					raw := `"` + in + `"`
					var s string
					wantEncoded := json.Unmarshal([]byte(raw), &s) == nil && string(AppendString(nil, s)) == raw
					if got := Encoded(raw); got != wantEncoded {
						t.Fatalf("Encoded(%q) = %v, want %v", raw, got, wantEncoded)
					}
					if !gjson.Valid(raw) {
						continue
					}
					if got, want := AppendLiteral(nil, raw), AppendString(nil, gjson.Parse(raw).String()); !bytes.Equal(got, want) {
						t.Fatalf("AppendLiteral(%q) = %s, want %s", raw, got, want)
					}
				}
			}
		}
	}
}

// TestEncodedTrailingBackslash: a backslash that ends the text between the
// quotes (the closing quote escaped: not a literal) is read as the end, at
// every place in a word.
func TestEncodedTrailingBackslash(t *testing.T) {
	for n := range 20 {
		if raw := `"` + strings.Repeat("a", n) + `\"`; Encoded(raw) {
			t.Errorf("Encoded(%q) = true for an unterminated literal", raw)
		}
	}
}
