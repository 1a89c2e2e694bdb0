// Package jsonwalk reads a JSON document front to back in one pass,
// validating every byte as gjson.Valid does and handing the caller the
// members and elements it walks over, with their offsets. The data plane's
// accumulator folds engine answers with it, and capture hashes
// conversations with it; strings are scanned eight bytes at a time.
package jsonwalk

import (
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"
)

// Walker reads one JSON document front to back in a single pass. Every
// byte it passes is checked as gjson.Valid checks it (the same grammar: no
// UTF-8 check, whitespace " \t\n\r"), so a walk that ends without Bad has
// read valid JSON; what the caller does not need it skips with Skip, which
// is the same check. The data plane's accumulator uses it to validate an
// answer and take what it keeps in one pass (gjson would validate, then
// rescan each nested value once per level it descends).
//
// A loop over Members or Elements stops at the walk's position on each key
// or element with the walk at its value; the loop body consumes the value
// (Skip, Str, a nested loop) and must not break out.
type Walker struct {
	s     string
	i     int
	bad   bool
	depth int // arrays and objects open around the position, as Value counts them
}

// MaxDepth is the deepest nesting of arrays and objects a walk accepts (as
// Go's encoding/json): a value nested deeper is invalid. Each level costs
// the walk's recursion stack, and a body of a few megabytes of '[' would
// otherwise exhaust the goroutine's stack, which kills the process.
const MaxDepth = 10000

// New returns a walk over s from its start.
func New(s string) Walker { return Walker{s: s} }

// Bad reports whether the walk met invalid JSON (it is then at the end).
func (w *Walker) Bad() bool { return w.bad }

// Pos is the walk's offset in the document.
func (w *Walker) Pos() int { return w.i }

// Doc is the document walked.
func (w *Walker) Doc() string { return w.s }

func (w *Walker) fail() { w.bad, w.i = true, len(w.s) }

// At skips whitespace and returns the byte the next token starts with (0 at
// the end).
func (w *Walker) At() byte {
	if w.i < len(w.s) && w.s[w.i] > ' ' {
		return w.s[w.i] // engines write JSON without spaces
	}
	i := w.i
	for ; i < len(w.s); i++ {
		switch c := w.s[i]; c {
		case ' ', '\t', '\n', '\r':
		default:
			w.i = i
			return c
		}
	}
	w.i = i
	return 0
}

// Lit consumes lit when the document continues with exactly those bytes at
// the walk's position (no whitespace skipped): a reader of a shape an engine
// always writes the same way matches its keys and punctuation in one
// comparison each, and goes back (Reset) to the general walk on a miss.
func (w *Walker) Lit(lit string) bool {
	if strings.HasPrefix(w.s[w.i:], lit) {
		w.i += len(lit)
		return true
	}
	return false
}

// Reset moves the walk back to pos, a position it was at, and clears a
// failure met since.
func (w *Walker) Reset(pos int) { w.i, w.bad = pos, false }

// SkipTo moves the walk to end, where a value the caller read from Doc()
// at the walk's position ends (a reader of a shape an engine always writes
// the same way scans it in one loop of its own).
func (w *Walker) SkipTo(end int) { w.i = end }

// Members iterates the object at the walk's position (At() == '{').
func (w *Walker) Members(yield func(key string) bool) {
	w.i++
	if w.At() == '}' {
		w.i++
		return
	}
	for {
		if w.At() != '"' {
			w.fail()
			return
		}
		start := w.i
		key, esc := w.Str()
		if esc {
			key = gjson.Parse(w.s[start:w.i]).Str
		}
		if w.At() != ':' {
			w.fail()
			return
		}
		w.i++
		w.At()
		if !yield(key) {
			return
		}
		switch w.At() {
		case ',':
			w.i++
		case '}':
			w.i++
			return
		default:
			w.fail()
			return
		}
	}
}

// Elements iterates the array at the walk's position (At() == '[').
func (w *Walker) Elements(yield func(int) bool) {
	w.i++
	if w.At() == ']' {
		w.i++
		return
	}
	for n := 0; ; n++ {
		w.At()
		if !yield(n) {
			return
		}
		switch w.At() {
		case ',':
			w.i++
		case ']':
			w.i++
			return
		default:
			w.fail()
			return
		}
	}
}

// Each calls fn for each value gjson's Result.ForEach yields for the value
// at the walk's position (an array's elements, an object's member values, a
// scalar itself), with the walk at that value; fn consumes it.
func (w *Walker) Each(fn func()) {
	switch w.At() {
	case '[':
		for range w.Elements {
			fn()
		}
	case '{':
		for range w.Members {
			fn()
		}
	default:
		fn()
	}
}

