package jsonwalk

import (
	"bytes"
	"math"
	"strconv"
	"testing"

	"github.com/tidwall/gjson"
)

// FuzzValid: Valid is gjson.Valid, and a walk that Skips the document ends
// where Valid says it does.
func FuzzValid(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,2,{"b":-0.0e+5}],"\u0063":[{"t":[1.5,-3,123456789012345678901]}]}`, `[116,111,107]`, `[01]`, `[1,]`,
		`{"k":"` + string(bytes.Repeat([]byte("a long prompt "), 8)) + `"}`, `"\u12"`, "\"a\x01b\"", `[1] x`, ` {} `,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := Valid(s), gjson.Valid(s); got != want {
			t.Fatalf("Valid(%q) = %v, gjson.Valid %v", s, got, want)
		}
		if got, want := IsObject([]byte(s)), gjson.Valid(s) && gjson.Parse(s).IsObject(); got != want {
			t.Fatalf("IsObject(%q) = %v, gjson %v", s, got, want)
		}
	})
}

// FuzzPlainFloat: the fast decimal parse is strconv.ParseFloat's result.
func FuzzPlainFloat(f *testing.F) {
	for _, s := range []string{"-0.011", "0", "-0", "123.456", "0.1", "99999999999999.9", "1.000000000000001", "-0.00000000000000000000001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := PlainFloat(s)
		if !ok {
			return
		}
		want, err := strconv.ParseFloat(s, 64)
		if err != nil || math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("PlainFloat(%q) = %v, ParseFloat %v (%v)", s, got, want, err)
		}
	})
}

// TestValidIntArrays: validJSON agrees with gjson.Valid on arrays the
// integer fast path takes and on those it leaves to the general path, and
// a walk over either ends in the same place.
func TestValidIntArrays(t *testing.T) {
	for _, s := range []string{
		`[]`, `[0]`, `[0,1,2]`, `[116,111,107]`, `[151644,872,198]`, `[01]`, `[00]`, `[1,]`, `[,1]`, `[1`, `[1,`,
		`[ 1]`, `[1 ]`, `[1, 2]`, `[-1]`, `[1.5]`, `[1e3]`, `[1,"a"]`, `[1,[2]]`, `[1]]`, `[1] `, `[18446744073709551616]`,
		`{"bytes":[116,111],"top_logprobs":[]}`, `{"bytes":[116,01]}`, `[[1,2],[3],[]]`,
	} {
		if got, want := Valid(s), gjson.Valid(s); got != want {
			t.Errorf("Valid(%s) = %v, gjson.Valid %v", s, got, want)
		}
		fast := New(s)
		_, _ = fast.Value()
		slow := New(s)
		if slow.At() == '[' {
			for range slow.Elements {
				slow.Skip()
			}
		} else {
			slow.Skip()
		}
		if fast.i != slow.i || fast.bad != slow.Bad() {
			t.Errorf("%s: the walk ends at %d (bad %v), the general path at %d (bad %v)", s, fast.i, fast.bad, slow.i, slow.Bad())
		}
	}
}

// TestPlainRun: the eight-at-a-time scan stops at or before the first byte
// a string cannot hold as it is, at every offset and for every byte value,
// and validJSON still agrees with gjson.Valid on strings built around it.
func TestPlainRun(t *testing.T) {
	naive := func(s string, i int) int {
		for i < len(s) && plain[s[i]] {
			i++
		}
		return i
	}
	for c := 0; c < 256; c++ {
		for at := 0; at < 20; at++ {
			b := bytes.Repeat([]byte("abcdefghijklmnopqrstuvwxyz"), 1)
			b[at] = byte(c)
			s := string(b)
			for from := 0; from <= at; from++ {
				got, first := plainRun(s, from), naive(s, from)
				if got > first || (first-got) >= 8 && got+8 <= len(s) {
					t.Fatalf("byte %#x at %d, from %d: plainRun %d, first stop %d", c, at, from, got, first)
				}
			}
			doc := `{"k":"` + s + `"}`
			if Valid(doc) != gjson.Valid(doc) {
				t.Fatalf("Valid(%q) = %v, gjson.Valid %v", doc, Valid(doc), gjson.Valid(doc))
			}
		}
	}
}

// FuzzAsString: AsString is gjson's Result.String for any valid raw value
// (what it is given): escapes, \u sequences and non-strings included.
func FuzzAsString(f *testing.F) {
	for _, s := range []string{`"plain"`, `"a\nb\t\"c\"\\d\/e"`, `"\u00e9\ud83d\ude00"`, `"x\\u0041"`, `"\q"`, `"end\`, `"\`, `12`, `null`,
		`{"a":1}`, `"line\n` + string(bytes.Repeat([]byte(`more text\n`), 20)) + `"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if !gjson.Valid(raw) {
			return
		}
		if got, want := AsString(raw), gjson.Parse(raw).String(); got != want {
			t.Fatalf("AsString(%q) = %q, gjson %q", raw, got, want)
		}
	})
}
