package engine

import (
	"bytes"
	"compress/gzip"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hone-rl/hone/engine/internal/grammar"
	"github.com/hone-rl/hone/model/tokenizer"
)

var qwenTok struct {
	sync.Once
	tok tokenizer.Tokenizer
	err error
}

// loadQwenTokenizer reads Qwen3's real tokenizer (151k tokens) from the
// tokenizer package's test data.
func loadQwenTokenizer(t testing.TB) tokenizer.Tokenizer {
	t.Helper()
	qwenTok.Do(func() {
		dir := filepath.Join("..", "model", "tokenizer", "testdata", "qwen3")
		raw, err := os.ReadFile(filepath.Join(dir, "tokenizer.json.gz"))
		if err != nil {
			qwenTok.err = err
			return
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			qwenTok.err = err
			return
		}
		tj, err := io.ReadAll(zr)
		if err != nil {
			qwenTok.err = err
			return
		}
		cfg, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
		if err != nil {
			qwenTok.err = err
			return
		}
		qwenTok.tok, qwenTok.err = tokenizer.Parse(tj, cfg)
	})
	if qwenTok.err != nil {
		t.Skip("Qwen3 tokenizer:", qwenTok.err)
	}
	return qwenTok.tok
}

// qwenGuide is a forced get_weather call on Qwen3's vocabulary (151936
// logits), with a valid output's token ids and the states along it.
type qwenGuide struct {
	g      *guide
	eos    map[int32]bool
	ids    []int32
	states []*grammar.State
	vocab  int
}

func newQwenGuide(t testing.TB) *qwenGuide {
	tok := loadQwenTokenizer(t)
	const logits = 151936
	e := &Engine{tok: tok, vocab: logits, eos: map[int32]bool{}}
	for _, id := range tok.Config().EOSIDs {
		e.eos[id] = true
	}
	start := time.Now()
	e.guideVocab()
	vocabTime := time.Since(start)
	req := &chatRequest{Tools: []byte(`[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",` +
		`"properties":{"city":{"type":"string"},"unit":{"enum":["celsius","fahrenheit"]},"days":{"type":"integer"}},` +
		`"required":["city","unit"]}}}]`), ToolChoice: []byte(`"required"`)}
	start = time.Now()
	g, apiErr := e.chatGuide(req, nil, false)
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	t.Logf("Qwen3 vocabulary trie %v, guide compile %v (%d NFA nodes)", vocabTime, time.Since(start), g.a.Nodes())
	out := "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"San Francisco, CA\", \"unit\": \"fahrenheit\", \"days\": 3}}\n</tool_call>"
	q := &qwenGuide{g: g, eos: e.eos, ids: tok.Encode(out), vocab: logits}
	st := g.a.Start()
	for _, id := range q.ids {
		q.states = append(q.states, st)
		if st = g.a.Next(g.vocab, st, id); st.Dead() {
			t.Fatalf("token %d (%q) not allowed", id, tok.Decode([]int32{id}))
		}
	}
	if !st.Accepting() {
		t.Fatal("output incomplete")
	}
	return q
}

// BenchmarkGuidedSample is the sampler's cost per token on Qwen3's
// vocabulary: free sampling, guided sampling of a model that mostly wants
// the allowed token (trained), of a flat random model (rejections, then
// the mask), and with logprobs (always the mask), the masks cached or not.
func BenchmarkGuidedSample(b *testing.B) {
	q := newQwenGuide(b)
	rng := rand.New(rand.NewPCG(1, 2))
	flat := make([]float32, q.vocab)
	for i := range flat {
		flat[i] = float32(rng.NormFloat64() * 0.1)
	}
	peaked := make([][]float32, len(q.ids)) // the output's token far ahead
	for k, id := range q.ids {
		peaked[k] = append([]float32(nil), flat...)
		peaked[k][id] += 20
	}
	run := func(b *testing.B, p samplingParams, logits func(k int) []float32, guided, cold bool) {
		for i := 0; b.Loop(); i++ {
			k := i % len(q.ids)
			if guided {
				st := q.states[k]
				if cold {
					b.StopTimer()
					st = coldState(q, k)
					b.StartTimer()
				}
				gs := q.g.newState(q.eos, q.eos)
				gs.st = st
				p.Guide = gs
			}
			sample(logits(k), logits(k), p, rng)
		}
	}
	plain := samplingParams{Temperature: 1, TopP: 1}
	withLP := samplingParams{Temperature: 1, TopP: 1, Logprobs: true}
	b.Run("free", func(b *testing.B) { run(b, plain, func(int) []float32 { return flat }, false, false) })
	b.Run("free-logprobs", func(b *testing.B) { run(b, withLP, func(int) []float32 { return flat }, false, false) })
	b.Run("guided-trained", func(b *testing.B) { run(b, plain, func(k int) []float32 { return peaked[k] }, true, false) })
	b.Run("guided-flat", func(b *testing.B) { run(b, plain, func(int) []float32 { return flat }, true, false) })
	b.Run("guided-logprobs", func(b *testing.B) { run(b, withLP, func(k int) []float32 { return peaked[k] }, true, false) })
	b.Run("guided-logprobs-cold", func(b *testing.B) { run(b, withLP, func(k int) []float32 { return peaked[k] }, true, true) })
}

// coldState is the state at output position k of a freshly compiled copy
// of the guide, so its mask is not cached.
func coldState(q *qwenGuide, k int) *grammar.State {
	b := grammar.NewBuilder(grammar.Options{Forbid: "</tool_call>"})
	f := b.Seq(b.Lit("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "), b.AnyObject(), b.Lit("}\n</tool_call>"))
	a, _ := b.Compile(f)
	q.g = &guide{a: a, vocab: q.g.vocab}
	st := a.Start()
	for _, id := range q.ids[:k] {
		st = a.Next(q.g.vocab, st, id)
	}
	return st
}

// BenchmarkGuideParts times the guide's own work per token on Qwen3's
// vocabulary: checking a drawn token, building the masked logits from a
// cached mask, and a cold mask (a walk of the vocabulary trie).
func BenchmarkGuideParts(b *testing.B) {
	q := newQwenGuide(b)
	logits := make([]float32, q.vocab)
	b.Run("check", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			k := i % len(q.ids)
			q.g.a.Next(q.g.vocab, q.states[k], q.ids[k])
		}
	})
	b.Run("masked-cached", func(b *testing.B) {
		gs := q.g.newState(q.eos, q.eos)
		for i := 0; b.Loop(); i++ {
			gs.st = q.states[i%len(q.ids)]
			gs.masked(logits, logits)
		}
	})
	b.Run("mask-cold", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			k := i % len(q.ids)
			b.StopTimer()
			st := coldState(q, k)
			b.StartTimer()
			q.g.a.Mask(q.g.vocab, st)
		}
	})
}
