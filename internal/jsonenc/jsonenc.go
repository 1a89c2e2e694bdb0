// Package jsonenc writes the bytes encoding/json writes for a string and
// for a json.RawMessage, without its reflection and without compacting
// again what is already compact: hone builds engine requests from long
// conversations (a coding agent's is 50-200 KB) on every call, and
// json.Marshal validated and compacted every message's content once more.
// The tests hold both functions to encoding/json.
package jsonenc

import (
	"encoding/json"
	"math/bits"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

const hex = "0123456789abcdef"

// AppendString appends s as json.Marshal writes a string: quoted, with
// ", \ and control characters escaped, <, > and & escaped for HTML, U+2028
// and U+2029 escaped, and each byte of invalid UTF-8 written as \ufffd.
func AppendString(b []byte, s string) []byte {
	return append(appendEscaped(append(b, '"'), s), '"')
}

// appendEscaped appends s as AppendString does, without the quotes.
func appendEscaped(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			start = i + size
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			start = i + size
		}
		i += size
	}
	return append(b, s[start:]...)
}

// AppendLiteral appends the string that raw, a valid JSON string literal
// (no space around it),
// holds (decoded as gjson decodes it) as AppendString writes it: what
// json.Marshal writes for a string a client sent, without decoding it
// first. The runs already in that form are copied whole; other escapes,
// <, >, &, U+2028, U+2029 and invalid UTF-8 are written as AppendString
// writes them.
func AppendLiteral(b []byte, raw string) []byte {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return AppendString(b, "")
	}
	in := raw[1 : len(raw)-1]
	b = append(b, '"')
	start := 0
	for i := plainRun(in, 0); i < len(in); i = plainRun(in, i) {
		if n := plainAt(in, i, true); n > 0 {
			i += n
			continue
		}
		b = append(b, in[start:i]...)
		n := 0
		if in[i] >= utf8.RuneSelf { // invalid UTF-8, U+2028 or U+2029: as AppendString writes them
			_, n = utf8.DecodeRuneInString(in[i:])
			b = appendEscaped(b, in[i:i+n])
		} else {
			var r rune
			if r, n = literalRune(in[i:]); n == 0 {
				return append(b, '"') // not valid JSON: gjson stops here too
			}
			b = appendEscaped(b, string(r))
		}
		i += n
		start = i
	}
	return append(append(b, in[start:]...), '"')
}

// literalRune reads the ASCII character at the start of s, a string
// literal's contents at a place plainAt refuses: <, > or &, or an escape
// AppendString writes otherwise (\/, a \u escape of anything but what it
// writes as one, a surrogate pair read as one character, as gjson pairs
// them). n is 0 where gjson's decoding stops (a control character, a bad
// escape): not valid JSON.
func literalRune(s string) (r rune, n int) {
	switch {
	case s[0] != '\\':
		if s[0] < 0x20 || s[0] == '"' {
			return 0, 0
		}
		return rune(s[0]), 1
	case len(s) < 2:
		return 0, 0
	case s[1] == '/':
		return '/', 2
	case s[1] != 'u':
		return 0, 0
	}
	r, ok := hex4(s[2:])
	if !ok {
		return 0, 0
	}
	if r >= 0xD800 && r < 0xDC00 && len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
		if r2, ok := hex4(s[8:]); ok && r2 >= 0xDC00 && r2 < 0xE000 {
			return utf16.DecodeRune(r, r2), 12
		}
	}
	return r, 6 // a lone surrogate: string(r) is U+FFFD, as gjson writes it
}

// hex4 reads four hex digits at the start of s.
func hex4(s string) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[:4]) {
		if !isHex(c) {
			return 0, false
		}
		r = r<<4 | rune(strings.IndexByte(hex, c|0x20))
	}
	return r, true
}

// AppendRaw appends raw as json.Marshal writes a json.RawMessage: compacted,
// with <, >, &, U+2028 and U+2029 in its strings escaped. A string literal
// with none of those (what AppendString writes, and most message content)
// is already in that form and is copied as it is; anything else goes
// through encoding/json. Invalid raw is an error, as for json.Marshal.
func AppendRaw(b []byte, raw []byte) ([]byte, error) {
	if plainString(raw) {
		return append(b, raw...), nil
	}
	out, err := json.Marshal(json.RawMessage(raw))
	if err != nil {
		return b, err
	}
	return append(b, out...), nil
}

// Encoded reports whether raw is a JSON string literal that AppendString
// writes unchanged from the string it holds: json.Marshal's own form. Such
// a string from a request (most content: text, tool results) can be
// passed on as it is, not decoded and encoded again.
func Encoded(raw string) bool { return stringLiteral(raw, true) }

