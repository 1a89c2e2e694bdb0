package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// checkSchema validates a JSON text against a schema of the subset the
// constrained decoder enforces (type, enum, const, properties, required,
// additionalProperties, items, prefixItems, min/maxItems, min/maxLength,
// anyOf, oneOf, allOf, $ref into the root). Declared properties close an
// object (no others), as the decoder writes them.
func checkSchema(schema, text string) error {
	var s, v any
	if err := decodeNumbers(schema, &s); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	if err := decodeNumbers(text, &v); err != nil {
		return fmt.Errorf("output %q: %w", text, err)
	}
	return (&schemaChecker{root: s}).check(s, v, "$")
}

func decodeNumbers(text string, v any) error {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data")
	}
	return nil
}

type schemaChecker struct{ root any }

func (c *schemaChecker) check(schema, v any, path string) error {
	switch s := schema.(type) {
	case bool:
		if !s {
			return fmt.Errorf("%s: false schema", path)
		}
		return nil
	case map[string]any:
		return c.checkObject(s, v, path)
	}
	return fmt.Errorf("%s: bad schema %v", path, schema)
}

func (c *schemaChecker) checkObject(s map[string]any, v any, path string) error {
	if ref, ok := s["$ref"].(string); ok {
		target := c.root
		for _, part := range strings.Split(strings.TrimPrefix(strings.TrimPrefix(ref, "#"), "/"), "/") {
			if part != "" {
				target = target.(map[string]any)[part]
			}
		}
		return c.check(target, v, path)
	}
	if all, ok := s["allOf"].([]any); ok {
		for _, sub := range all {
			if err := c.check(sub, v, path); err != nil {
				return err
			}
		}
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[kw].([]any); ok {
			var errs []string
			for _, alt := range alts {
				merged := map[string]any{}
				for k, x := range s {
					if k != kw {
						merged[k] = x
					}
				}
				if am, ok := alt.(map[string]any); ok {
					for k, x := range am {
						merged[k] = x
					}
				}
				if err := c.check(merged, v, path); err == nil {
					return nil
				} else {
					errs = append(errs, err.Error())
				}
			}
			return fmt.Errorf("%s: no %s branch matches: %s", path, kw, strings.Join(errs, "; "))
		}
	}
	if cv, ok := s["const"]; ok && !jsonEqual(cv, v) {
		return fmt.Errorf("%s: %v is not the const %v", path, v, cv)
	}
	if ev, ok := s["enum"].([]any); ok {
		found := false
		for _, e := range ev {
			found = found || jsonEqual(e, v)
		}
		if !found {
			return fmt.Errorf("%s: %v not in enum %v", path, v, ev)
		}
	}
	if t, ok := s["type"]; ok {
		types := []any{t}
		if l, ok := t.([]any); ok {
			types = l
		}
		match := false
		for _, ty := range types {
			match = match || hasType(ty.(string), v)
		}
		if !match {
			return fmt.Errorf("%s: %v is not of type %v", path, v, t)
		}
	}
	switch x := v.(type) {
	case string:
		n := utf8.RuneCountInString(x)
		if lo, ok := s["minLength"].(json.Number); ok && int64(n) < mustInt(lo) {
			return fmt.Errorf("%s: %q shorter than %s", path, x, lo)
		}
		if hi, ok := s["maxLength"].(json.Number); ok && int64(n) > mustInt(hi) {
			return fmt.Errorf("%s: %q longer than %s", path, x, hi)
		}
	case []any:
		if lo, ok := s["minItems"].(json.Number); ok && int64(len(x)) < mustInt(lo) {
			return fmt.Errorf("%s: fewer than %s items", path, lo)
		}
		if hi, ok := s["maxItems"].(json.Number); ok && int64(len(x)) > mustInt(hi) {
			return fmt.Errorf("%s: more than %s items", path, hi)
		}
		prefix, _ := s["prefixItems"].([]any)
		for i, item := range x {
			var sub any = true
			if i < len(prefix) {
				sub = prefix[i]
			} else if it, ok := s["items"]; ok {
				sub = it
			}
			if err := c.check(sub, item, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case map[string]any:
		props, declared := s["properties"].(map[string]any)
		req, _ := s["required"].([]any)
		for _, r := range req {
			if _, ok := x[r.(string)]; !ok {
				return fmt.Errorf("%s: missing required %q", path, r)
			}
		}
		for k, item := range x {
			sub, ok := props[k]
			if !ok {
				if declared {
					return fmt.Errorf("%s: undeclared property %q", path, k)
				}
				sub = true
				if ap, ok := s["additionalProperties"]; ok {
					sub = ap
				}
			}
			if err := c.check(sub, item, path+"."+k); err != nil {
				return err
			}
		}
	}
	return nil
}

func hasType(t string, v any) bool {
	switch x := v.(type) {
	case nil:
		return t == "null"
	case bool:
		return t == "boolean"
	case string:
		return t == "string"
	case json.Number:
		if t == "number" {
			return true
		}
		return t == "integer" && !strings.ContainsAny(x.String(), ".eE")
	case []any:
		return t == "array"
	case map[string]any:
		return t == "object"
	}
	return false
}

func mustInt(n json.Number) int64 {
	i, err := n.Int64()
	if err != nil {
		panic(err)
	}
	return i
}

func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	var x, y any
	_ = json.Unmarshal(ja, &x)
	_ = json.Unmarshal(jb, &y)
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
