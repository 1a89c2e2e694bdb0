package grammar

import (
	"encoding/json"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

func compileSchema(t testing.TB, schema string, opts Options) *Automaton {
	t.Helper()
	b := NewBuilder(opts)
	f, err := b.Schema([]byte(schema))
	if err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	a, err := b.Compile(f)
	if err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	return a
}

// TestSchemaConstructs holds each construct against outputs it must accept
// and reject (whole outputs; prefixes are checked by TestSchemaPrefixes).
func TestSchemaConstructs(t *testing.T) {
	cases := []struct {
		name, schema   string
		accept, reject []string
	}{
		{"string", `{"type":"string"}`,
			[]string{`""`, `"abc"`, `"a b"`, `"héllo"`, `"日本"`, `"😀"`, `"\n\t\"\\\/\b\f\r"`, `"\u00e9\uFFFF\u0000"`, "\"\x7f\""},
			[]string{``, `"`, `abc`, `'a'`, `"a`, `"a""`, "\"a\nb\"", "\"\x01\"", `"\x"`, `"\u12"`, `"\uD800"`, `"\udfff"`,
				"\"\xff\"", "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "\"\xe2\x82\"", " \"a\"", `"a" `}},
		{"string length", `{"type":"string","minLength":2,"maxLength":3}`,
			[]string{`"ab"`, `"abc"`, `"a\n"`, `"éé"`, `"\u0041bc"`},
			[]string{`""`, `"a"`, `"abcd"`, `"\n"`}},
		{"string enum", `{"type":"string","enum":["red","green","a\"b","é"]}`,
			[]string{`"red"`, `"green"`, `"a\"b"`, `"é"`},
			[]string{`"blue"`, `"re"`, `"redd"`, `red`, `"\u00e9"`}},
		{"integer", `{"type":"integer"}`,
			[]string{`0`, `7`, `-3`, `1234567890`, `-0`},
			[]string{``, `01`, `1.5`, `+1`, `1e3`, `-`, ` 1`, `"1"`}},
		{"number", `{"type":"number"}`,
			[]string{`0`, `-1`, `1.5`, `0.001`, `1e10`, `1E-5`, `-2.5e+3`, `10`},
			[]string{`.5`, `1.`, `01`, `1e`, `1e+`, `--1`, `NaN`, `Infinity`, `0x10`}},
		{"number finite", `{"type":"number"}`,
			[]string{`1e99`, `-1E-99`, strings.Repeat("9", 100) + `.5e99`, strings.Repeat("9", 400), "0." + strings.Repeat("0", 400) + "1"},
			[]string{`1e100`, `1e999`, strings.Repeat("9", 101) + `.5`, strings.Repeat("9", 101) + `e1`}},
		{"boolean", `{"type":"boolean"}`, []string{`true`, `false`}, []string{`True`, `1`, `"true"`, `tru`}},
		{"null", `{"type":"null"}`, []string{`null`}, []string{`None`, `""`, `nul`}},
		{"const", `{"const":{"a":[1,2.50,"x"]}}`, []string{`{"a": [1, 2.5, "x"]}`}, []string{`{"a":[1,2.5,"x"]}`, `{"a": [1, 2.50, "x"]}`}},
		{"enum mixed", `{"enum":[1,"one",null,true,[1]]}`, []string{`1`, `"one"`, `null`, `true`, `[1]`}, []string{`2`, `false`, `[1, 1]`}},
		{"type list", `{"type":["integer","null"]}`, []string{`3`, `null`}, []string{`"3"`, `1.5`}},
		{"nullable", `{"type":"string","nullable":true}`, []string{`"a"`, `null`}, []string{`1`}},
		{"object", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["a","b"]}`,
			[]string{`{"a": 1, "b": "x"}`},
			[]string{`{"b": "x", "a": 1}`, `{"a": 1}`, `{"a":1, "b": "x"}`, `{"a": 1,"b": "x"}`, `{ "a": 1, "b": "x"}`,
				`{"a": 1, "b": "x", "c": 2}`, `{"a": 1, "b": "x"} `, `{}`}},
		{"object optional", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"boolean"},"c":{"type":"null"}},"required":["b"]}`,
			[]string{`{"b": true}`, `{"a": 1, "b": false}`, `{"b": true, "c": null}`, `{"a": 2, "b": true, "c": null}`},
			[]string{`{}`, `{"a": 1}`, `{"c": null, "b": true}`, `{, "b": true}`, `{"b": true, }`, `{"a": 1, , "b": true}`}},
		{"object no required", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}}}`,
			[]string{`{}`, `{"a": 1}`, `{"b": 2}`, `{"a": 1, "b": 2}`},
			[]string{`{"b": 2, "a": 1}`, `{"a": 1, "a": 1}`}},
		{"object empty properties", `{"type":"object","properties":{}}`, []string{`{}`}, []string{`{"a": 1}`}},
		{"object escaped key", `{"type":"object","properties":{"a\"b":{"type":"null"},"é":{"type":"null"}},"required":["a\"b","é"]}`,
			[]string{`{"a\"b": null, "é": null}`}, []string{`{"a\u0022b": null, "é": null}`}},
		{"free object", `{"type":"object"}`,
			[]string{`{}`, `{"a": 1}`, `{"a": {"b": [1, "x", null]}, "c": true}`, `{"": []}`, `{"a": {}, "a": 1.5e3}`},
			[]string{`{"a":1}`, `{"a": 1,}`, `[]`, `{1: 2}`, `{"a" : 1}`, `{"a": [1,2]}`}},
		{"map", `{"type":"object","additionalProperties":{"type":"integer"}}`,
			[]string{`{}`, `{"x": 1}`, `{"x": 1, "y": -2}`}, []string{`{"x": "1"}`, `{"x": 1.5}`}},
		{"closed", `{"type":"object","additionalProperties":false}`, []string{`{}`}, []string{`{"a": 1}`}},
		{"any", `{}`, []string{`1`, `"s"`, `null`, `[]`, `{"a": [true]}`}, []string{``, `{`, `[1,2]`, `tru`}},
		{"true", `true`, []string{`[1, 2]`}, []string{`[1,2]`}},
		{"array", `{"type":"array","items":{"type":"integer"}}`,
			[]string{`[]`, `[1]`, `[1, 2, 3]`}, []string{`[1,2]`, `[1, "a"]`, `[ ]`, `[1, ]`, `[, 1]`}},
		{"array bounds", `{"type":"array","items":{"type":"boolean"},"minItems":1,"maxItems":2}`,
			[]string{`[true]`, `[true, false]`}, []string{`[]`, `[true, true, true]`}},
		{"array min", `{"type":"array","items":{"type":"null"},"minItems":2}`,
			[]string{`[null, null]`, `[null, null, null, null]`}, []string{`[]`, `[null]`}},
		{"array free", `{"type":"array"}`, []string{`[]`, `[1, "a", {"b": null}, [[]]]`}, []string{`[1,"a"]`}},
		{"tuple", `{"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}]}`,
			[]string{`[1, "a"]`}, []string{`[1]`, `[1, "a", 2]`, `["a", 1]`}},
		{"tuple more", `{"type":"array","prefixItems":[{"type":"integer"}],"items":{"type":"null"}}`,
			[]string{`[1]`, `[1, null]`, `[1, null, null]`}, []string{`[null]`, `[1, 2]`}},
		{"anyOf", `{"anyOf":[{"type":"integer"},{"type":"string","enum":["x"]},{"type":"array","items":{"type":"null"}}]}`,
			[]string{`1`, `"x"`, `[null]`}, []string{`"y"`, `[1]`, `1.5`}},
		{"oneOf", `{"oneOf":[{"type":"boolean"},{"type":"null"}]}`, []string{`true`, `null`}, []string{`0`}},
		{"anyOf merged with parent", `{"type":"object","anyOf":[{"properties":{"n":{"const":"a"}},"required":["n"]},{"properties":{"m":{"const":1}},"required":["m"]}]}`,
			[]string{`{"n": "a"}`, `{"m": 1}`}, []string{`{}`, `{"n": "b"}`}},
		{"allOf", `{"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"b":{"type":"null"}},"required":["b"]}]}`,
			[]string{`{"a": 1, "b": null}`}, []string{`{"a": 1}`, `{"b": null}`}},
		{"ref", `{"$defs":{"P":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}},"type":"array","items":{"$ref":"#/$defs/P"}}`,
			[]string{`[]`, `[{"x": 1}, {"x": 2}]`}, []string{`[{}]`, `[{"x": "1"}]`}},
		{"allOf ref (pydantic)", `{"definitions":{"C":{"enum":["r","g"]}},"type":"object","properties":{"c":{"allOf":[{"$ref":"#/definitions/C"}],"description":"colour"}},"required":["c"]}`,
			[]string{`{"c": "r"}`}, []string{`{"c": "b"}`}},
		{"recursive ref", `{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#"}}},"required":["v","kids"]}`,
			[]string{`{"v": 1, "kids": []}`, `{"v": 1, "kids": [{"v": 2, "kids": [{"v": 3, "kids": []}]}]}`},
			[]string{`{"v": 1}`, `{"v": 1, "kids": [{}]}`}},
		{"annotations ignored", `{"type":"integer","title":"t","description":"d","default":3,"examples":[1],"minimum":0}`,
			[]string{`5`}, []string{`"5"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := compileSchema(t, c.schema, Options{})
			for _, s := range c.accept {
				if !a.Match([]byte(s)) {
					t.Errorf("rejects %q", s)
				}
			}
			for _, s := range c.reject {
				if a.Match([]byte(s)) {
					t.Errorf("accepts %q", s)
				}
			}
		})
	}
}

// TestSchemaPrefixes: every prefix of an accepted output is alive, and
// the state after the whole output is final exactly when nothing may
// follow.
func TestSchemaPrefixes(t *testing.T) {
	cases := []struct {
		schema, out string
		final       bool
	}{
		{`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`, `{"a": 12}`, true},
		{`{"type":"integer"}`, `12`, false},
		{`{"type":"string","enum":["ab","abc"]}`, `"ab"`, true},
		{`{"enum":[1,12]}`, `1`, false},
		{`{"type":"array","items":{"type":"string"}}`, `["x"]`, true},
	}
	for _, c := range cases {
		a := compileSchema(t, c.schema, Options{})
		s := a.Start()
		for i := 0; i < len(c.out); i++ {
			s = a.Feed(s, []byte{c.out[i]})
			if s.Dead() {
				t.Fatalf("%s: dead after %q", c.schema, c.out[:i+1])
			}
		}
		if !s.Accepting() || s.Final() != c.final {
			t.Errorf("%s after %q: accepting %v final %v, want final %v", c.schema, c.out, s.Accepting(), s.Final(), c.final)
		}
	}
}

func TestSchemaAllProperties(t *testing.T) {
	schema := `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}}}`
	a := compileSchema(t, schema, Options{AllProperties: true})
	if !a.Match([]byte(`{"a": 1, "b": 2}`)) || a.Match([]byte(`{"a": 1}`)) || a.Match([]byte(`{}`)) {
		t.Fatal("AllProperties must require every declared property")
	}
}

func TestSchemaDepth(t *testing.T) {
	a := compileSchema(t, `{}`, Options{MaxDepth: 2})
	for s, want := range map[string]bool{`[[1]]`: true, `[[[1]]]`: false, `{"a": {"b": 1}}`: true, `{"a": {"b": {}}}`: false, `[{"a": []}]`: false} {
		if a.Match([]byte(s)) != want {
			t.Errorf("%s: match %v, want %v", s, !want, want)
		}
	}
}

func TestSchemaErrors(t *testing.T) {
	for _, s := range []string{
		``, `1`, `"string"`, `[]`, `{"type":"strin"}`, `{"type":3}`, `{"enum":3}`, `{"enum":[]}`, `false`,
		`{"$ref":"#/$defs/missing"}`, `{"$ref":"http://x/y"}`, `{"anyOf":{}}`, `{"type":"string","minLength":-1}`,
		`{"type":"string","minLength":100000}`, `{"type":"object","properties":[]}`, `{"type":"object","properties":{"a":{"type":"integer"}},"required":"a"}`,
		`{"const":1e999}`, `{"type":"object","properties":{"a":false},"required":["a"]}`, `{"type":"integer"} x`,
	} {
		b := NewBuilder(Options{})
		f, err := b.Schema([]byte(s))
		if err == nil {
			_, err = b.Compile(f)
		}
		if err == nil {
			t.Errorf("%q compiles", s)
		}
	}
}

func TestSchemaTooLarge(t *testing.T) {
	b := NewBuilder(Options{MaxNodes: 5000})
	f, err := b.Schema([]byte(`{"type":"array","items":{"type":"string","maxLength":200},"maxItems":200}`))
	if err == nil {
		_, err = b.Compile(f)
	}
	if err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("err = %v", err)
	}
}

func TestUntilLit(t *testing.T) {
	b := NewBuilder(Options{})
	f := b.Seq(b.UntilLit("</think>"), b.Lit("{}"))
	a, err := b.Compile(f)
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[string]bool{
		"</think>{}": true, "abc</think>{}": true, "<</think>{}": true, "</thin</think>{}": true, "</</think>{}": true,
		"a</think>x</think>{}": false, "</think>": false, "</thinK>{}": false, "{}": false,
	} {
		if a.Match([]byte(s)) != want {
			t.Errorf("%q: match %v, want %v", s, !want, want)
		}
	}
}

// TestSchemaSamples walks random paths through each automaton and checks
// every complete output against encoding/json and the schema's own
// validator.
func TestSchemaSamples(t *testing.T) {
	for _, schema := range []string{
		`{"type":"object","properties":{"s":{"type":"string","maxLength":5},"n":{"type":"number"},"i":{"type":"integer"},"b":{"type":"boolean"},"z":{"type":"null"},"e":{"enum":["x","y",3]},"a":{"type":"array","items":{"type":"integer"},"maxItems":3},"o":{"type":"object"}},"required":["s","n","a"]}`,
		`{"type":"object"}`,
		`{"anyOf":[{"type":"string"},{"type":"array","items":{"type":"boolean"}}]}`,
	} {
		a := compileSchema(t, schema, Options{MaxDepth: 3})
		rng := rand.New(rand.NewPCG(1, 2))
		for range 300 {
			out, ok := randomWalk(a, rng, 400)
			if !ok {
				continue
			}
			if !json.Valid(out) {
				t.Fatalf("%s: sample %q is not JSON", schema, out)
			}
		}
	}
}

// randomWalk follows random live bytes, stopping at an accepting state
// with probability 1/4 (or when final); false if it ran out of steps.
func randomWalk(a *Automaton, rng *rand.Rand, steps int) ([]byte, bool) {
	s := a.Start()
	var out []byte
	for range steps {
		if s.Final() || (s.Accepting() && rng.IntN(4) == 0) {
			return out, true
		}
		var live []byte
		for c := 0; c < 256; c++ {
			if !a.Feed(s, []byte{byte(c)}).Dead() {
				live = append(live, byte(c))
			}
		}
		// Prefer structure over long strings: ASCII letters and digits
		// are sampled like any other byte.
		c := live[rng.IntN(len(live))]
		out = append(out, c)
		s = a.Feed(s, []byte{c})
	}
	return out, false
}

func TestSchemaForbid(t *testing.T) {
	for _, schema := range []string{`{"type":"string"}`, `{"type":"string","maxLength":20}`, `{}`} {
		a := compileSchema(t, schema, Options{Forbid: "</tool_call>"})
		for s, want := range map[string]bool{
			`"a</tool_call>"`: false, `"</tool_call"`: true, `"<</tool_call>"`: false, `"</tool_</tool_call>"`: false,
			`"<\/tool_call>"`: true, `"</tool_call\u003e"`: true, `"</tool_callé>"`: true, `"x</tool_cal>"`: true,
		} {
			if got := a.Match([]byte(s)); got != want {
				t.Errorf("%s: %s match %v, want %v", schema, s, got, want)
			}
		}
	}
}

func TestSchemaPattern(t *testing.T) {
	cases := []struct {
		pattern        string
		accept, reject []string
	}{
		{`^[a-z]{2,4}$`, []string{`"ab"`, `"abcd"`}, []string{`"a"`, `"abcde"`, `"aB"`, `"ab "`}},
		{`^\d{4}-\d{2}-\d{2}$`, []string{`"2024-01-31"`}, []string{`"2024-1-31"`, `"x2024-01-31"`}},
		{`ab`, []string{`"ab"`, `"xxaby"`, `"é\nab\""`}, []string{`"a b"`, `""`}},
		{`^a"b\\c$`, []string{`"a\"b\\c"`}, []string{`"a\u0022b\\c"`, `"ab\\c"`}},
		{`^é+$`, []string{`"é"`, `"ééé"`}, []string{`"e"`, `""`}},
		{`(?i)^abc$`, []string{`"abc"`, `"ABC"`, `"aBc"`}, []string{`"abd"`}},
		{`^[^"]*$`, []string{`""`, `"x\n"`, `"日本"`}, []string{`"x\""`, "\"x\n\""}},
		{`^.$`, []string{`"😀"`, `"a"`, `"\t"`}, []string{`"ab"`, `"\n"`, `""`}},
		{`^(cat|dog)s?$`, []string{`"cat"`, `"dogs"`}, []string{`"cow"`, `"cats!"`}},
		{`^[\x{10000}-\x{10FFFF}]$`, []string{`"😀"`, "\"\U0010FFFF\""}, []string{`"a"`, `"é"`}},
		{`^a\b`, []string{`"a"`, `"anything"`, `""`}, nil}, // unsupported: not enforced
		{`^(a`, []string{`"x"`}, nil}, // not a regex: not enforced
	}
	for _, c := range cases {
		schema, _ := json.Marshal(map[string]any{"type": "string", "pattern": c.pattern})
		a := compileSchema(t, string(schema), Options{})
		for _, s := range c.accept {
			if !a.Match([]byte(s)) {
				t.Errorf("%s rejects %s", c.pattern, s)
			}
		}
		for _, s := range c.reject {
			if a.Match([]byte(s)) {
				t.Errorf("%s accepts %s", c.pattern, s)
			}
		}
	}
}

// TestSchemaPatternSamples: random outputs of pattern strings decode to
// values the pattern matches.
func TestSchemaPatternSamples(t *testing.T) {
	for _, p := range []string{`^[a-z]{2,4}$`, `^\d{3}-[A-F0-9]+$`, `^(x|"|\\|\n)+$`, `(?i)^héllo`, `^[^a-z]{1,3}$`, `b+`} {
		schema, _ := json.Marshal(map[string]any{"type": "string", "pattern": p})
		a := compileSchema(t, string(schema), Options{})
		re := regexp.MustCompile(p)
		rng := rand.New(rand.NewPCG(3, 4))
		n := 0
		for range 200 {
			out, ok := randomWalk(a, rng, 300)
			if !ok {
				continue
			}
			var v string
			if err := json.Unmarshal(out, &v); err != nil {
				t.Fatalf("%s: %q: %v", p, out, err)
			}
			if !re.MatchString(v) {
				t.Fatalf("%s: %q does not match", p, v)
			}
			n++
		}
		if n < 50 {
			t.Fatalf("%s: only %d complete samples", p, n)
		}
	}
}

// A state from which no output can complete is Dead at once: a property
// whose schema admits nothing (enum []) never starts, so constrained
// decoding cannot walk into a dead end.
func TestUnsatisfiableBranchIsDead(t *testing.T) {
	a := compileSchema(t, `{"properties":{"a":{"type":"integer"},"b":{"enum":[]}},"required":["a"]}`, Options{})
	for p, dead := range map[string]bool{`{"a": 1`: false, `{"b"`: true, `{"a": 1, "b"`: true, `{"a": 1, "b": `: true, `{"a": 1, "`: true} {
		if got := a.Feed(a.Start(), []byte(p)).Dead(); got != dead {
			t.Errorf("%s: dead %v, want %v", p, got, dead)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		if out, ok := randomWalk(a, rng, 200); ok && !a.Match(out) {
			t.Fatalf("walk %q", out)
		}
	}
}