// plainString reports whether raw is one valid JSON string literal, in
// valid UTF-8, without a byte that compacting for HTML would change.
func plainString(raw []byte) bool {
	return stringLiteral(unsafe.String(unsafe.SliceData(raw), len(raw)), false)
}

// stringLiteral reports whether raw is one valid JSON string literal in
// valid UTF-8 without <, >, &, U+2028 or U+2029; strict also refuses the
// escapes AppendString would not write (\/ and \u). Plain runs are passed
// over a word at a time (plainRun): content is most of a conversation's
// bytes.
func stringLiteral(raw string, strict bool) bool {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return false
	}
	in := raw[1 : len(raw)-1]
	for i := plainRun(in, 0); i < len(in); i = plainRun(in, i) {
		n := plainAt(in, i, strict)
		if n == 0 {
			return false
		}
		i += n
	}
	return true
}

// plainRun returns where the run of plain bytes (printable ASCII other
// than ", \, <, > and &) and two-byte escapes other than \/ from in[i]
// ends, eight bytes at a time: the index of the first other byte, or, with
// fewer than eight bytes left, where they start (the caller reads those
// one by one). Code has an escape on every line (\n, \t, \"): the scan
// passes over it and goes on a word at a time right after it.
func plainRun(in string, i int) int {
	for i+8 <= len(in) {
		m := special8(load64(in[i:]))
		if m == 0 {
			i += 8
			continue
		}
		i += bits.TrailingZeros64(m) / 8
		if in[i] != '\\' || i+1 == len(in) || !shortEscape[in[i+1]] {
			return i
		}
		i += 2
	}
	return i
}

// shortEscape holds the characters after a backslash of the two-byte
// escapes AppendString writes.
var shortEscape = [256]bool{'"': true, '\\': true, 'b': true, 'f': true, 'n': true, 'r': true, 't': true}

func load64(s string) uint64 {
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// plainAt returns how many bytes from in[i] are a plain character, a valid
// escape or a rune AppendString writes as it is; 0 for anything else.
func plainAt(in string, i int, strict bool) int {
	switch c := in[i]; {
	case c >= utf8.RuneSelf:
		r, size := utf8.DecodeRuneInString(in[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			return 0
		}
		return size
	case c == '"' || c < 0x20 || c == '<' || c == '>' || c == '&':
		return 0
	case c == '\\':
		return escapeLen(in[i:], strict)
	}
	return 1
}

// escapeLen is the length of the valid escape e starts with, 0 if none (or,
// when strict, if AppendString would write its character otherwise).
func escapeLen(e string, strict bool) int {
	if len(e) < 2 {
		return 0
	}
	switch e[1] {
	case '"', '\\', 'b', 'f', 'n', 'r', 't':
		return 2
	case '/':
		if strict {
			return 0
		}
		return 2
	case 'u':
		if len(e) < 6 {
			return 0
		}
		for i := 2; i < 6; i++ {
			if !isHex(e[i]) {
				return 0
			}
		}
		if strict && !writesU(e[2:6]) {
			return 0
		}
		return 6
	}
	return 0
}

// writesU reports whether AppendString writes the character of \u<h> as
// that escape: a control character without a short escape, <, >, & or
// U+2028 and U+2029, in lowercase hex.
func writesU(h string) bool {
	switch h {
	case "2028", "2029", "003c", "003e", "0026":
		return true
	}
	if h[:2] != "00" || h[2] > '1' || h[3] >= 'A' && h[3] <= 'F' {
		return false
	}
	switch h[2:] {
	case "08", "09", "0a", "0c", "0d": // \b \t \n \f \r
		return false
	}
	return true
}

// special8 marks the bytes of v that are not printable ASCII other than ",
// \, <, > and &: the high bit of each. A subtraction's borrow can also mark
// bytes after (above) a marked one, never before it, so the lowest mark is
// the first such byte; zero when there is none.
func special8(v uint64) uint64 {
	bad := v | (v-0x20*ones)&^v // non-ASCII, or below 0x20
	// " (0x22) and & (0x26) differ only in bit 2, < (0x3c) and > (0x3e)
	// only in bit 1: setting that bit tests for both at once.
	bad |= zeroByte(v^'\\'*ones) | zeroByte((v|0x04*ones)^'&'*ones) | zeroByte((v|0x02*ones)^'>'*ones)
	return bad & highs
}

const ones, highs = 0x0101010101010101, 0x8080808080808080

// zeroByte has a high bit set where x has a zero byte (and possibly above
// one): nonzero exactly when x has one.
func zeroByte(x uint64) uint64 { return (x - ones) &^ x }

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }
