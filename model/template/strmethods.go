package template

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/exec"
)

// GetItem indexes a list as Python does (negative indices count from the
// end, -len(list) included; gonja's own indexing misses that one).
func (l pyList) GetItem(key any) (*exec.Value, bool) {
	i, ok := key.(int)
	if !ok {
		return exec.AsValue(nil), false
	}
	if i < 0 {
		i += len(l)
	}
	if i < 0 || i >= len(l) {
		return exec.AsValue(nil), false
	}
	return exec.ToValue(l[i]), true
}

// gonjaStrMethods are gonja's str methods (kept where hone has no own).
var gonjaStrMethods = []string{"capitalize", "capwords", "casefold", "center", "count", "encode", "endswith",
	"expandtabs", "find", "format", "format_map", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "islower",
	"isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower", "lstrip", "partition",
	"removeprefix", "removesuffix", "replace", "rfind", "rjust", "rpartition", "rsplit", "rstrip", "split",
	"splitlines", "startswith", "strip", "swapcase", "title", "upper", "zfill"}

// strMethods are gonja's str methods with Python's semantics restored for
// those chat templates use.
func strMethods() *exec.MethodSet[string] {
	m := map[string]exec.Method[string]{}
	for _, name := range gonjaStrMethods {
		if fn, ok := builtins.Methods.Str.Get(name); ok {
			m[name] = fn
		}
	}
	m["split"] = strSplit(false)
	m["rsplit"] = strSplit(true)
	m["strip"] = strStrip(true, true)
	m["lstrip"] = strStrip(true, false)
	m["rstrip"] = strStrip(false, true)
	m["startswith"] = strAffix(strings.HasPrefix)
	m["endswith"] = strAffix(strings.HasSuffix)
	m["upper"] = strCase(strings.ToUpper)
	m["lower"] = strCase(strings.ToLower)
	m["replace"] = strReplace
	m["find"] = strFind(false)
	m["rfind"] = strFind(true)
	m["count"] = strCount
	if fn, ok := m["splitlines"]; ok {
		m["splitlines"] = func(s string, v *exec.Value, a *exec.VarArgs) (any, error) {
			out, err := fn(s, v, a)
			return asList(out), err
		}
	}
	return exec.NewMethodSet(m)
}

// strCase is str.upper / str.lower.
func strCase(f func(string) string) exec.Method[string] {
	return func(s string, _ *exec.Value, a *exec.VarArgs) (any, error) {
		if len(a.Args) > 0 || len(a.KwArgs) > 0 {
			return nil, errors.New("takes no arguments")
		}
		return f(s), nil
	}
}

// optString reads an optional str-or-None argument.
func optString(v *exec.Value) (string, bool, error) {
	if noneOrUndefined(v) {
		return "", false, nil
	}
	if !v.IsString() {
		return "", false, fmt.Errorf("must be str or None, not %s", typeName(v))
	}
	return v.String(), true, nil
}

// arg returns positional argument i or keyword name, nil when absent.
func arg(a *exec.VarArgs, i int, name string) *exec.Value {
	if i < len(a.Args) {
		return a.Args[i]
	}
	if v, ok := a.KwArgs[name]; ok {
		return v
	}
	return nil
}

// strSplit is str.split / str.rsplit(sep=None, maxsplit=-1).
func strSplit(right bool) exec.Method[string] {
	return func(s string, _ *exec.Value, a *exec.VarArgs) (any, error) {
		sep, hasSep, err := optString(arg(a, 0, "sep"))
		if err != nil {
			return nil, err
		}
		maxsplit := -1
		if v := arg(a, 1, "maxsplit"); v != nil {
			if !v.IsInteger() {
				return nil, errors.New("maxsplit must be an integer")
			}
			maxsplit = v.Integer()
		}
		var parts []string
		switch {
		case hasSep && sep == "":
			return nil, errors.New("empty separator")
		case hasSep && !right:
			parts = strings.SplitN(s, sep, maxsplitN(maxsplit))
		case hasSep:
			parts = rsplitSep(s, sep, maxsplit)
		default:
			parts = splitSpace(s, maxsplit, right)
		}
		return asList(parts), nil
	}
}

func maxsplitN(maxsplit int) int {
	if maxsplit < 0 {
		return -1
	}
	return maxsplit + 1
}

// rsplitSep splits from the right at most maxsplit times.
func rsplitSep(s, sep string, maxsplit int) []string {
	var rev []string
	for maxsplit < 0 || len(rev) < maxsplit {
		i := strings.LastIndex(s, sep)
		if i < 0 {
			break
		}
		rev = append(rev, s[i+len(sep):])
		s = s[:i]
	}
	out := []string{s}
	for i := len(rev) - 1; i >= 0; i-- {
		out = append(out, rev[i])
	}
	return out
}

// splitSpace is split() without a separator: runs of whitespace separate,
// none at either end; the unsplit rest keeps its inner whitespace.
func splitSpace(s string, maxsplit int, right bool) []string {
	if right {
		// Mirror the left-to-right algorithm on the reversed string.
		r := []rune(s)
		for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
			r[i], r[j] = r[j], r[i]
		}
		parts := splitSpace(string(r), maxsplit, false)
		out := make([]string, len(parts))
		for i, p := range parts {
			pr := []rune(p)
			for x, y := 0, len(pr)-1; x < y; x, y = x+1, y-1 {
				pr[x], pr[y] = pr[y], pr[x]
			}
			out[len(parts)-1-i] = string(pr)
		}
		return out
	}
	var out []string
	for {
		s = strings.TrimLeftFunc(s, pyIsSpace)
		if s == "" {
			return out
		}
		if maxsplit >= 0 && len(out) == maxsplit {
			return append(out, s)
		}
		end := strings.IndexFunc(s, pyIsSpace)
		if end < 0 {
			return append(out, s)
		}
		out = append(out, s[:end])
		s = s[end:]
	}
}

