package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/hone-rl/hone/model/chat"
)

// Output format: JSON written canonically, as Python's json.dumps (and so
// Qwen's hermes tool calls) writes it: ", " between items and members, ": "
// after keys, no other whitespace, non-ASCII characters unescaped (escapes
// are accepted in free strings; enum and const values are written exactly
// as json.dumps writes them).

// Bounds on unrolled repetition: larger maxLength / maxItems are not
// enforced (the upper bound is dropped); a larger minLength / minItems is an
// error.
const (
	maxUnrollChars = 4096
	maxUnrollItems = 256
)

// schema is one JSON Schema object: its keywords by name (a duplicate key:
// the last one).
type schema map[string]json.RawMessage

// schemaCompiler turns schemas into fragments.
type schemaCompiler struct {
	b    *Builder
	root json.RawMessage
}

// Schema builds a fragment matching the JSON values the schema admits
// (within the supported subset), written canonically.
func (b *Builder) Schema(raw []byte) (Frag, error) {
	c := &schemaCompiler{b: b, root: raw}
	return c.value(raw, 0, 0)
}

// AnyValue matches any JSON value nesting at most MaxDepth containers.
func (b *Builder) AnyValue() Frag {
	c := &schemaCompiler{b: b}
	return c.anyValue(0)
}

// AnyObject matches any JSON object nesting at most MaxDepth containers
// (itself included).
func (b *Builder) AnyObject() Frag {
	c := &schemaCompiler{b: b}
	f, _ := c.freeObject(0, -1, 0, -1, nil) // a nil value schema cannot fail
	return f
}

// JSONLiteral matches raw (a JSON value) written canonically.
func (b *Builder) JSONLiteral(raw []byte) (Frag, error) {
	s, err := canonical(raw)
	if err != nil {
		return Frag{}, err
	}
	return b.Lit(s), nil
}

// canonical writes a JSON value as json.dumps does.
func canonical(raw []byte) (string, error) {
	s, err := chat.ToJSON(raw)
	if err != nil {
		return "", err
	}
	if !json.Valid([]byte(s)) { // 1e999 becomes Infinity
		return "", fmt.Errorf("value %s has no JSON form", bytes.TrimSpace(raw))
	}
	return s, nil
}

// QuoteString writes s as a canonical JSON string.
func QuoteString(s string) string {
	raw, _ := json.Marshal(s) // strings always marshal
	q, _ := chat.ToJSON(raw)
	return q
}

func (c *schemaCompiler) value(raw json.RawMessage, depth, refs int) (Frag, error) {
	if err := c.b.check(); err != nil {
		return Frag{}, err
	}
	raw = bytes.TrimSpace(raw)
	switch string(raw) {
	case "true", "{}":
		return c.anyValue(depth), nil
	case "false":
		return c.b.Never(), nil
	}
	s, err := parseSchema(raw)
	if err != nil {
		return Frag{}, err
	}
	return c.compile(s, depth, refs)
}

// parseSchema reads a schema object.
func parseSchema(raw json.RawMessage) (schema, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, fmt.Errorf("a schema must be an object or a boolean, got %.40s", raw)
	}
	fs, err := objectFields(raw)
	if err != nil {
		return nil, err
	}
	s := make(schema, len(fs))
	for _, f := range fs {
		s[f.key] = f.val
	}
	return s, nil
}

type field struct {
	key string
	val json.RawMessage
}

// objectFields reads a JSON object's members in order.
func objectFields(raw json.RawMessage) ([]field, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("expected a JSON object, got %.40s", raw)
	}
	var out []field
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, field{k.(string), v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after JSON object")
	}
	return out, nil
}

