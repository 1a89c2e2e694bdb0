package capture

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/hone-rl/hone/internal/jsonenc"
	"github.com/hone-rl/hone/internal/jsonwalk"
)

// canonArgs is the canonical form of tool-call arguments that session
// inference hashes: what json.Marshal writes of json.Unmarshal's reading of
// them into an interface value (object keys sorted, the last of a repeated
// key kept, no spacing, numbers as float64, strings escaped as Go does), so
// that an agent that sends arguments back re-serialised still extends its
// conversation; invalid JSON is kept trimmed as is. Agents send every
// earlier tool call again with each call, so this runs for each of them on
// every Admit: it reads the text once and writes the result, without the
// maps and interfaces encoding/json goes through (canon_ref_test.go holds
// it to that reference).
func canonArgs(s string) string {
	c := canonScanners.Get().(*canonScanner)
	defer canonScanners.Put(c)
	*c = canonScanner{s: s, out: c.out[:0], members: c.members[:0], scratch: c.scratch[:0]}
	b, ok := c.document()
	if cap(c.out) > maxPooledCanon || cap(c.scratch) > maxPooledCanon || cap(c.members) > maxPooledCanon/64 {
		c.out, c.scratch, c.members = nil, nil, nil // a large one-off is not kept
	}
	if !ok {
		return strings.TrimSpace(s)
	}
	return string(b)
}

// canonScanners keeps scanners' buffers between calls: Admit reads every
// earlier tool call of a conversation again with each call.
var canonScanners = sync.Pool{New: func() any { return new(canonScanner) }}

const maxPooledCanon = 64 << 10

// canonScanner reads one JSON text and appends its canonical form to out.
type canonScanner struct {
	s       string
	i       int
	depth   int
	out     []byte
	members []canonMember // objects being read, innermost last
	scratch []byte        // an object's members while they are sorted
}

// canonMember is an object member: its decoded key and where its canonical
// value sits in out.
type canonMember struct {
	key        string
	start, end int
}

// maxCanonDepth is encoding/json's nesting limit: deeper input is an error.
const maxCanonDepth = 10000

func (c *canonScanner) document() ([]byte, bool) {
	c.space()
	if !c.value() {
		return nil, false
	}
	c.space()
	return c.out, c.i == len(c.s)
}

