package template

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode"

	"github.com/hone-rl/hone/internal/jsonwalk"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/tidwall/gjson"
)

// pyList is a JSON array as the template sees it. It is a Go slice, so the
// engine treats it as a list, and it prints the way Python prints a list
// (its repr), which templates that print message content unconverted rely on.
type pyList []any

func (l pyList) String() string {
	var sb strings.Builder
	writeRepr(&sb, exec.AsValue(l))
	return sb.String()
}

// noneT is the type of jsonNull.
type noneT complex64

// String prints None as Python does.
func (noneT) String() string { return "None" }

// jsonNull is Python's None: a JSON null, tools or documents not given,
// the template literals none and None. gonja has a single nil for None and
// Undefined (and prints it as ""); hone keeps nil for Undefined only and
// gives None a type of its own that gonja's generic paths treat as an
// opaque false value which prints as "None" (a complex kind: not a number,
// string, list or dict to gonja), while hone's tests and filters recognise
// it: "is none", "is defined", default, tojson, string.
var jsonNull = noneT(0)

var noneType = reflect.TypeOf(jsonNull)

// isNone reports whether v is None (not Undefined).
func isNone(v *exec.Value) bool { return v.Val.IsValid() && v.Val.Type() == noneType }

// noneOrUndefined reports whether v is None or Undefined.
func noneOrUndefined(v *exec.Value) bool { return v == nil || v.IsNil() || isNone(v) }

// maxJSONDepth bounds nesting of decoded values (encoding/json allows 10000;
// the renderer recurses once per level).
const maxJSONDepth = 200

// decodeJSON turns one JSON value into template values: objects become
// ordered dicts (key order kept, as Python's json.loads keeps it), arrays
// lists, integers int, other numbers float64.
func decodeJSON(raw []byte) (any, error) {
	if !jsonwalk.ValidBytes(raw) {
		return nil, errors.New("not valid JSON")
	}
	return decodeValue(gjson.ParseBytes(raw), 0)
}

func decodeValue(r gjson.Result, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, fmt.Errorf("JSON nested deeper than %d", maxJSONDepth)
	}
	switch r.Type {
	case gjson.Null:
		return jsonNull, nil
	case gjson.True, gjson.False:
		return r.Type == gjson.True, nil
	case gjson.String:
		return r.Str, nil
	case gjson.Number:
		return number(json.Number(r.Raw))
	}
	var err error
	if r.IsArray() {
		list := pyList{}
		r.ForEach(func(_, item gjson.Result) bool {
			var v any
			v, err = decodeValue(item, depth+1)
			list = append(list, v)
			return err == nil
		})
		return list, err
	}
	d := exec.NewDict()
	r.ForEach(func(k, item gjson.Result) bool {
		var v any
		if v, err = decodeValue(item, depth+1); err == nil {
			setKey(d, k.Str, v)
		}
		return err == nil
	})
	return d, err
}

// setKey sets key in d; a repeated key keeps its first position and takes
// the last value, as Python's json.loads does.
func setKey(d *exec.Dict, key string, v any) {
	for _, p := range d.Pairs {
		if p.Key.String() == key {
			p.Value = exec.AsValue(v)
			return
		}
	}
	d.Pairs = append(d.Pairs, &exec.Pair{Key: exec.AsValue(key), Value: exec.AsValue(v)})
}

// number converts a JSON number: integers that fit int64 stay integers,
// anything else is a float64 (Python keeps big integers exact; hone prints
// them as floats, a documented gap).
func number(n json.Number) (any, error) {
	s := n.String()
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil && i >= math.MinInt && i <= math.MaxInt {
			return int(i), nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return nil, err
	}
	return f, nil
}

// dictOf returns the ordered dict behind v, nil when v is not one.
func dictOf(v *exec.Value) *exec.Dict {
	switch d := v.Interface().(type) {
	case *exec.Dict:
		return d
	case exec.Dict:
		return &d
	}
	return nil
}