func (c *schemaCompiler) compile(s schema, depth, refs int) (Frag, error) {
	if ref, ok := s["$ref"]; ok {
		if refs >= c.b.opts.MaxDepth {
			return c.b.Never(), nil // recursion cut here
		}
		target, err := c.resolve(ref)
		if err != nil {
			return Frag{}, err
		}
		return c.value(target, depth, refs+1)
	}
	if all, ok := s["allOf"]; ok {
		merged, err := c.mergeAll(s, all, refs)
		if err != nil {
			return Frag{}, err
		}
		return c.compile(merged, depth, refs+1)
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		branches, ok := s[kw]
		if !ok {
			continue
		}
		var list []json.RawMessage
		if err := json.Unmarshal(branches, &list); err != nil {
			return Frag{}, fmt.Errorf("%s must be a list of schemas", kw)
		}
		base := s.without(kw)
		alts := make([]Frag, 0, len(list))
		for _, br := range list {
			f, err := c.branch(base, br, depth, refs)
			if err != nil {
				return Frag{}, err
			}
			alts = append(alts, f)
		}
		if len(alts) == 0 {
			return c.b.Never(), nil
		}
		return c.b.Alt(alts...), nil
	}
	if v, ok := s["const"]; ok {
		return c.b.JSONLiteral(v)
	}
	if v, ok := s["enum"]; ok {
		var list []json.RawMessage
		if err := json.Unmarshal(v, &list); err != nil {
			return Frag{}, fmt.Errorf("enum must be a list")
		}
		alts := make([]Frag, 0, len(list))
		for _, item := range list {
			f, err := c.b.JSONLiteral(item)
			if err != nil {
				return Frag{}, fmt.Errorf("enum: %w", err)
			}
			alts = append(alts, f)
		}
		if len(alts) == 0 {
			return c.b.Never(), nil
		}
		return c.b.Alt(alts...), nil
	}
	types, err := s.types()
	if err != nil {
		return Frag{}, err
	}
	if len(types) == 0 {
		return c.anyValue(depth), nil
	}
	alts := make([]Frag, 0, len(types))
	for _, t := range types {
		f, err := c.typed(s, t, depth, refs)
		if err != nil {
			return Frag{}, err
		}
		alts = append(alts, f)
	}
	return c.b.Alt(alts...), nil
}

// branch compiles one anyOf/oneOf branch with the parent's other keywords
// merged in (a branch keyword wins over the parent's).
func (c *schemaCompiler) branch(base schema, br json.RawMessage, depth, refs int) (Frag, error) {
	br = bytes.TrimSpace(br)
	if len(base) == 0 || len(br) == 0 || br[0] != '{' {
		return c.value(br, depth, refs)
	}
	bs, err := parseSchema(br)
	if err != nil {
		return Frag{}, err
	}
	if _, isRef := bs["$ref"]; isRef && len(bs) == 1 {
		return c.value(br, depth, refs) // a referenced schema stands alone
	}
	return c.compile(mergeSchemas(base, bs), depth, refs)
}

// mergeAll folds allOf's schemas (references resolved) into s.
func (c *schemaCompiler) mergeAll(s schema, all json.RawMessage, refs int) (schema, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(all, &list); err != nil {
		return nil, fmt.Errorf("allOf must be a list of schemas")
	}
	merged := s.without("allOf")
	for _, raw := range list {
		sub, err := c.deref(raw, refs)
		if err != nil {
			return nil, err
		}
		if sub == nil { // true or {}
			continue
		}
		merged = mergeSchemas(merged, sub)
	}
	return merged, nil
}

// deref parses a schema, following $ref chains; nil means "anything".
func (c *schemaCompiler) deref(raw json.RawMessage, refs int) (schema, error) {
	for i := 0; ; i++ {
		raw = bytes.TrimSpace(raw)
		switch string(raw) {
		case "true", "{}":
			return nil, nil
		case "false":
			return schema{"type": json.RawMessage("[]")}, nil // no type: nothing
		}
		s, err := parseSchema(raw)
		if err != nil {
			return nil, err
		}
		ref, ok := s["$ref"]
		if !ok {
			return s, nil
		}
		if i+refs >= c.b.opts.MaxDepth {
			return nil, fmt.Errorf("$ref chain too deep")
		}
		if raw, err = c.resolve(ref); err != nil {
			return nil, err
		}
	}
}