func (c *canonScanner) space() {
	for c.i < len(c.s) {
		switch c.s[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

func (c *canonScanner) value() bool {
	if c.i >= len(c.s) {
		return false
	}
	switch b := c.s[c.i]; {
	case b == '{':
		return c.object()
	case b == '[':
		return c.array()
	case b == '"':
		raw, ok := c.str()
		if ok {
			c.out = jsonenc.AppendString(c.out, decodeJSONString(raw))
		}
		return ok
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	case b == '-' || b >= '0' && b <= '9':
		return c.number()
	}
	return false
}

func (c *canonScanner) literal(lit string) bool {
	if !strings.HasPrefix(c.s[c.i:], lit) {
		return false
	}
	c.i += len(lit)
	c.out = append(c.out, lit...)
	return true
}

func (c *canonScanner) open() bool {
	c.depth++
	c.i++
	c.space()
	return c.depth <= maxCanonDepth
}

// next reads what follows an element or a member: a comma (more is true)
// or the container's closing byte; ok is false for anything else.
func (c *canonScanner) next(closing byte) (more, ok bool) {
	c.space()
	if c.i >= len(c.s) {
		return false, false
	}
	switch c.s[c.i] {
	case ',':
		c.i++
		c.space()
		return true, true
	case closing:
		c.i++
		c.depth--
		return false, true
	}
	return false, false
}

func (c *canonScanner) array() bool {
	if !c.open() {
		return false
	}
	c.out = append(c.out, '[')
	if c.i < len(c.s) && c.s[c.i] == ']' {
		c.i++
		c.depth--
		c.out = append(c.out, ']')
		return true
	}
	for {
		if !c.value() {
			return false
		}
		more, ok := c.next(']')
		if !ok {
			return false
		}
		if !more {
			c.out = append(c.out, ']')
			return true
		}
		c.out = append(c.out, ',')
	}
}

// object reads the members' values into out as they come, then rewrites
// them in key order.
func (c *canonScanner) object() bool {
	if !c.open() {
		return false
	}
	start, base := len(c.out), len(c.members)
	if c.i < len(c.s) && c.s[c.i] == '}' {
		c.i++
		c.depth--
		c.out = append(c.out, '{', '}')
		return true
	}
	for more := true; more; {
		if c.i >= len(c.s) || c.s[c.i] != '"' {
			return false
		}
		raw, ok := c.str()
		if !ok {
			return false
		}
		c.space()
		if c.i >= len(c.s) || c.s[c.i] != ':' {
			return false
		}
		c.i++
		c.space()
		at := len(c.out)
		if !c.value() {
			return false
		}
		c.members = append(c.members, canonMember{key: decodeJSONString(raw), start: at, end: len(c.out)})
		if more, ok = c.next('}'); !ok {
			return false
		}
	}
	c.sortMembers(start, base)
	return true
}

// sortMembers rewrites out[start:] (the values of the members from base
// on) as the object json.Marshal writes of a map: keys sorted, each once,
// with its last value.
func (c *canonScanner) sortMembers(start, base int) {
	ms := c.members[base:]
	slices.SortStableFunc(ms, func(a, b canonMember) int { return strings.Compare(a.key, b.key) })
	c.scratch = append(c.scratch[:0], c.out[start:]...)
	c.out = append(c.out[:start], '{')
	for i, m := range ms {
		if i+1 < len(ms) && ms[i+1].key == m.key {
			continue // a later value of the same key replaces it
		}
		if c.out[len(c.out)-1] != '{' {
			c.out = append(c.out, ',')
		}
		c.out = jsonenc.AppendString(c.out, m.key)
		c.out = append(c.out, ':')
		c.out = append(c.out, c.scratch[m.start-start:m.end-start]...)
	}
	c.out = append(c.out, '}')
	c.members = c.members[:base]
}

// str consumes a string and returns its contents as written; escapes and
// bytes are checked as encoding/json's scanner does.
func (c *canonScanner) str() (string, bool) {
	s := c.s
	for i := c.i + 1; i < len(s); i++ {
		switch b := s[i]; {
		case b == '"':
			raw := s[c.i+1 : i]
			c.i = i + 1
			return raw, true
		case b < 0x20:
			return "", false
		case b == '\\':
			i++
			if i >= len(s) {
				return "", false
			}
			switch s[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(s) || hexRune(s[i+1:i+5]) < 0 {
					return "", false
				}
				i += 4
			default:
				return "", false
			}
		}
	}
	return "", false
}

// number consumes a number and appends it as json.Marshal writes a
// float64; one out of float64's range fails, as json.Unmarshal does.
func (c *canonScanner) number() bool {
	s := c.s
	i := jsonwalk.NumberEnd(s, c.i)
	if i < 0 {
		return false
	}
	f, err := strconv.ParseFloat(s[c.i:i], 64)
	if err != nil {
		return false
	}
	c.i = i
	c.out = appendGoFloat(c.out, f)
	return true
}

// appendGoFloat is encoding/json's float64 encoding (ES6 number to string).
func appendGoFloat(b []byte, f float64) []byte {
	abs, format := f, byte('f')
	if abs < 0 {
		abs = -abs
	}
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' { // e-09 is written e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// hexRune reads four hex digits; -1 when they are not.
func hexRune(h string) rune {
	var r rune
	for i := range 4 {
		c := h[i]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// decodeJSONString is encoding/json's reading of a valid string's contents:
// escapes decoded, a lone or broken surrogate and each byte of invalid UTF-8
// read as U+FFFD. Contents without escapes or invalid UTF-8 are returned as
// they are.
func decodeJSONString(raw string) string {
	if strings.IndexByte(raw, '\\') < 0 && utf8.ValidString(raw) {
		return raw
	}
	b := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			if c < utf8.RuneSelf {
				b = append(b, c)
				i++
				continue
			}
			r, size := utf8.DecodeRuneInString(raw[i:])
			b = utf8.AppendRune(b, r) // RuneError for a byte of invalid UTF-8
			i += size
			continue
		}
		switch e := raw[i+1]; e {
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r := hexRune(raw[i+2 : i+6])
			i += 6
			if utf16.IsSurrogate(r) {
				var r1 rune = -1
				if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					r1 = hexRune(raw[i+2 : i+6])
				}
				if dec := utf16.DecodeRune(r, r1); dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			b = utf8.AppendRune(b, r)
			continue
		default: // " \ /
			b = append(b, e)
		}
		i += 2
	}
	return string(b)
}
