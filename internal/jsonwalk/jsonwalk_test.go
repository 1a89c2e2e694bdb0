package jsonwalk

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// FuzzValid: Valid is gjson.Valid (within MaxDepth), and a walk that Skips the document ends
// where Valid says it does.
func FuzzValid(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,2,{"b":-0.0e+5}],"\u0063":[{"t":[1.5,-3,123456789012345678901]}]}`, `[116,111,107]`, `[01]`, `[1,]`,
		`{"k":"` + string(bytes.Repeat([]byte("a long prompt "), 8)) + `"}`, `"\u12"`, "\"a\x01b\"", `[1] x`, ` {} `,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.Count(s, "[")+strings.Count(s, "{") > MaxDepth {
			return // may nest deeper than a walk accepts (TestMaxDepth)
		}
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
	for _, s := range []string{`"plain"`, `"a\nb\t\"c\"\\d\/e"`, `"\u00e9\ud83d\ude00"`, `"x\\u0041"`, `"\u003cb\u003e \u0026 \u2028"`, `"\ud800"`, `"\ud800\u0041"`,
		`"\udc00\ud800"`, `"\ud83d\ude00\ud83d"`, `"\ud83d\\ude00"`, `"a\u0000b"`, `"\uD83D\uDE00\uFFFF"`, `"\q"`, `"end\`, `"\`, `12`, `null`,
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

// FuzzAppendInt32s: what the one-scan path takes is a valid JSON array, read
// as the element-by-element path (AsInt of each Value) reads it.
func FuzzAppendInt32s(f *testing.F) {
	for _, s := range []string{`[]`, `[0]`, `[2000,2007,2014]`, `[151644,872,198]`, `[01]`, `[1,]`, `[,1]`, `[1 ]`,
		`[-1]`, `[1.5]`, `[999999999]`, `[1000000000]`, `[1]]`, `[1],[2]`, `[`, `]`, `[[1]]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		prefix := []int32{7}
		got, ok := AppendInt32s(prefix, s)
		if !ok {
			if len(got) != 1 || got[0] != 7 {
				t.Fatalf("AppendInt32s(%q) refused but changed dst to %v", s, got)
			}
			return
		}
		if !gjson.Valid(s) || !gjson.Parse(s).IsArray() {
			t.Fatalf("AppendInt32s(%q) took what is not a JSON array", s)
		}
		want := []int32{7}
		w := New(s)
		w.Each(func() {
			v, _ := w.Value()
			want = append(want, int32(AsInt(v)))
		})
		if !slices.Equal(got, want) {
			t.Fatalf("AppendInt32s(%q) = %v, element by element %v", s, got, want)
		}
	})
}

// FuzzWalkInt32s: a walk's Int32s, in a document, reads what AppendInt32s
// reads of the same array and ends where Value would; when it refuses, the
// walk has not moved.
func FuzzWalkInt32s(f *testing.F) {
	for _, s := range []string{`[2000,2007]`, `[]`, ` [1,2] `, `[1,2`, `[1,2]]`, `[01]`, `"x"`, `[1000000000]`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		doc := `{"ids":` + s + `,"n":1}`
		w := New(doc)
		var ok bool
		var got []int32
		var raw string
		var at int
		for key := range w.Members {
			if key != "ids" {
				w.Skip()
				continue
			}
			pos := w.Pos()
			if got, raw, at, ok = w.Int32s([]int32{7}); !ok {
				if w.Pos() != pos && w.Pos() != pos+len(s)-len(strings.TrimLeft(s, " \t\n\r")) {
					t.Fatalf("Int32s on %q refused and moved the walk from %d to %d", s, pos, w.Pos())
				}
				w.Skip()
				continue
			}
			ref := New(doc)
			ref.i = pos
			wantRaw, wantAt := ref.Value()
			if raw != wantRaw || at != wantAt || w.Pos() != ref.Pos() {
				t.Fatalf("Int32s on %q: raw %q at %d ending %d, Value %q at %d ending %d", s, raw, at, w.Pos(), wantRaw, wantAt, ref.Pos())
			}
			want, aok := AppendInt32s([]int32{7}, raw)
			if !aok || !slices.Equal(got, want) {
				t.Fatalf("Int32s on %q = %v, AppendInt32s %v (%v)", s, got, want, aok)
			}
		}
	})
}

// BenchmarkInt32s is an 8,000-token prompt's ids: the walk that steps over
// them, and the scan that reads them.
func BenchmarkInt32s(b *testing.B) {
	ids := make([]string, 8000)
	for i := range ids {
		ids[i] = strconv.Itoa(100 + i*37%150000)
	}
	raw := "[" + strings.Join(ids, ",") + "]"
	b.Run("walk", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			w := New(raw)
			w.Skip()
		}
	})
	b.Run("append", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		dst := make([]int32, 0, 8000)
		for b.Loop() {
			dst, _ = AppendInt32s(dst[:0], raw)
		}
	})
}

