package proxy

import (
	"bytes"
	"fmt"
	"io"
	"math/bits"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hone-rl/hone/proxy/internal/sse"
	"github.com/tidwall/gjson"
)

// FuzzRewrite: any valid JSON object request rewrites into valid JSON that
// keeps the client's own fields and asks for logprobs and token ids.
// inspectRef is inspect as gjson reads the body (the members and their
// values): the reference FuzzRewrite holds the walk to.
func inspectRef(doc gjson.Result, d dialect) (a asked, model string) {
	seen, exact := map[string]bool{}, map[string]bool{}
	doc.ForEach(func(k, v gjson.Result) bool {
		key := k.Str
		a.repeats = a.repeats || exact[key]
		exact[key] = true
		if b := foldedBit(key); b != 0 {
			a.dups |= b
			key = takenKeys[bits.TrailingZeros8(b)]
		}
		if key == "model" {
			model = v.String()
		}
		if seen[key] {
			a.dups |= takenBit(key)
		}
		seen[key] = true
		a.take(key, v, d)
		return true
	})
	return a, model
}

func FuzzRewrite(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[],"stream":true,"stream_options":null}`,
		`{"model":"m","stream":true,"stream_options":{"include_usage":false},"logprobs":true,"top_logprobs":3}`,
		`{"model":"m","prompt":"x","logprobs":2,"return_token_ids":true}`,
		`{"model":"a\"b","messages":[{"role":"user","content":"\u00e9\n"}],"n":2}`,
		`{"logprobs":null,"model":null}`,
		`{"model":"m","cache_salt":"a","logprobs":false,"cache_salt":1,"stream_options":{},"logprobs":null,"model":"n","stream":true,"stream_options":{"include_usage":false}}`,
	} {
		f.Add([]byte(s), true)
	}
	addFixtureSeeds(f, "request.json", func(b []byte) { f.Add(b, true) })
	f.Fuzz(func(t *testing.T, body []byte, chat bool) {
		if !gjson.ValidBytes(body) || !gjson.ParseBytes(body).IsObject() {
			if _, _, ok := inspect(body, chatDialect); ok {
				t.Fatalf("inspect took %q, which is not a JSON object", body)
			}
			return
		}
		d := completionsDialect
		if chat {
			d = chatDialect
		}
		a, model, ok := inspect(body, d)
		ra, rmodel := inspectRef(gjson.ParseBytes(body), d)
		if !ok || model != rmodel || fmt.Sprintf("%+v", a) != fmt.Sprintf("%+v", ra) {
			t.Fatalf("%s: inspect %v %q %+v, gjson's %q %+v", body, ok, model, a, rmodel, ra)
		}
		salt := ""
		if len(body)%2 == 0 { // half the inputs as from a client key (cachesalt.go)
			salt = keySalt("k")
		}
		out, err := rewriteRequest(body, d, a, model, "auto", "target-model", true, salt)
		if err != nil {
			return // sjson refuses some odd-but-valid documents; hone answers 400
		}
		if !gjson.ValidBytes(out) {
			t.Fatalf("rewrite produced invalid JSON: %s -> %s", body, out)
		}
		g := gjson.ParseBytes(out)
		if g.Get("model").String() != "target-model" || !g.Get("return_token_ids").Bool() {
			t.Fatalf("rewrite lost model/token ids: %s", out)
		}
		if a.stream && !g.Get("stream_options.include_usage").Bool() {
			t.Fatalf("stream without usage: %s", out)
		}
		if tl := gjson.GetBytes(body, "top_logprobs"); tl.Exists() && g.Get("top_logprobs").Raw != tl.Raw {
			t.Fatalf("top_logprobs changed: %s -> %s", body, out)
		}
		if cs := g.Get("cache_salt"); salt != "" && (cs.Type != gjson.String || !strings.HasPrefix(cs.Str, "hone-") ||
			(cs.Str != salt) != a.has.cacheSalt) {
			t.Fatalf("cache_salt %s with the key's %s: %s", cs.Raw, salt, out)
		}
		for _, k := range takenKeys { // each once: the value hone set is the one the engine reads
			if n := countKey(out, k); n > 1 {
				t.Fatalf("%d %q keys: %s", n, k, out)
			}
		}
		acc := accumulator{dialect: d}
		acc.addBody(out)
		stripped := strip(out, acc.injected, a)
		if !gjson.ValidBytes(stripped) {
			t.Fatalf("strip produced invalid JSON: %s", stripped)
		}
	})
}

// countKey counts a key among an object's top-level members.
func countKey(body []byte, key string) int {
	n := 0
	gjson.ParseBytes(body).ForEach(func(k, _ gjson.Result) bool {
		if k.Str == key {
			n++
		}
		return true
	})
	return n
}

// FuzzResponse: a non-stream body walked in place and stripped into a
// reused buffer stays valid JSON, and nothing changes when the client asked
// for everything hone injects.
func FuzzResponse(f *testing.F) {
	f.Add([]byte(`{"choices":[{"index":0,"message":{"content":"hi"},"logprobs":{"content":[{"token":"hi","logprob":-1}]},"token_ids":[1]}],"prompt_token_ids":[2]}`), true)
	f.Add([]byte(`{"choices":[{"index":0,"text":"x","logprobs":{"tokens":["token_id:5"],"token_logprobs":[-0.5]},"prompt_token_ids":[1,2]}]}`), false)
	addFixtureSeeds(f, "upstream.json", func(b []byte) { f.Add(b, true) })
	f.Fuzz(func(t *testing.T, body []byte, chat bool) {
		d := completionsDialect
		if chat {
			d = chatDialect
		}
		own := append([]byte(nil), body...)
		acc := accumulator{dialect: d}
		acc.addBody(own)
		buf := make([]byte, 0, 8)
		out := stripInto(buf, own, acc.injected, asked{})
		if gjson.ValidBytes(body) && !gjson.ValidBytes(out) {
			t.Fatalf("strip broke valid JSON %q -> %q", body, out)
		}
		everything := asked{logprobs: true, tokenIDs: true}
		all := stripInto(out[:0], own, acc.injected, everything)
		if stripping(acc.injected, everything) || !bytes.Equal(all, body) {
			t.Fatalf("nothing to strip, yet %q -> %q", body, all)
		}
		if !bytes.Equal(own, body) {
			t.Fatal("the walk changed the body")
		}
	})
}

// FuzzSSE: the accumulator never panics on the events of a stream, and
// strip keeps valid JSON valid (the event reader's own fuzz target is
// sse.FuzzReader).
func FuzzSSE(f *testing.F) {
	for _, s := range []string{
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"token_ids\":[1]}]}\n\ndata: [DONE]\n\n",
		"data: x\r\n\r\n: comment\n\nevent: e\ndata: 1\ndata: 2\n\n",
		"\n\n\ndata: partial",
		"data: {\"choices\":[{\"index\":3,\"delta\":{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"{\"}}]}}]}\n\n",
		"data: {\"choices\":[{\"index\":0,\"logprobs\":{\"content\":[{\"token\":\"token_id:12\",\"logprob\":-1}]}}]}\n\n",
	} {
		f.Add([]byte(s))
	}
	addFixtureSeeds(f, "upstream.sse", func(b []byte) { f.Add(b) })
	f.Fuzz(func(t *testing.T, in []byte) {
		r := sse.NewReader(bytes.NewReader(in))
		acc := accumulator{dialect: chatDialect}
		for {
			ev, err := r.Next()
			if data, ok := sse.Data(ev); ok && err == nil {
				acc.addChunk(data)
				if s := strip(data, acc.injected, asked{}); !gjson.ValidBytes(s) && gjson.ValidBytes(data) {
					t.Fatalf("strip broke valid JSON %q -> %q", data, s)
				}
			}
			if err != nil {
				if err != io.EOF && err != io.ErrUnexpectedEOF {
					t.Fatal(err)
				}
				break
			}
		}
		_ = acc.aggregate()
	})
}

// addFixtureSeeds seeds a fuzzer with every fixture file of a name.
func addFixtureSeeds(f *testing.F, file string, add func([]byte)) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "cases", "*", file))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			add(b)
		}
	}
}