// End reports whether only whitespace is left.
func (w *Walker) End() bool {
	w.At()
	return w.i == len(w.s)
}

// Valid is gjson.Valid, within MaxDepth: use it rather than gjson.Valid on
// anything a client or an engine sent, since gjson's recursion is unbounded.
func Valid(s string) bool {
	w := Walker{s: s}
	w.Skip()
	return !w.bad && w.End()
}

// ValidBytes is Valid of b, without a copy.
func ValidBytes(b []byte) bool { return Valid(unsafe.String(unsafe.SliceData(b), len(b))) }

// IsObject reports whether body is valid JSON (as gjson.Valid has it)
// whose value is an object: the check every agent request gets, in one pass
// over the bytes (gjson's Valid and then Parse scanned them twice).
func IsObject(body []byte) bool {
	w := Walker{s: unsafe.String(unsafe.SliceData(body), len(body))}
	if w.At() != '{' {
		return false
	}
	w.Skip()
	return !w.bad && w.End()
}

// Skip consumes the value at the walk's position.
func (w *Walker) Skip() { w.Value() }

// Value consumes the value at the walk's position and returns its raw text
// and where it starts in the document.
func (w *Walker) Value() (raw string, at int) {
	c := w.At()
	at = w.i
	switch c {
	case '{', '[':
		if w.depth++; w.depth > MaxDepth {
			w.depth--
			w.fail()
			break
		}
		if c == '{' {
			for range w.Members {
				w.Skip()
			}
		} else if !w.intArray() {
			for range w.Elements {
				w.Skip()
			}
		}
		w.depth--
	case '"':
		w.Str()
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		w.number()
	case 't':
		w.literal("true")
	case 'f':
		w.literal("false")
	case 'n':
		w.literal("null")
	default:
		w.fail()
	}
	if w.bad {
		return "", at
	}
	return w.s[at:w.i], at
}

// intArray consumes the array at the walk's position (At() == '[') when it
// is written as engines write token bytes and ids: non-negative integers
// without leading zeros, commas, no spaces (or empty). For anything else it
// returns false and leaves the walk where it was, and the general path reads
// the array. Every array it takes is one gjson.Valid accepts, and it ends
// where the general path would: a quarter of an answer's walk was these
// arrays, element by element.
func (w *Walker) intArray() bool {
	s, i := w.s, w.i+1
	if byteAt(s, i) == ']' {
		w.i = i + 1
		return true
	}
	for {
		switch c := byteAt(s, i); {
		case c == '0':
			i++
		case c >= '1' && c <= '9':
			i = digitsEnd(s, i+1)
		default:
			return false
		}
		switch byteAt(s, i) {
		case ',':
			i++
		case ']':
			w.i = i + 1
			return true
		default:
			return false
		}
	}
}