// mergeSchemas is a shallow merge: over's keywords win, except properties
// (both kept, in order: base's first) and required (the union).
func mergeSchemas(base, over schema) schema {
	out := make(schema, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	if bp, ok := base["properties"]; ok {
		if op, ok := over["properties"]; ok {
			out["properties"] = mergeProperties(bp, op)
		}
	}
	if br, ok := base["required"]; ok {
		if or, ok := over["required"]; ok {
			var a, b []string
			_ = json.Unmarshal(br, &a)
			_ = json.Unmarshal(or, &b)
			raw, _ := json.Marshal(append(a, b...))
			out["required"] = raw
		}
	}
	return out
}

// mergeProperties joins two properties objects (over's schema wins for a
// name in both; its position stays base's).
func mergeProperties(base, over json.RawMessage) json.RawMessage {
	bf, err1 := objectFields(base)
	of, err2 := objectFields(over)
	if err1 != nil || err2 != nil {
		return over
	}
	var sb strings.Builder
	sb.WriteByte('{')
	write := func(f field) {
		if sb.Len() > 1 {
			sb.WriteByte(',')
		}
		k, _ := json.Marshal(f.key)
		sb.Write(k)
		sb.WriteByte(':')
		sb.Write(f.val)
	}
	seen := map[string]bool{}
	for _, f := range bf {
		for _, o := range of {
			if o.key == f.key {
				f.val = o.val
			}
		}
		seen[f.key] = true
		write(f)
	}
	for _, o := range of {
		if !seen[o.key] {
			seen[o.key] = true
			write(o)
		}
	}
	sb.WriteByte('}')
	return json.RawMessage(sb.String())
}

func (s schema) without(kw string) schema {
	out := make(schema, len(s))
	for k, v := range s {
		if k != kw {
			out[k] = v
		}
	}
	return out
}

// resolve follows a local reference: "#" or a JSON pointer into the root
// schema ("#/$defs/Name", "#/definitions/Name", ...).
func (c *schemaCompiler) resolve(ref json.RawMessage) (json.RawMessage, error) {
	var p string
	if err := json.Unmarshal(ref, &p); err != nil {
		return nil, fmt.Errorf("$ref must be a string")
	}
	if c.root == nil || !strings.HasPrefix(p, "#") {
		return nil, fmt.Errorf("$ref %q: only local references (#/...) are supported", p)
	}
	cur := c.root
	if p == "#" || p == "#/" {
		return cur, nil
	}
	if !strings.HasPrefix(p, "#/") {
		return nil, fmt.Errorf("$ref %q: only JSON pointers are supported", p)
	}
	for _, part := range strings.Split(p[2:], "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		cur = bytes.TrimSpace(cur)
		switch {
		case len(cur) > 0 && cur[0] == '{':
			fs, err := objectFields(cur)
			if err != nil {
				return nil, err
			}
			var next json.RawMessage
			for _, f := range fs {
				if f.key == part {
					next = f.val
				}
			}
			if next == nil {
				return nil, fmt.Errorf("$ref %q: %q not found", p, part)
			}
			cur = next
		case len(cur) > 0 && cur[0] == '[':
			var list []json.RawMessage
			i, err := strconv.Atoi(part)
			if err != nil || json.Unmarshal(cur, &list) != nil || i < 0 || i >= len(list) {
				return nil, fmt.Errorf("$ref %q: %q not found", p, part)
			}
			cur = list[i]
		default:
			return nil, fmt.Errorf("$ref %q: %q not found", p, part)
		}
	}
	return cur, nil
}

// types lists the schema's types ("type" and OpenAPI's nullable), or infers
// one from the keywords present; none means any value.
func (s schema) types() ([]string, error) {
	var types []string
	if raw, ok := s["type"]; ok {
		var one string
		if json.Unmarshal(raw, &one) == nil {
			types = []string{one}
		} else if err := json.Unmarshal(raw, &types); err != nil {
			return nil, fmt.Errorf("type must be a string or a list of strings")
		}
		if len(types) == 0 {
			return []string{"never"}, nil
		}
	} else {
		switch {
		case s.has("properties", "additionalProperties", "minProperties", "maxProperties"):
			types = []string{"object"}
		case s.has("items", "prefixItems", "minItems", "maxItems"):
			types = []string{"array"}
		case s.has("minLength", "maxLength", "pattern", "format"):
			types = []string{"string"}
		}
	}
	if string(s["nullable"]) == "true" && len(types) > 0 {
		types = append(types, "null")
	}
	seen := map[string]bool{}
	out := types[:0]
	for _, t := range types {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out, nil
}

func (s schema) has(kws ...string) bool {
	for _, k := range kws {
		if _, ok := s[k]; ok {
			return true
		}
	}
	return false
}

// intKeyword reads a non-negative integer keyword (def when absent).
func (s schema) intKeyword(kw string, def int) (int, error) {
	raw, ok := s[kw]
	if !ok {
		return def, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || f < 0 || f != math.Trunc(f) {
		return 0, fmt.Errorf("%s must be a non-negative integer", kw)
	}
	if f > math.MaxInt32 {
		f = math.MaxInt32
	}
	return int(f), nil
}

// bounds reads a min/max keyword pair; a max above limit is dropped (-1:
// unbounded), a min above limit is an error.
func (s schema) bounds(minKw, maxKw string, limit int) (int, int, error) {
	lo, err := s.intKeyword(minKw, 0)
	if err != nil {
		return 0, 0, err
	}
	hi, err := s.intKeyword(maxKw, -1)
	if err != nil {
		return 0, 0, err
	}
	if lo > limit {
		return 0, 0, fmt.Errorf("%s above %d is not supported", minKw, limit)
	}
	if hi > limit {
		hi = -1
	}
	return lo, hi, nil
}

func (c *schemaCompiler) typed(s schema, t string, depth, refs int) (Frag, error) {
	b := c.b
	switch t {
	case "string":
		if f, ok, err := c.pattern(s); ok || err != nil {
			return f, err
		}
		lo, hi, err := s.bounds("minLength", "maxLength", maxUnrollChars)
		if err != nil {
			return Frag{}, err
		}
		return c.str(lo, hi)
	case "integer":
		return c.integer(), nil
	case "number":
		return c.number(), nil
	case "boolean":
		return b.Alt(b.Lit("true"), b.Lit("false")), nil
	case "null":
		return b.Lit("null"), nil
	case "object":
		return c.object(s, depth, refs)
	case "array":
		return c.array(s, depth, refs)
	case "never":
		return b.Never(), nil
	}
	return Frag{}, fmt.Errorf("unsupported type %q", t)
}

// pattern builds a string matching the schema's "pattern" (ok false: no
// pattern, or one outside the supported syntax or too large, which is then
// not enforced). A pattern takes the place of minLength and maxLength.
func (c *schemaCompiler) pattern(s schema) (Frag, bool, error) {
	raw, ok := s["pattern"]
	if !ok {
		return Frag{}, false, nil
	}
	var p string
	if err := json.Unmarshal(raw, &p); err != nil {
		return Frag{}, false, fmt.Errorf("pattern must be a string")
	}
	// Try it on a scratch builder first: a failure half way would leave
	// the real one holding the nodes made so far.
	trial := NewBuilder(Options{MaxDepth: c.b.opts.MaxDepth, MaxNodes: max(1, c.b.maxNodes-c.b.Nodes())})
	if _, err := (&schemaCompiler{b: trial}).patternString(p); err != nil {
		return Frag{}, false, nil
	}
	f, err := c.patternString(p)
	return f, err == nil, err
}

// anyValue matches any JSON value at depth (containers enclosing it).
func (c *schemaCompiler) anyValue(depth int) Frag {
	b := c.b
	alts := []Frag{c.freeString(), c.number(), b.Lit("true"), b.Lit("false"), b.Lit("null")}
	if depth < b.opts.MaxDepth && b.check() == nil {
		obj, _ := c.freeObject(depth, -1, 0, -1, nil)
		arr, _ := b.List("[", ", ", "]", 0, -1, func() (Frag, error) { return c.anyValue(depth + 1), nil })
		alts = append(alts, obj, arr)
	}
	return b.Alt(alts...)
}

// freeObject matches an object at depth with any keys; values follow vs
// (nil: any value), between min and max members.
func (c *schemaCompiler) freeObject(depth, refs, min, max int, vs json.RawMessage) (Frag, error) {
	b := c.b
	return b.List("{", ", ", "}", min, max, func() (Frag, error) {
		key := c.freeString()
		colon := b.Lit(": ")
		if vs == nil {
			return b.Seq(key, colon, c.anyValue(depth+1)), nil
		}
		v, err := c.value(vs, depth+1, refs)
		if err != nil {
			return Frag{}, err
		}
		return b.Seq(key, colon, v), nil
	})
}

func (c *schemaCompiler) object(s schema, depth, refs int) (Frag, error) {
	b := c.b
	raw, declared := s["properties"]
	var props []field
	if declared {
		var err error
		if props, err = objectFields(raw); err != nil {
			return Frag{}, fmt.Errorf("properties: %w", err)
		}
	}
	if !declared {
		lo, hi, err := s.bounds("minProperties", "maxProperties", maxUnrollItems)
		if err != nil {
			return Frag{}, err
		}
		ap := bytes.TrimSpace(s["additionalProperties"])
		switch string(ap) {
		case "false":
			if lo > 0 {
				return b.Never(), nil
			}
			return b.Lit("{}"), nil
		case "", "true", "{}":
			if depth >= b.opts.MaxDepth {
				return b.Lit("{}"), nil
			}
			return c.freeObject(depth, refs, lo, hi, nil)
		}
		return c.freeObject(depth, refs, lo, hi, ap)
	}
	required := map[string]bool{}
	if raw, ok := s["required"]; ok {
		var names []string
		if err := json.Unmarshal(raw, &names); err != nil {
			return Frag{}, fmt.Errorf("required must be a list of strings")
		}
		for _, n := range names {
			required[n] = true
		}
	}
	// first[i]: no member written before property i; later[i]: some were.
	// Each member is built once: both lead into it (later through ", ")
	// and it leads to later[i+1].
	open := b.Lit("{")
	n := len(props)
	first, later := make([]int32, n+1), make([]int32, n+1)
	first[0], later[0] = open.out, b.node()
	for i := 1; i <= n; i++ {
		first[i], later[i] = b.node(), b.node()
	}
	for i, p := range props {
		v, err := c.value(p.val, depth+1, refs)
		if err != nil {
			return Frag{}, fmt.Errorf("property %q: %w", p.key, err)
		}
		member := b.Seq(b.Lit(QuoteString(p.key)+": "), v)
		sep := b.Lit(", ")
		b.link(first[i], member.in)
		b.link(later[i], sep.in)
		b.link(sep.out, member.in)
		b.link(member.out, later[i+1])
		if !required[p.key] && !b.opts.AllProperties {
			b.link(first[i], first[i+1])
			b.link(later[i], later[i+1])
		}
	}
	end := b.Lit("}")
	b.link(first[n], end.in)
	b.link(later[n], end.in)
	return Frag{open.in, end.out}, b.check()
}

func (c *schemaCompiler) array(s schema, depth, refs int) (Frag, error) {
	b := c.b
	items := bytes.TrimSpace(s["items"])
	elem := func() (Frag, error) {
		if len(items) == 0 {
			return c.anyValue(depth + 1), nil
		}
		return c.value(items, depth+1, refs)
	}
	if raw, ok := s["prefixItems"]; ok {
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return Frag{}, fmt.Errorf("prefixItems must be a list of schemas")
		}
		parts := []Frag{b.Lit("[")}
		for i, item := range list {
			if i > 0 {
				parts = append(parts, b.Lit(", "))
			}
			f, err := c.value(item, depth+1, refs)
			if err != nil {
				return Frag{}, fmt.Errorf("prefixItems %d: %w", i, err)
			}
			parts = append(parts, f)
		}
		if len(items) > 0 && string(items) != "false" {
			sep := b.Lit(", ")
			if len(list) == 0 {
				sep = b.Empty()
			}
			more, err := b.List("", ", ", "", 1, -1, elem)
			if err != nil {
				return Frag{}, err
			}
			parts = append(parts, b.Opt(b.Seq(sep, more)))
		}
		parts = append(parts, b.Lit("]"))
		return b.Seq(parts...), b.check()
	}
	if string(items) == "false" {
		return b.Lit("[]"), nil
	}
	lo, hi, err := s.bounds("minItems", "maxItems", maxUnrollItems)
	if err != nil {
		return Frag{}, err
	}
	return b.List("[", ", ", "]", lo, hi, elem)
}

func (c *schemaCompiler) freeString() Frag {
	f, _ := c.str(0, -1) // unbounded strings do not unroll
	return f
}

// str matches a JSON string of lo..hi characters (hi < 0: unbounded); an
// escape counts as one character. With Options.Forbid, the raw text of the
// body never contains that substring: the body is tracked by a KMP
// automaton over its plain ASCII characters (any other character resets
// it), so each position has one node per matched prefix length.
func (c *schemaCompiler) str(lo, hi int) (Frag, error) {
	b := c.b
	open, end := b.Lit(`"`), b.Lit(`"`)
	pat := b.opts.Forbid
	m := max(1, len(pat))
	if b.kmp == nil {
		b.kmp = kmpTable(pat)
	}
	delta := b.kmp
	last := hi // the last position; with no upper bound it loops
	if hi < 0 {
		last = lo
	}
	layers := make([][]int32, last+1)
	for p := range layers {
		layers[p] = make([]int32, m)
		for k := range layers[p] {
			layers[p][k] = b.node()
		}
		if err := b.check(); err != nil {
			return Frag{}, err
		}
	}
	b.link(open.out, layers[0][0])
	for p := 0; p <= last; p++ {
		next := p + 1
		if p == last {
			if hi >= 0 {
				next = -1 // full: only the closing quote
			} else {
				next = p
			}
		}
		var other Frag // escapes and non-ASCII: reset the match
		if next >= 0 {
			other = c.nonPlainChar()
			b.link(other.out, layers[next][0])
		}
		for k := 0; k < m; k++ {
			from := layers[p][k]
			if p >= lo {
				b.link(from, end.in)
			}
			if next < 0 {
				continue
			}
			b.link(from, other.in)
			// Plain ASCII: 0x20-0x7F but '"' and '\\', grouped by target.
			for x := 0x20; x <= 0x7F; {
				if x == '"' || x == '\\' {
					x++
					continue
				}
				t := delta[k][x]
				y := x
				for y+1 <= 0x7F && y+1 != '"' && y+1 != '\\' && delta[k][y+1] == t {
					y++
				}
				if t < m || pat == "" {
					b.edges[from] = append(b.edges[from], edge{byte(x), byte(y), layers[next][min(t, m-1)]})
				}
				x = y + 1
			}
		}
	}
	return Frag{open.in, end.out}, b.check()
}

// kmpTable returns delta[k][c]: the length of the longest prefix of pat
// that is a suffix of pat[:k]+c.
func kmpTable(pat string) [][256]int {
	m := len(pat)
	delta := make([][256]int, max(1, m))
	for k := 0; k < m; k++ {
		for c := 0; c < 256; c++ {
			// Longest j with pat[:j] a suffix of pat[:k]+c (naive; patterns are short).
			cand := []byte(pat[:k])
			cand = append(cand, byte(c))
			for j := min(m, len(cand)); j >= 0; j-- {
				if string(cand[len(cand)-j:]) == pat[:j] {
					delta[k][c] = j
					break
				}
			}
		}
	}
	return delta
}

// nonPlainChar matches one JSON string character that is not plain ASCII:
// valid multi-byte UTF-8, or an escape (\uXXXX outside the surrogates).
func (c *schemaCompiler) nonPlainChar() Frag {
	b := c.b
	r := func(lo, hi byte) ByteRange { return ByteRange{lo, hi} }
	cont := func() Frag { return b.Class(r(0x80, 0xBF)) }
	hex := func() Frag { return b.Class(r('0', '9'), r('a', 'f'), r('A', 'F')) }
	unicode := b.Seq(b.Lit(`\u`), b.Alt(
		b.Seq(b.Class(r('0', '9'), r('a', 'c'), r('A', 'C'), r('e', 'f'), r('E', 'F')), hex(), hex(), hex()),
		b.Seq(b.Class(r('d', 'd'), r('D', 'D')), b.Class(r('0', '7')), hex(), hex()),
	))
	return b.Alt(
		b.Seq(b.Class(r(0xC2, 0xDF)), cont()),
		b.Seq(b.Class(r(0xE0, 0xE0)), b.Class(r(0xA0, 0xBF)), cont()),
		b.Seq(b.Class(r(0xE1, 0xEC), r(0xEE, 0xEF)), cont(), cont()),
		b.Seq(b.Class(r(0xED, 0xED)), b.Class(r(0x80, 0x9F)), cont()),
		b.Seq(b.Class(r(0xF0, 0xF0)), b.Class(r(0x90, 0xBF)), cont(), cont()),
		b.Seq(b.Class(r(0xF1, 0xF3)), cont(), cont(), cont()),
		b.Seq(b.Class(r(0xF4, 0xF4)), b.Class(r(0x80, 0x8F)), cont(), cont()),
		b.Seq(b.Lit(`\`), b.Class(r('"', '"'), r('\\', '\\'), r('/', '/'), r('b', 'b'), r('f', 'f'), r('n', 'n'), r('r', 'r'), r('t', 't'))),
		unicode,
	)
}

// integer matches -?(0|[1-9][0-9]*).
func (c *schemaCompiler) integer() Frag {
	b := c.b
	digits := b.Star(b.Class(ByteRange{'0', '9'}))
	return b.Seq(b.Opt(b.Lit("-")), b.Alt(b.Lit("0"), b.Seq(b.Class(ByteRange{'1', '9'}), digits)))
}

// number matches a JSON number that parses as a finite float64: an
// integer (any length: it stays as written), or one with a fraction or an
// exponent whose integer part has at most maxFloatDigits digits and whose
// exponent has at most two (so it is below 1e308: the hermes parser and
// Python's json re-serialise floats, and an overflow becomes Infinity,
// which is not JSON).
func (c *schemaCompiler) number() Frag {
	b := c.b
	digit := func() Frag { return b.Class(ByteRange{'0', '9'}) }
	frac := func() Frag { return b.Seq(b.Lit("."), b.Plus(digit())) }
	exp := func() Frag {
		return b.Seq(b.Class(ByteRange{'e', 'e'}, ByteRange{'E', 'E'}), b.Opt(b.Class(ByteRange{'+', '+'}, ByteRange{'-', '-'})),
			digit(), b.Opt(digit()))
	}
	more, _ := b.Repeat(0, maxFloatDigits-1, digit) // bounded: cannot fail
	intPart := b.Seq(b.Opt(b.Lit("-")), b.Alt(b.Lit("0"), b.Seq(b.Class(ByteRange{'1', '9'}), more)))
	float := b.Seq(intPart, b.Alt(frac(), exp(), b.Seq(frac(), exp())))
	return b.Alt(c.integer(), float)
}

// maxFloatDigits bounds the integer part of a number with a fraction or
// an exponent: 10^100 * 10^99 stays far below float64's 1.8e308.
const maxFloatDigits = 100