// strStrip is str.strip / lstrip / rstrip(chars=None).
func strStrip(left, right bool) exec.Method[string] {
	return func(s string, _ *exec.Value, a *exec.VarArgs) (any, error) {
		chars, has, err := optString(arg(a, 0, "chars"))
		if err != nil {
			return nil, err
		}
		in := pyIsSpace
		if has {
			in = func(r rune) bool { return strings.ContainsRune(chars, r) }
		}
		if left {
			s = strings.TrimLeftFunc(s, in)
		}
		if right {
			s = strings.TrimRightFunc(s, in)
		}
		return s, nil
	}
}

// runeRange slices s by Python start/end code-point indices.
func runeRange(s string, a *exec.VarArgs, at int) (string, error) {
	start, end := arg(a, at, "start"), arg(a, at+1, "end")
	if noneOrUndefined(start) && noneOrUndefined(end) {
		return s, nil
	}
	r := []rune(s)
	n := len(r)
	lo, hi := 0, n
	clamp := func(v *exec.Value, def int) (int, error) {
		if noneOrUndefined(v) {
			return def, nil
		}
		if !v.IsInteger() {
			return 0, errors.New("slice indices must be integers or None")
		}
		i := v.Integer()
		if i < 0 {
			i += n
		}
		return max(0, min(i, n)), nil
	}
	var err error
	if lo, err = clamp(start, 0); err != nil {
		return "", err
	}
	if hi, err = clamp(end, n); err != nil {
		return "", err
	}
	if hi < lo {
		return "\x00invalid", nil
	}
	return string(r[lo:hi]), nil
}

// strAffix is str.startswith / endswith(prefix, start, end); prefix may be
// a tuple (list) of strings.
func strAffix(match func(s, affix string) bool) exec.Method[string] {
	return func(s string, _ *exec.Value, a *exec.VarArgs) (any, error) {
		p := arg(a, 0, "prefix")
		if p == nil {
			return nil, errors.New("takes at least 1 argument")
		}
		sub, err := runeRange(s, a, 1)
		if err != nil {
			return nil, err
		}
		if sub == "\x00invalid" {
			return false, nil
		}
		if p.IsString() {
			return match(sub, p.String()), nil
		}
		if !p.IsList() {
			return nil, fmt.Errorf("first arg must be str or a tuple of str, not %s", typeName(p))
		}
		for i := range p.Len() {
			e := p.Index(i)
			if !e.IsString() {
				return nil, fmt.Errorf("tuple for startswith must only contain str, not %s", typeName(e))
			}
			if match(sub, e.String()) {
				return true, nil
			}
		}
		return false, nil
	}
}

// strReplace is str.replace(old, new, count=-1).
func strReplace(s string, _ *exec.Value, a *exec.VarArgs) (any, error) {
	o, n := arg(a, 0, "old"), arg(a, 1, "new")
	if o == nil || n == nil || !o.IsString() || !n.IsString() {
		return nil, errors.New("replace() takes two str arguments")
	}
	count := -1
	if c := arg(a, 2, "count"); c != nil {
		if !c.IsInteger() {
			return nil, errors.New("count must be an integer")
		}
		count = c.Integer()
	}
	return strings.Replace(s, o.String(), n.String(), count), nil
}

// strFind is str.find / rfind(sub, start, end), in code points.
func strFind(right bool) exec.Method[string] {
	return func(s string, _ *exec.Value, a *exec.VarArgs) (any, error) {
		sub := arg(a, 0, "sub")
		if sub == nil || !sub.IsString() {
			return nil, errors.New("find() takes a str argument")
		}
		offset := 0
		if st := arg(a, 1, "start"); st != nil && st.IsInteger() {
			n := utf8.RuneCountInString(s)
			offset = st.Integer()
			if offset < 0 {
				offset += n
			}
			offset = max(0, min(offset, n))
		}
		part, err := runeRange(s, a, 1)
		if err != nil {
			return nil, err
		}
		if part == "\x00invalid" {
			return -1, nil
		}
		var i int
		if right {
			i = strings.LastIndex(part, sub.String())
		} else {
			i = strings.Index(part, sub.String())
		}
		if i < 0 {
			return -1, nil
		}
		return offset + utf8.RuneCountInString(part[:i]), nil
	}
}

// strCount is str.count(sub, start, end).
func strCount(s string, _ *exec.Value, a *exec.VarArgs) (any, error) {
	sub := arg(a, 0, "sub")
	if sub == nil || !sub.IsString() {
		return nil, errors.New("count() takes a str argument")
	}
	part, err := runeRange(s, a, 1)
	if err != nil {
		return nil, err
	}
	if part == "\x00invalid" {
		return 0, nil
	}
	if sub.String() == "" {
		return utf8.RuneCountInString(part) + 1, nil
	}
	return strings.Count(part, sub.String()), nil
}

// asList turns a Go slice result into a pyList.
func asList(v any) any {
	switch x := v.(type) {
	case []string:
		out := make(pyList, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out
	case []any:
		return pyList(x)
	case pyList:
		return x
	}
	val := exec.AsValue(v)
	if !val.IsList() {
		return v
	}
	out := make(pyList, val.Len())
	for i := range out {
		out[i] = val.Index(i).Interface()
	}
	return out
}
