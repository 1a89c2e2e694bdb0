package grammar

import (
	"errors"
	"fmt"
	"regexp/syntax"
	"unicode"
	"unicode/utf8"
)

// A string's "pattern" is a regular expression over its decoded
// characters (unanchored, as JSON Schema has it: "^" and "$" at its ends
// anchor it). It is parsed with Go's regexp/syntax (Perl flags: RE2, close
// to ECMA-262 for what schemas use) and built over the characters' JSON
// form: '"', '\' and control characters as json.dumps escapes them, the
// rest as UTF-8.

var errUnsupportedPattern = errors.New("unsupported pattern")

// patternString builds a JSON string whose value matches pattern.
func (c *schemaCompiler) patternString(pattern string) (Frag, error) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return Frag{}, fmt.Errorf("%w: %v", errUnsupportedPattern, err)
	}
	re = re.Simplify()
	begin, end := false, false
	if re.Op == syntax.OpConcat && len(re.Sub) > 0 {
		subs := re.Sub
		if subs[0].Op == syntax.OpBeginText {
			begin, subs = true, subs[1:]
		}
		if len(subs) > 0 && subs[len(subs)-1].Op == syntax.OpEndText {
			end, subs = true, subs[:len(subs)-1]
		}
		re = &syntax.Regexp{Op: syntax.OpConcat, Sub: subs}
	} else if re.Op == syntax.OpBeginText || re.Op == syntax.OpEndText {
		begin, end = re.Op == syntax.OpBeginText, re.Op == syntax.OpEndText
		re = &syntax.Regexp{Op: syntax.OpEmptyMatch}
	}
	b := c.b
	body, err := c.regex(re)
	if err != nil {
		return Frag{}, err
	}
	parts := []Frag{b.Lit(`"`)}
	if !begin {
		parts = append(parts, b.Star(c.anyChar()))
	}
	parts = append(parts, body)
	if !end {
		parts = append(parts, b.Star(c.anyChar()))
	}
	parts = append(parts, b.Lit(`"`))
	return b.Seq(parts...), b.check()
}

// anyChar matches any one character in its JSON form (json.dumps' escapes
// for the characters that need one).
func (c *schemaCompiler) anyChar() Frag {
	return c.runeClass([]rune{0, unicode.MaxRune})
}

func (c *schemaCompiler) regex(re *syntax.Regexp) (Frag, error) {
	b := c.b
	if err := b.check(); err != nil {
		return Frag{}, err
	}
	switch re.Op {
	case syntax.OpEmptyMatch:
		return b.Empty(), nil
	case syntax.OpNoMatch:
		return b.Never(), nil
	case syntax.OpLiteral:
		parts := make([]Frag, 0, len(re.Rune))
		for _, r := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 {
				parts = append(parts, c.runeClass(foldClass(r)))
			} else {
				parts = append(parts, c.runeClass([]rune{r, r}))
			}
		}
		return b.Seq(parts...), nil
	case syntax.OpCharClass:
		return c.runeClass(re.Rune), nil
	case syntax.OpAnyCharNotNL:
		return c.runeClass([]rune{0, '\n' - 1, '\n' + 1, unicode.MaxRune}), nil
	case syntax.OpAnyChar:
		return c.anyChar(), nil
	case syntax.OpCapture:
		return c.regex(re.Sub[0])
	case syntax.OpConcat, syntax.OpAlternate:
		parts := make([]Frag, 0, len(re.Sub))
		for _, sub := range re.Sub {
			f, err := c.regex(sub)
			if err != nil {
				return Frag{}, err
			}
			parts = append(parts, f)
		}
		if re.Op == syntax.OpConcat {
			return b.Seq(parts...), nil
		}
		if len(parts) == 0 {
			return b.Never(), nil
		}
		return b.Alt(parts...), nil
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		f, err := c.regex(re.Sub[0])
		if err != nil {
			return Frag{}, err
		}
		switch re.Op {
		case syntax.OpStar:
			return b.Star(f), nil
		case syntax.OpPlus:
			return b.Plus(f), nil
		}
		return b.Opt(f), nil
	case syntax.OpRepeat: // Simplify leaves only x{0,0}-like forms; expand anyway
		if re.Max > maxUnrollChars || re.Min > maxUnrollChars {
			return Frag{}, fmt.Errorf("%w: repetition above %d", errUnsupportedPattern, maxUnrollChars)
		}
		var ferr error
		f, err := b.Repeat(re.Min, re.Max, func() Frag {
			f, err := c.regex(re.Sub[0])
			if err != nil {
				ferr = err
				return b.Never()
			}
			return f
		})
		if ferr != nil {
			return Frag{}, ferr
		}
		return f, err
	}
	return Frag{}, fmt.Errorf("%w: %v", errUnsupportedPattern, re.Op)
}