// dictItems lists the key/value pairs of any dict value in Python's order:
// insertion order for ordered dicts, sorted keys for Go maps (which only
// filters create).
func dictItems(v *exec.Value) []*exec.Pair {
	if d := dictOf(v); d != nil {
		return d.Pairs
	}
	var out []*exec.Pair
	for _, k := range v.Keys() {
		val, _ := v.GetItem(k.Interface())
		out = append(out, &exec.Pair{Key: k, Value: val})
	}
	return out
}

// pyFloat formats f as Python's float repr (and json.dumps) does.
func pyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case math.IsNaN(f):
		return "NaN"
	}
	exp := 0
	if f != 0 {
		e := strconv.FormatFloat(f, 'e', -1, 64)
		exp, _ = strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	}
	if exp < -4 || exp >= 16 {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		// Go writes 1e+21 and 1e-07 like Python; only the mantissa of
		// an integral value differs: Python keeps no ".0" there either.
		return s
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// writeRepr writes Python's repr of v (what str() of a list or dict shows).
func writeRepr(sb *strings.Builder, v *exec.Value) {
	switch {
	case noneOrUndefined(v):
		sb.WriteString("None")
	case v.IsBool():
		if v.Bool() {
			sb.WriteString("True")
		} else {
			sb.WriteString("False")
		}
	case v.IsInteger():
		sb.WriteString(strconv.Itoa(v.Integer()))
	case v.IsFloat():
		sb.WriteString(pyFloat(v.Float()))
	case v.IsString():
		writeStrRepr(sb, v.String())
	case v.IsList():
		sb.WriteByte('[')
		for i := range v.Len() {
			if i > 0 {
				sb.WriteString(", ")
			}
			writeRepr(sb, v.Index(i))
		}
		sb.WriteByte(']')
	case v.IsDict():
		sb.WriteByte('{')
		for i, p := range dictItems(v) {
			if i > 0 {
				sb.WriteString(", ")
			}
			writeRepr(sb, p.Key)
			sb.WriteString(": ")
			writeRepr(sb, p.Value)
		}
		sb.WriteByte('}')
	default:
		sb.WriteString(v.String())
	}
}

// writeStrRepr writes Python's repr of a str: single quotes unless the text
// has a single quote and no double quote; backslash, that quote, \n \r \t
// escaped; characters Python does not count as printable (controls,
// format characters, separators other than the space, unassigned code
// points) as \xNN, \uNNNN or \UNNNNNNNN.
func writeStrRepr(sb *strings.Builder, s string) {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	sb.WriteByte(q)
	for _, r := range s {
		switch {
		case r == '\\':
			sb.WriteString(`\\`)
		case r == rune(q):
			sb.WriteByte('\\')
			sb.WriteByte(q)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\r':
			sb.WriteString(`\r`)
		case r == '\t':
			sb.WriteString(`\t`)
		case r == ' ' || isPrintable(r):
			sb.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(sb, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(sb, `\u%04x`, r)
		default:
			fmt.Fprintf(sb, `\U%08x`, r)
		}
	}
	sb.WriteByte(q)
}

// isPrintable is Python's str.isprintable for one character.
func isPrintable(r rune) bool {
	if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs, unicode.Zl, unicode.Zp, unicode.Zs) {
		return false
	}
	return unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S)
}

// pyStr is Python's str(v): strings as they are, None as "None",
// Undefined as "", the rest as repr.
func pyStr(v *exec.Value) string {
	if v.IsString() {
		return v.String()
	}
	if v.IsNil() {
		return "" // Undefined
	}
	var sb strings.Builder
	writeRepr(&sb, v)
	return sb.String()
}

// jsonOpts are json.dumps' formatting arguments.
type jsonOpts struct {
	pretty          bool   // indent is not None: newlines between items
	indent          string // per level
	itemSep, keySep string
	sortKeys        bool
}

