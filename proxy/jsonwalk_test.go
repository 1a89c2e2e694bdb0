package proxy

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"testing"
	"unsafe"

	"github.com/hone-rl/hone/internal/jsonwalk"
	"github.com/tidwall/gjson"
)

// accState is what the accumulator keeps, printed for comparison (%v
// prints float32s exactly and NaN as NaN; nil and empty slices alike).
func accState(a *accumulator) string {
	inj := slices.Clone(a.injected)
	slices.SortFunc(inj, func(x, y injected) int {
		if x.start != y.start {
			return x.start - y.start
		}
		if x.end != y.end {
			return x.end - y.end
		}
		return int(x.kind) - int(y.kind)
	})
	return fmt.Sprintf("id=%q model=%q created=%d prompt=%v usage=%+v fromTokens=%v usageOnly=%v emptyDeltas=%v finished=%v bad=%v saw=%v injected=%v\nchoices=%+v",
		a.id, a.model, a.created, a.promptIDs, a.usage, a.fromTokens, a.usageOnly, a.emptyDeltas, a.finished, a.bad, a.sawChoice, inj, a.choices)
}

// FuzzAccumulateWalk: the single-pass walk folds any body, and any stream
// of chunks (the body's lines), into exactly what the gjson reference
// (accumulate_ref_test.go) does, noting the same spans; validJSON is
// gjson.Valid.
func FuzzAccumulateWalk(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"index":0,"message":{"content":"hi"},"logprobs":{"content":[{"token":"hi","logprob":-1}]},"token_ids":[1]}],"prompt_token_ids":[2]}`,
		`{"choices":[{"index":0,"text":"x","logprobs":{"tokens":["token_id:5"],"token_logprobs":[-0.5]},"prompt_token_ids":[1,2]}]}`,
		`{"choices":[{"logprobs":{"content":[{"token":"token_id:7","logprob":-0.25,"logprob":1e3},5,null]},"index":1}],"model":"m"}`,
		`{"choices":{"a":{"index":0,"delta":{"content":"\u00e9","tool_calls":[{"index":0,"function":{"name":"f"}}]}}},"usage":{"prompt_tokens":1}}`,
		`{"choices":null,"id":"x","created":"12"}` + "\n" + `{"choices":[],"usage":{"total_tokens":3}}` + "\n" + `{"choices":[1,{"finish_reason":"stop"}]}`,
		`{"choices":[{"logprobs":{"content":null,"token_logprobs":null,"tokens":"token_id:3"}}]} x`,
		`{"a":[1,2,{"b":-0.0e+5}],"\u0063hoices":[{"token_ids":[1.5,-3,123456789012345678901]}]}`,
		`{"choices":[{"index":0,"message":{"content":"ab"},"logprobs":{"content":[{"token":"token_id:5","logprob":-0.5,"bytes":[97],"top_logprobs":[{"token":"token_id:5","logprob":-0.5,"bytes":[97]}]},{"token":"token_id:6","logprob":-1e-3,"bytes":[],"top_logprobs":[]},{"token":"token_id:7","logprob":-2,"bytes":[1],"top_logprobs":[]} ]},"finish_reason":"stop"}]}`,
		// vLLM's entry form (vllmEntry), with escapes, exponents and what
		// it must leave to the general walk.
		`{"choices":[{"index":0,"logprobs":{"content":[{"token":"\n\u00e9\"","logprob":-1.5e-05,"bytes":[10,195,169,34],"top_logprobs":[]},{"token":"a","logprob":0,"bytes":[],"top_logprobs":[]},{"token":"b","logprob":-9999.0,"bytes":[0,255],"top_logprobs":[]}]},"token_ids":[1,2,3]}]}`,
		`{"choices":[{"index":0,"logprobs":{"content":[{"token":"a","logprob":-01,"bytes":[97],"top_logprobs":[]}]},"token_ids":[1]}]}`,
		`{"choices":[{"index":0,"logprobs":{"content":[{"token":"a","logprob":-1,"bytes":[097],"top_logprobs":[]},{"token":"a\x","logprob":-1,"bytes":[1,],"top_logprobs":[]}]},"token_ids":[1,2]}]}`,
		"{\"choices\":[{\"index\":0,\"logprobs\":{\"content\":[{\"token\":\"a\tb\",\"logprob\":-1,\"bytes\":[1],\"top_logprobs\":[]}]},\"token_ids\":[1]}]}",
	} {
		f.Add([]byte(s), true, true)
		f.Add([]byte(s), false, false)
	}
	body := bigBody(3)
	f.Add(body, true, false)
	addFixtureSeeds(f, "upstream.json", func(b []byte) { f.Add(b, true, true) })
	addFixtureSeeds(f, "upstream.sse", func(b []byte) {
		f.Add(bytes.ReplaceAll(bytes.ReplaceAll(b, []byte("data: "), nil), []byte("\n\n"), []byte("\n")), true, false)
	})
	f.Fuzz(func(t *testing.T, body []byte, chat, renaming bool) {
		if got, want := jsonwalk.Valid(string(body)), gjson.ValidBytes(body); got != want {
			t.Fatalf("jsonwalk.Valid(%q) = %v, gjson.Valid %v", body, got, want)
		}
		d := completionsDialect
		if chat {
			d = chatDialect
		}
		own := string(body)
		got, want := accumulator{dialect: d, renaming: renaming}, accumulator{dialect: d, renaming: renaming}
		got.addBody(body)
		if len(body) > 0 { // addBody takes no empty body
			want.addRef(own, false)
		}
		if g, w := accState(&got), accState(&want); g != w {
			t.Fatalf("body %q:\nwalk %s\nref  %s", body, g, w)
		}
		got, want = accumulator{dialect: d, renaming: renaming}, accumulator{dialect: d, renaming: renaming}
		for i, line := range bytes.Split(body, []byte("\n")) {
			got.addChunk(line)
			want.addRef(string(line), true)
			if g, w := accState(&got), accState(&want); g != w {
				t.Fatalf("chunk %d %q:\nwalk %s\nref  %s", i, line, g, w)
			}
		}
	})
}

// BenchmarkAccumulateRef and BenchmarkAccumulateRef512 are
// BenchmarkAccumulateBody and BenchmarkAccumulateBody512 with the gjson
// reference walk, for an A/B in one run.
func BenchmarkAccumulateRef(b *testing.B) {
	body, err := os.ReadFile(fixture(&testing.T{}, "chat", "upstream.json"))
	if err != nil {
		b.Fatal(err)
	}
	benchRef(b, body)
}

func BenchmarkAccumulateRef512(b *testing.B) { benchRef(b, bigBody(512)) }

func benchRef(b *testing.B, body []byte) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var out []byte
	for b.Loop() {
		a := accumulator{dialect: chatDialect}
		a.addRef(unsafe.String(&body[0], len(body)), false) // as addBody hands it over
		out = stripInto(out[:0], body, a.injected, asked{})
	}
}