// TestMaxDepth: nesting up to MaxDepth is valid, deeper is not, and a
// document of millions of open brackets is refused without exhausting the
// stack (which would kill the process, not panic).
func TestMaxDepth(t *testing.T) {
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, tc := range []struct {
		doc  string
		want bool
	}{
		{nest(MaxDepth), true},
		{nest(MaxDepth + 1), false},
		{`{"a":` + strings.Repeat(`{"a":`, MaxDepth-1) + "1" + strings.Repeat("}", MaxDepth), true},
		{`{"a":` + strings.Repeat(`{"a":`, MaxDepth) + "1" + strings.Repeat("}", MaxDepth+1), false},
		{`{"model":"m","messages":` + strings.Repeat("[", 10_000_000), false},
		{strings.Repeat(`[{"a":`, 5_000_000), false},
	} {
		if got := Valid(tc.doc); got != tc.want {
			t.Errorf("Valid of %d bytes nested %.12q...: %v, want %v", len(tc.doc), tc.doc, got, tc.want)
		}
		if got := IsObject([]byte(tc.doc)); got && !tc.want {
			t.Errorf("IsObject of %d bytes nested too deep: true", len(tc.doc))
		}
	}
}

// TestStrLongRuns: in a long string, a quote, escape or control byte at any
// offset of an eight-byte block ends the plain run there (plainRun), as
// gjson reads the string.
func TestStrLongRuns(t *testing.T) {
	for at := 16; at < 48; at++ {
		for _, special := range []string{`\"`, `\n`, `\u00e9`, `"`, "\t"} {
			body := `"` + strings.Repeat("a", at) + special + strings.Repeat("b", 20) + `"`
			w := New(body)
			raw, _ := w.Str()
			valid := Valid(body)
			if valid != gjson.Valid(body) {
				t.Fatalf("Valid(%q) = %v, gjson %v", body, valid, !valid)
			}
			if want := gjson.Parse(body); valid && want.Type == gjson.String && `"`+raw+`"` != want.Raw {
				t.Fatalf("Str(%q) = %q, want %s", body, raw, want.Raw)
			}
			if special == `"` && (w.Bad() || raw != strings.Repeat("a", at)) {
				t.Fatalf("Str(%q) = %q (bad %v): the string ends at the quote", body, raw, w.Bad())
			}
		}
	}
}

// plainRun8 is plainRun eight bytes at a time throughout: the reference
// the vector scan is tested against.
func plainRun8(s string, i int) int { return scanRun(s, i, false) }

// TestSpecialAVX2: the vector scan stops at the first quote, backslash or
// control byte from any start, for every byte value at every place of a
// block and a second one after it in the same block, or, finding none,
// where fewer than 32 bytes are left; plainRun, built on it, returns what
// the eight-byte reference (plainRun8) does.
func TestSpecialAVX2(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 here: plainRun8 alone runs")
	}
	first := func(s string, i int) int {
		for i < len(s) && plain[s[i]] {
			i++
		}
		return i
	}
	base := strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789", 3)[:100]
	for c := range 256 {
		for at := 0; at < 80; at++ {
			for _, second := range []int{-1, 1, 7, 31} {
				b := []byte(base)
				b[at] = byte(c)
				if j := at + second; second > 0 && j < len(b) {
					b[j] = '"'
				}
				s := string(b)
				for _, from := range []int{0, 1, at / 2, max(at-31, 0), max(at-32, 0), at} {
					want := first(s, from)
					got := specialAVX2(s, from)
					if got > want || got < want && len(s)-got >= 32 {
						t.Fatalf("byte %#x at %d (second %d), from %d: specialAVX2 %d, first stop %d", c, at, second, from, got, want)
					}
					if pr, ref := plainRun(s, from), plainRun8(s, from); pr != ref {
						t.Fatalf("byte %#x at %d, from %d: plainRun %d, plainRun8 %d, first stop %d", c, at, from, pr, ref, want)
					}
				}
			}
		}
	}
}

// FuzzPlainRun: plainRun (the vector scan where the CPU has it) returns
// what the eight-byte reference returns, from any start.
func FuzzPlainRun(f *testing.F) {
	long := strings.Repeat("a plain run of text, ", 8)
	for _, s := range []string{long, long + `"` + long, long[:40] + `\n` + long, long[:33] + "\x01" + long, long[:31] + "é\"" + long} {
		f.Add(s, uint8(0))
		f.Add(s, uint8(5))
	}
	f.Fuzz(func(t *testing.T, s string, from uint8) {
		i := min(int(from), len(s))
		if got, want := plainRun(s, i), plainRun8(s, i); got != want {
			t.Fatalf("plainRun(%q, %d) = %d, plainRun8 %d", s, i, got, want)
		}
	})
}