// foldClass is the case-folding orbit of r as ranges.
func foldClass(r rune) []rune {
	out := []rune{r, r}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		out = append(out, f, f)
	}
	return out
}

// runeClass matches one character in the ranges (pairs lo, hi), written
// as JSON: characters json.dumps escapes as their escape, surrogates never,
// the rest as UTF-8.
func (c *schemaCompiler) runeClass(ranges []rune) Frag {
	b := c.b
	var alts []Frag
	var plain [][2]rune
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], ranges[i+1]
		for r := lo; r <= hi && r < 0x20; r++ { // controls: escaped
			alts = append(alts, b.Lit(QuoteString(string(r))[1:len(QuoteString(string(r)))-1]))
		}
		lo = max(lo, 0x20)
		for _, special := range []rune{'"', '\\'} {
			if lo <= special && special <= hi {
				alts = append(alts, b.Lit(`\`+string(special)))
				if lo < special {
					plain = append(plain, [2]rune{lo, special - 1})
				}
				lo = special + 1
			}
		}
		if lo <= hi {
			plain = append(plain, [2]rune{lo, hi})
		}
	}
	for _, p := range plain {
		for _, seq := range utf8Ranges(p[0], p[1]) {
			parts := make([]Frag, len(seq))
			for i, br := range seq {
				parts[i] = b.Class(br)
			}
			alts = append(alts, b.Seq(parts...))
		}
	}
	if len(alts) == 0 {
		return b.Never()
	}
	return b.Alt(alts...)
}

// utf8Ranges splits the runes lo..hi (surrogates left out) into sequences
// of byte ranges, each matching the UTF-8 encodings of a sub-range.
func utf8Ranges(lo, hi rune) [][]ByteRange {
	var out [][]ByteRange
	var split func(lo, hi rune)
	split = func(lo, hi rune) {
		if lo > hi {
			return
		}
		// Surrogates are not characters.
		if lo <= 0xDFFF && hi >= 0xD800 {
			split(lo, 0xD7FF)
			split(0xE000, hi)
			return
		}
		// One encoded length at a time.
		for _, edge := range []rune{0x7F, 0x7FF, 0xFFFF} {
			if lo <= edge && hi > edge {
				split(lo, edge)
				split(edge+1, hi)
				return
			}
		}
		if hi <= 0x7F {
			out = append(out, []ByteRange{{byte(lo), byte(hi)}})
			return
		}
		n := utf8.RuneLen(lo)
		// Split until every continuation byte spans its whole range or
		// the prefixes agree.
		for i := 1; i < n; i++ {
			m := rune(1)<<(6*i) - 1
			if lo&^m != hi&^m {
				if lo&m != 0 {
					split(lo, lo|m)
					split((lo|m)+1, hi)
					return
				}
				if hi&m != m {
					split(lo, (hi&^m)-1)
					split(hi&^m, hi)
					return
				}
			}
		}
		var a, z [4]byte
		utf8.EncodeRune(a[:], lo)
		utf8.EncodeRune(z[:], hi)
		seq := make([]ByteRange, n)
		for i := range seq {
			seq[i] = ByteRange{a[i], z[i]}
		}
		out = append(out, seq)
	}
	split(lo, min(hi, unicode.MaxRune))
	return out
}