// defaultJSON is transformers' tojson without arguments: json.dumps with
// ensure_ascii=False and the default separators.
var defaultJSON = jsonOpts{itemSep: ", ", keySep: ": "}

// toJSON writes v as json.dumps does with ensure_ascii=False, key order
// kept (unless sortKeys).
func toJSON(sb *strings.Builder, v *exec.Value, o *jsonOpts, depth int) error {
	if depth > maxJSONDepth {
		return errors.New("tojson: value nested too deeply")
	}
	newline := func(d int) {
		if o.pretty {
			sb.WriteByte('\n')
			for range d {
				sb.WriteString(o.indent)
			}
		}
	}
	switch {
	case noneOrUndefined(v):
		sb.WriteString("null")
	case v.IsBool():
		if v.Bool() {
			sb.WriteString("true")
		} else {
			sb.WriteString("false")
		}
	case v.IsInteger():
		sb.WriteString(strconv.Itoa(v.Integer()))
	case v.IsFloat():
		sb.WriteString(pyFloat(v.Float()))
	case v.IsString():
		writeJSONString(sb, v.String())
	case v.IsList():
		n := v.Len()
		sb.WriteByte('[')
		for i := range n {
			if i > 0 {
				sb.WriteString(o.itemSep)
			}
			newline(depth + 1)
			if err := toJSON(sb, v.Index(i), o, depth+1); err != nil {
				return err
			}
		}
		if n > 0 {
			newline(depth)
		}
		sb.WriteByte(']')
	case v.IsDict():
		items := dictItems(v)
		if o.sortKeys {
			items = sortedItems(items)
		}
		sb.WriteByte('{')
		for i, p := range items {
			if i > 0 {
				sb.WriteString(o.itemSep)
			}
			newline(depth + 1)
			if err := writeJSONKey(sb, p.Key); err != nil {
				return err
			}
			sb.WriteString(o.keySep)
			if err := toJSON(sb, p.Value, o, depth+1); err != nil {
				return err
			}
		}
		if len(items) > 0 {
			newline(depth)
		}
		sb.WriteByte('}')
	default:
		//lint:ignore ST1005 Jinja's own message, word for word (the goldens compare it)
		return fmt.Errorf("Object of type %s is not JSON serializable", typeName(v))
	}
	return nil
}

// writeJSONKey writes a dict key: json.dumps turns None, bools and numbers
// into strings.
func writeJSONKey(sb *strings.Builder, k *exec.Value) error {
	switch {
	case k.IsString():
		writeJSONString(sb, k.String())
	case noneOrUndefined(k):
		sb.WriteString(`"null"`)
	case k.IsBool():
		if k.Bool() {
			sb.WriteString(`"true"`)
		} else {
			sb.WriteString(`"false"`)
		}
	case k.IsInteger():
		sb.WriteString(`"` + strconv.Itoa(k.Integer()) + `"`)
	case k.IsFloat():
		sb.WriteString(`"` + pyFloat(k.Float()) + `"`)
	default:
		return fmt.Errorf("tojson: keys must be str, int, float, bool or None, not %s", k.Val.Type())
	}
	return nil
}

func sortedItems(items []*exec.Pair) []*exec.Pair {
	out := append([]*exec.Pair(nil), items...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Key.String() < out[j-1].Key.String(); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// writeJSONString quotes s as json.dumps(ensure_ascii=False) does: only
// ", \, and control characters below U+0020 are escaped.
func writeJSONString(sb *strings.Builder, s string) {
	sb.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			sb.WriteString(`\"`)
		case '\\':
			sb.WriteString(`\\`)
		case '\n':
			sb.WriteString(`\n`)
		case '\r':
			sb.WriteString(`\r`)
		case '\t':
			sb.WriteString(`\t`)
		case '\b':
			sb.WriteString(`\b`)
		case '\f':
			sb.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(sb, `\u%04x`, r)
			} else {
				sb.WriteRune(r)
			}
		}
	}
	sb.WriteByte('"')
}
