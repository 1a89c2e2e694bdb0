// Package jsonenc writes the bytes encoding/json writes for a string and
// for a json.RawMessage, without its reflection and without compacting
// again what is already compact: hone builds engine requests from long
// conversations (a coding agent's is 50-200 KB) on every call, and
// json.Marshal validated and compacted every message's content once more.
// The tests hold both functions to encoding/json.
package jsonenc

import (
	"encoding/json"
	"unicode/utf8"
)

const hex = "0123456789abcdef"

// AppendString appends s as json.Marshal writes a string: quoted, with
// ", \ and control characters escaped, <, > and & escaped for HTML, U+2028
// and U+2029 escaped, and each byte of invalid UTF-8 written as \ufffd.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
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
	b = append(b, s[start:]...)
	return append(b, '"')
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

// plainString reports whether raw is one valid JSON string literal, in
// valid UTF-8, without a byte that compacting for HTML would change.
func plainString(raw []byte) bool {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return false
	}
	in := raw[1 : len(raw)-1]
	if !utf8.Valid(in) {
		return false
	}
	for i := 0; i < len(in); i++ {
		switch c := in[i]; {
		case c == '"' || c < 0x20 || c == '<' || c == '>' || c == '&' || c == 0xe2: // 0xe2 opens U+2028 and U+2029
			return false
		case c == '\\':
			if i++; i == len(in) {
				return false
			}
			switch in[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+5 > len(in) {
					return false
				}
				for _, h := range in[i+1 : i+5] {
					if !isHex(h) {
						return false
					}
				}
				i += 4
			default:
				return false
			}
		}
	}
	return true
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }
