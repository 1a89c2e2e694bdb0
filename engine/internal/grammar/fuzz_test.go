package grammar

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// FuzzCompileSchema: any schema text compiles or is an error, never a
// panic; what compiles only produces valid JSON.
func FuzzCompileSchema(f *testing.F) {
	for _, s := range []string{
		`{}`, `true`, `false`, `{"type":"object"}`, `{"type":"string","maxLength":3}`,
		`{"type":"object","properties":{"a":{"type":"integer"},"b":{"enum":["x",1,null]}},"required":["a"]}`,
		`{"type":"array","items":{"type":"number"},"minItems":1,"maxItems":4}`,
		`{"anyOf":[{"type":"null"},{"$ref":"#/$defs/x"}],"$defs":{"x":{"type":"boolean"}}}`,
		`{"type":"object","properties":{"k":{"type":"array","items":{"$ref":"#"}}}}`,
		`{"allOf":[{"$ref":"#/definitions/a"}],"definitions":{"a":{"const":[1,{"b":2}]}}}`,
		`{"type":["string","null"],"nullable":true}`,
		`{"type":"array","prefixItems":[{"type":"integer"}],"items":{"type":"string"}}`,
		`{"type":"object","additionalProperties":{"type":"integer"},"maxProperties":2}`,
		`{"$ref":"#"}`, `{"oneOf":[]}`, `{"type":"string","pattern":"^[a-z]{2,4}(x|y)?$"}`, `{"pattern":"(?i)é+\\d"}`, `{"type":"object","anyOf":[{"properties":{"n":{"const":"a"}}}]}`,
	} {
		f.Add([]byte(s), uint64(1))
	}
	f.Fuzz(func(t *testing.T, schema []byte, seed uint64) {
		b := NewBuilder(Options{MaxDepth: 3, MaxNodes: 1 << 16})
		frag, err := b.Schema(schema)
		if err != nil {
			return
		}
		a, err := b.Compile(frag)
		if err != nil {
			return
		}
		rng := rand.New(rand.NewPCG(seed, 7))
		for range 3 {
			out, ok := randomWalk(a, rng, 200)
			if ok && !json.Valid(out) {
				t.Fatalf("schema %s admits %q", schema, out)
			}
		}
	})
}