// plain marks the bytes a string's contents may hold as they are.
var plain = func() (t [256]bool) {
	for c := ' '; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// Str consumes the string at the walk's position (At() == '"') and returns
// its contents as written (escapes kept) and whether it has escapes.
func (w *Walker) Str() (raw string, esc bool) {
	start := w.i + 1
	end, esc := StringEnd(w.s, start)
	if end < 0 {
		w.fail()
		return "", false
	}
	w.i = end + 1
	return w.s[start:end], esc
}

// StringEnd returns the index of the quote that closes the JSON string
// whose text starts at s[i] (after its opening quote), and whether the
// string has escapes; -1 when it has a control character, a bad escape or
// no end. For readers that scan a shape an engine always writes the same
// way in a loop of their own.
func StringEnd(s string, i int) (end int, esc bool) {
	start := i
	for ; i < len(s); i++ {
		if plain[s[i]] {
			if i-start >= 15 { // a long string (a prompt, code): on to the next quote, escape or control byte
				i = plainRun(s, i+1) - 1
			}
			continue
		}
		switch s[i] {
		case '"':
			return i, esc
		case '\\':
			esc = true
			i++
			if i == len(s) {
				return -1, false
			}
			switch s[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				for range 4 {
					i++
					if i >= len(s) || !isHex(s[i]) {
						return -1, false
					}
				}
			default:
				return -1, false
			}
		default: // a control character
			return -1, false
		}
	}
	return -1, false
}

// plainRun returns where the run of plain string bytes from i ends: the
// index of the first quote, backslash or control character, or, with fewer
// than eight bytes left, where they start, and StringEnd's byte loop reads
// on from there. Prompts and code are long strings: this is most of
// validating a request. Eight bytes at a time (SWAR), and past the first
// 64 bytes 32 at a time where the CPU has AVX2: a run that ends before
// then (a line of code, a short paragraph) is no faster with a vector
// scan's call (bench/RESULTS.md).
func plainRun(s string, i int) int { return scanRun(s, i, hasAVX2) }

// scanRun is plainRun, with the vector scan when vector is set.
func scanRun(s string, i int, vector bool) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for words := 0; i+8 <= len(s); i += 8 {
		if words++; words > 8 && vector {
			return vectorRun(s, i)
		}
		v := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		q, b := v^(ones*'"'), v^(ones*'\\')
		// bit tricks for "this byte is": below 0x20 (v), zero (q: a quote,
		// b: a backslash). A borrow can mark bytes above a match, never
		// below one, so the lowest mark is the first match.
		if m := (v-ones*0x20)&^v&highs | (q-ones)&^q&highs | (b-ones)&^b&highs; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	return i
}

// vectorRun is plainRun from i on, 32 bytes at a time (scan_amd64.s), the
// last ones eight at a time.
func vectorRun(s string, i int) int {
	if len(s)-i >= 32 {
		if i = specialAVX2(s, i); i < len(s) && !plain[s[i]] {
			return i
		}
	}
	return scanRun(s, i, false)
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number consumes the number at the walk's position.
func (w *Walker) number() {
	if end := NumberEnd(w.s, w.i); end >= 0 {
		w.i = end
	} else {
		w.fail()
	}
}

// NumberEnd returns where the JSON number at s[i] ends (after a leading 0,
// whatever follows), or -1 when none starts there.
func NumberEnd(s string, i int) int {
	if byteAt(s, i) == '-' {
		i++
	}
	switch {
	case byteAt(s, i) == '0':
		i++
	case !isDigit(byteAt(s, i)):
		return -1
	default:
		i = digitsEnd(s, i)
	}
	if byteAt(s, i) == '.' {
		if !isDigit(byteAt(s, i+1)) {
			return -1
		}
		i = digitsEnd(s, i+1)
	}
	if c := byteAt(s, i); c == 'e' || c == 'E' {
		i++
		if c := byteAt(s, i); c == '+' || c == '-' {
			i++
		}
		if !isDigit(byteAt(s, i)) {
			return -1
		}
		i = digitsEnd(s, i)
	}
	return i
}

// byteAt returns s[i], 0 past the end.
func byteAt(s string, i int) byte {
	if i < len(s) {
		return s[i]
	}
	return 0
}

// digitsEnd returns the end of the digits from i.
func digitsEnd(s string, i int) int {
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

func (w *Walker) literal(lit string) {
	if len(w.s)-w.i < len(lit) || w.s[w.i:w.i+len(lit)] != lit {
		w.fail()
		return
	}
	w.i += len(lit)
}

// The conversions below take a value's raw text (valid JSON) and return
// what gjson's Result methods would: a fast path for the plain forms
// engines write, gjson itself for the rest.

// AsString is gjson's Result.String.
func AsString(raw string) string {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		in := raw[1 : len(raw)-1]
		if !hasEscape(in) {
			return in
		}
		if out, ok := unescapeShort(in); ok {
			return out
		}
	}
	return gjson.Parse(raw).String()
}

// unescapeShort is gjson's unescape of a valid string's contents: the runs
// between escapes are copied whole (prompts escape every newline, and
// json.Marshal writes <, > and & as \u escapes; gjson copies byte by
// byte). ok is false only where a \u escape's digits are not hex, which
// valid JSON never has.
func unescapeShort(s string) (_ string, ok bool) {
	b := make([]byte, 0, len(s))
	for {
		i := strings.IndexByte(s, '\\')
		if i < 0 {
			return owned(append(b, s...)), true
		}
		b = append(b, s[:i]...)
		if i+1 == len(s) {
			return owned(b), true // a lone backslash at the end: gjson stops there
		}
		n := 2
		switch c := s[i+1]; c {
		case 'n':
			b = append(b, '\n')
		case 't':
			b = append(b, '\t')
		case 'r':
			b = append(b, '\r')
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case '"', '\\', '/':
			b = append(b, c)
		case 'u':
			if i+6 > len(s) {
				return owned(b), true // gjson stops at a short \u escape
			}
			r, ok := hex4(s[i+2:])
			if !ok {
				return "", false
			}
			n = 6
			if r >= 0xD800 && r < 0xDC00 && len(s) >= i+12 && s[i+6] == '\\' && s[i+7] == 'u' {
				if r2, ok := hex4(s[i+8:]); ok && r2 >= 0xDC00 && r2 < 0xE000 {
					r, n = utf16.DecodeRune(r, r2), 12
				}
			}
			b = utf8.AppendRune(b, r) // a lone surrogate becomes U+FFFD, as gjson writes it
		default:
			return owned(b), true // not an escape: gjson stops there
		}
		s = s[i+n:]
	}
}

// hex4 reads the four hex digits a \u escape starts with.
func hex4(s string) (rune, bool) {
	var r rune
	for _, c := range []byte(s[:4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// owned is b as a string without a copy: b was made here and is never
// written again.
func owned(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// AsStr is gjson's Result.Str: a string's contents, "" for other values.
func AsStr(raw string) string {
	if len(raw) == 0 || raw[0] != '"' {
		return ""
	}
	return AsString(raw)
}

func hasEscape(raw string) bool { return strings.IndexByte(raw, '\\') >= 0 }

// AsInt is gjson's Result.Int.
func AsInt(raw string) int64 {
	if n, ok := plainInt(raw); ok {
		return n
	}
	return gjson.Parse(raw).Int()
}

// plainInt parses an integer of up to 18 digits (exact in an int64).
func plainInt(raw string) (int64, bool) {
	neg := len(raw) > 0 && raw[0] == '-'
	d := raw
	if neg {
		d = raw[1:]
	}
	if len(d) == 0 || len(d) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(d); i++ {
		if !isDigit(d[i]) {
			return 0, false
		}
		n = n*10 + int64(d[i]-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// AppendInt32s appends the elements of raw, a JSON array of non-negative
// integers of at most nine digits without spaces or leading zeros (token ids
// as engines write them), in one scan, and reports true. For any other raw
// it returns dst as it was and false, and the caller reads the array
// element by element.
func AppendInt32s(dst []int32, raw string) ([]int32, bool) {
	out, end, ok := int32sAt(dst, raw, 0)
	if !ok || end != len(raw) {
		return dst, false
	}
	return out, true
}

// Int32s reads the array at the walk's position as AppendInt32s does, in
// the scan that steps over it: it appends the elements to dst and returns
// the array as written and where it starts. For any other value it returns
// dst as it was and false, and leaves the walk where it was.
func (w *Walker) Int32s(dst []int32) (_ []int32, raw string, at int, ok bool) {
	if w.At() != '[' {
		return dst, "", w.i, false
	}
	at = w.i
	if byteAt(w.s, at+1) != ']' {
		dst = slices.Grow(dst, (len(w.s)-at)/4) // ids take 2-7 bytes each: one allocation
	}
	out, end, ok := int32sAt(dst, w.s, at)
	if !ok {
		return dst, "", at, false
	}
	w.i = end
	return out, w.s[at:end], at, true
}

// int32sAt scans the array of plain int32s that starts at s[i] == '[',
// appending its elements to dst. It returns where the array ends, or dst
// as it was and false.
func int32sAt(dst []int32, s string, i int) ([]int32, int, bool) {
	n := len(dst)
	if byteAt(s, i) != '[' {
		return dst, i, false
	}
	i++
	if byteAt(s, i) == ']' {
		return dst, i + 1, true
	}
	for {
		start := i
		var v int32
		for ; i < len(s) && isDigit(s[i]); i++ {
			v = v*10 + int32(s[i]-'0')
		}
		if d := i - start; d == 0 || d > 9 || d > 1 && s[start] == '0' {
			return dst[:n], start, false
		}
		dst = append(dst, v)
		switch byteAt(s, i) {
		case ',':
			i++
		case ']':
			return dst, i + 1, true
		default:
			return dst[:n], i, false
		}
	}
}

// AsFloat is gjson's Result.Float.
func AsFloat(raw string) float64 {
	if f, ok := PlainFloat(raw); ok {
		return f
	}
	if len(raw) > 0 && (raw[0] == '-' || isDigit(raw[0])) {
		f, _ := strconv.ParseFloat(raw, 64)
		return f
	}
	return gjson.Parse(raw).Float()
}

// pow10 holds the powers of ten a float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
	1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// PlainFloat parses a decimal with at most 15 significant digits and no
// exponent (-0.0123) the way strconv.ParseFloat does in its exact fast
// path: mantissa and power of ten are exact float64s, so one correctly
// rounded division gives the correctly rounded result.
func PlainFloat(raw string) (float64, bool) {
	i, neg := 0, false
	if len(raw) > 0 && raw[0] == '-' {
		i, neg = 1, true
	}
	var m uint64
	sig, whole, frac, dot := 0, 0, 0, false
	for ; i < len(raw); i++ {
		c := raw[i]
		switch {
		case isDigit(c):
			if sig > 0 || c != '0' {
				sig++
			}
			m = m*10 + uint64(c-'0')
			if dot {
				frac++
			} else {
				whole++
			}
		case c == '.' && !dot:
			dot = true
		default:
			return 0, false
		}
	}
	if whole == 0 || dot && frac == 0 || sig > 15 || frac >= len(pow10) {
		return 0, false
	}
	f := float64(m) / pow10[frac]
	if neg {
		f = -f
	}
	return f, true
}
