package conformance

import (
	"math"
	"sort"

	"github.com/hone-rl/hone/kernels"
)

// sampleCase is one batch of rows for the Sample group: its logits and
// each row's parameters, drawn from the suite's generator.
type sampleCase struct {
	name   string
	vocab  int
	rows   int
	logits func(s *suite, n int) []float32
	params func(s *suite, r int) kernels.Sampling
	topN   []int
}

// sampleCases: random rows over every combination of greedy, top-k and
// top-p, vocabularies under a warp, of a partial block, of several slices
// per thread; top-k at the 256 cap and above it, top-N at 256; logits
// tied at the k-th candidate and across the top-p cut (halves; a best
// value shared by -0 and +0, which are equal); rows mostly -inf, so that
// the candidates and the kept set reach into -inf; top-p alone over a
// flat and a nearly flat row, where it keeps several hundred tokens, and
// top-p 0, which keeps one.
var sampleCases = []sampleCase{
	{name: "random", vocab: 7, rows: 60, logits: scaledRandn, params: mixedParams, topN: []int{0, 5, 7}},
	{name: "random", vocab: 100, rows: 60, logits: scaledRandn, params: mixedParams, topN: []int{0, 5}},
	{name: "random", vocab: 1000, rows: 12, logits: scaledRandn, params: mixedParams, topN: []int{0, 5}},
	{name: "random", vocab: 3000, rows: 10, logits: scaledRandn, params: mixedParams, topN: []int{0, 5}},
	{name: "cap", vocab: 3000, rows: 4, logits: scaledRandn, topN: []int{0, 256},
		params: func(s *suite, r int) kernels.Sampling {
			return kernels.Sampling{Temperature: 1, TopP: []float32{1, 0.9}[r%2], TopK: []int32{256, 300, 255, 257}[r%4], Seed: s.rng.Uint64()}
		}},
	{name: "ties", vocab: 777, rows: 30, params: mixedParams, topN: []int{0, 20},
		logits: func(s *suite, n int) []float32 {
			x := s.randn(n)
			for i := range x {
				x[i] = float32(math.Round(float64(x[i])*2) / 2) // halves: hundreds of ties each
			}
			x[3], x[4] = float32(math.Copysign(0, -1)), 0
			return x
		}},
	{name: "signed zeros", vocab: 500, rows: 24, topN: []int{0, 20},
		// top_p * top_k not a whole number: the kept candidates are tied, so
		// an integer would put the cut exactly on float rounding.
		params: func(s *suite, r int) kernels.Sampling {
			return kernels.Sampling{Temperature: []float32{0, 0.6, 1}[r%3], TopP: []float32{1, 0.93, 0.57}[r/3%3],
				TopK: []int32{0, 1, 5, 40}[r%4], Seed: s.rng.Uint64()}
		},
		logits: func(s *suite, n int) []float32 {
			x := s.randn(n)
			for i := range x {
				x[i] = []float32{float32(math.Copysign(0, -1)), 0, -0.1 - float32(math.Abs(float64(x[i])))}[i%3]
			}
			return x
		}},
	{name: "-inf", vocab: 300, rows: 30, params: mixedParams, topN: []int{0, 30}, // top-k 40 and top-N 30 reach -inf
		logits: func(s *suite, n int) []float32 {
			x := s.randn(n)
			for i := range x {
				if i%300 >= 20 && i%50 != 0 { // 26 finite logits a row
					x[i] = float32(math.Inf(-1))
				}
			}
			return x
		}},
	{name: "flat top-p", vocab: 1000, rows: 8, topN: []int{0, 5},
		logits: func(s *suite, n int) []float32 {
			x := make([]float32, n)
			for i := range x {
				x[i] = 0.25
			}
			return x
		},
		params: func(s *suite, r int) kernels.Sampling {
			return kernels.Sampling{Temperature: []float32{1, 0.7}[r%2], TopP: []float32{0.3337, 0.9004}[r/2%2], Seed: s.rng.Uint64()}
		}},
	{name: "nearly flat top-p", vocab: 2000, rows: 8, topN: []int{0, 5},
		logits: func(s *suite, n int) []float32 {
			x := s.randn(n)
			for i := range x {
				x[i] *= 0.01
			}
			return x
		},
		params: func(s *suite, r int) kernels.Sampling {
			return kernels.Sampling{Temperature: 1, TopP: []float32{0.5, 0.95, 0}[r%3], Seed: s.rng.Uint64()} // 0: the first token
		}},
}

// scaledRandn is normal logits of standard deviation 3, with a tie
// between ids 5 and 6 (the smaller id comes first).
func scaledRandn(s *suite, n int) []float32 {
	x := s.randn(n)
	for i := range x {
		x[i] *= 3
	}
	x[5] = x[6]
	return x
}

// mixedParams cycles through greedy and three temperatures, top-p off,
// 0.9 and 0.5, top-k off, 1, 5, 40 and over the vocabulary.
func mixedParams(s *suite, r int) kernels.Sampling {
	return kernels.Sampling{Temperature: []float32{0, 0.6, 1, 1.3}[r%4], TopP: []float32{1, 0.9, 0.5}[r%3],
		TopK: []int32{0, 1, 5, 40, 5000}[r%5], Seed: s.rng.Uint64()}
}

// sample holds a backend's kernels.Sampler to refSample on sampleCases:
// every row's token and top-N ids equal to the reference's for the same
// seed, log-probabilities within 1e-5 (-inf exactly). Backends that are
// no Sampler skip it.
func (s *suite) sample(t T) {
	sm, ok := s.be.(kernels.Sampler)
	if !ok {
		return
	}
	for _, c := range sampleCases {
		x := c.logits(s, c.rows*c.vocab)
		params := make([]kernels.Sampling, c.rows)
		for r := range params {
			params[r] = c.params(s, r)
		}
		for _, topN := range c.topN {
			s.checkSample(t, sm, c.name, x, params, c.vocab, min(topN, c.vocab))
		}
	}
	s.sampleDistribution(t, sm)
	s.sampleFlatTopP(t, sm)
	panics(t, "sample with a missing parameter row", func() { sm.Sample(s.up(s.randn(6), 2, 3), make([]kernels.Sampling, 1), 0) })
	panics(t, "sample top 4 of 3", func() { sm.Sample(s.up(s.randn(6), 2, 3), make([]kernels.Sampling, 2), 4) })
}

// checkSample compares one Sample call with refSample row by row.
func (s *suite) checkSample(t T, sm kernels.Sampler, name string, x []float32, params []kernels.Sampling, vocab, topN int) {
	rows := len(params)
	got := sm.Sample(s.up(x, rows, vocab), params, topN)
	if len(got.Tokens) != rows || len(got.Logp) != rows || len(got.TopIDs) != rows*topN || len(got.TopLogp) != rows*topN {
		t.Fatalf("sample %s: %d tokens, %d logp, %d top ids, %d top logp for %d rows, top %d",
			name, len(got.Tokens), len(got.Logp), len(got.TopIDs), len(got.TopLogp), rows, topN)
	}
	var lp []float32
	var want []float64
	logp := func(what string, g float32, w float64) {
		if math.IsInf(w, -1) {
			if !math.IsInf(float64(g), -1) {
				t.Errorf("sample %s: %s %g, reference -inf", name, what, g)
			}
			return
		}
		lp, want = append(lp, g), append(want, w)
	}
	for r := 0; r < rows; r++ {
		tok, l, ids, lps := refSample(x[r*vocab:(r+1)*vocab], params[r], r, topN)
		if got.Tokens[r] != tok {
			t.Errorf("sample %s: vocab %d top %d row %d %+v: token %d, reference %d", name, vocab, topN, r, params[r], got.Tokens[r], tok)
		}
		logp("logp", got.Logp[r], l)
		for c := 0; c < topN; c++ {
			if got.TopIDs[r*topN+c] != ids[c] {
				t.Errorf("sample %s: vocab %d row %d: top %d id %d, reference %d", name, vocab, r, c, got.TopIDs[r*topN+c], ids[c])
			}
			logp("top logp", got.TopLogp[r*topN+c], lps[c])
		}
	}
	near(t, "sample "+name+" logp", lp, want, 1e-5, 1e-5)
}

// sampleFlatTopP: top-p alone over a flat row keeps the first ceil(p *
// vocab) ids and draws among them evenly, past the 256 best logits.
func (s *suite) sampleFlatTopP(t T, sm kernels.Sampler) {
	const rows, vocab, kept = 200, 1000, 334
	x := make([]float32, rows*vocab)
	params := make([]kernels.Sampling, rows)
	for r := range params {
		params[r] = kernels.Sampling{Temperature: 1, TopP: 0.3337, Seed: uint64(r) * 104729}
	}
	got := sm.Sample(s.up(x, rows, vocab), params, 0)
	most := int32(0)
	for _, tok := range got.Tokens {
		if tok < 0 || tok >= kept {
			t.Fatalf("sample: flat top-p 0.3337 of %d drew token %d, want below %d", vocab, tok, kept)
		}
		most = max(most, tok)
	}
	if most < 256 {
		t.Errorf("sample: flat top-p drew no token past the 256th in %d rows (largest %d)", rows, most)
	}
}

// sampleDistribution: over many seeds, a row's tokens follow the
// temperature-scaled softmax restricted by top-k (a chi-square test), so
// the draw is a draw and not only equal to a reference.
func (s *suite) sampleDistribution(t T, sm kernels.Sampler) {
	x := []float32{2, 1.5, 1, 0.5, 0, -0.5, -1, -3}
	const rows = 3000
	logits := make([]float32, 0, rows*len(x))
	params := make([]kernels.Sampling, rows)
	for r := range params {
		logits = append(logits, x...)
		params[r] = kernels.Sampling{Temperature: 0.8, TopP: 1, TopK: 5, Seed: uint64(r) * 7919}
	}
	got := sm.Sample(s.up(logits, rows, len(x)), params, 0)
	counts := make([]float64, len(x))
	for _, tok := range got.Tokens {
		counts[tok]++
	}
	var z float64
	for i := 0; i < 5; i++ {
		z += math.Exp(float64(x[i]) / 0.8)
	}
	var chi2 float64
	for i, c := range counts {
		if i >= 5 {
			if c != 0 {
				t.Errorf("sample: token %d outside the top 5 drawn %g times", i, c)
			}
			continue
		}
		want := rows * math.Exp(float64(x[i])/0.8) / z
		chi2 += (c - want) * (c - want) / want
	}
	// 4 degrees of freedom: P(chi2 > 18.5) < 0.001.
	if chi2 > 18.5 {
		t.Errorf("sample: chi-square %.1f over counts %v", chi2, counts)
	}
}

// refSample is kernels/cuda/csrc/sample.cu's algorithm in float64, written
// the plain way: a full stable sort of the row gives its order, top-k and
// top-p are prefixes of it, and the kept tokens are walked in order with
// top-k on, by id with it off.
func refSample(x []float32, p kernels.Sampling, row, topN int) (tok int32, logp float64, ids []int32, lps []float64) {
	vocab := len(x)
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, float64(v))
	}
	var s float64
	for _, v := range x {
		s += math.Exp(float64(v) - m)
	}
	lse := m + math.Log(s)
	order := make([]int, vocab)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return x[order[a]] > x[order[b]] })
	topK := int(p.TopK)
	if topK >= vocab {
		topK = 0
	}
	topK = min(topK, kernels.MaxSampleCandidates)
	e := func(v float32) float64 { return math.Exp((float64(v) - m) / float64(p.Temperature)) }
	u01 := kernels.SampleUniform(p.Seed, row)
	chosen := order[0]
	switch {
	case p.Temperature <= 0:
	case topK > 0:
		chosen = refDraw(order[:refTopP(x, order[:topK], e, p.TopP)], x, e, u01)
	default:
		kept := append([]int(nil), order[:refTopP(x, order, e, p.TopP)]...)
		sort.Ints(kept)
		chosen = refDraw(kept, x, e, u01)
	}
	for c := 0; c < topN; c++ {
		ids = append(ids, int32(order[c]))
		lps = append(lps, float64(x[order[c]])-lse)
	}
	return int32(chosen), float64(x[chosen]) - lse, ids, lps
}

// refTopP is the length of the shortest prefix of cand holding topP of
// cand's mass (all of cand when topP >= 1).
func refTopP(x []float32, cand []int, e func(float32) float64, topP float32) int {
	if topP >= 1 {
		return len(cand)
	}
	var total float64
	for _, c := range cand {
		total += e(x[c])
	}
	var cum float64
	for i, c := range cand {
		cum += e(x[c])
		if cum >= float64(topP)*total {
			return i + 1
		}
	}
	return len(cand)
}

// refDraw walks kept in its order until the draw, u01 times their mass.
func refDraw(kept []int, x []float32, e func(float32) float64, u01 float64) int {
	var mass float64
	for _, c := range kept {
		mass += e(x[c])
	}
	u, cum := u01*mass, 0.0
	for _, c := range kept {
		cum += e(x[c])
		if u < cum {
			return c
		}
	}
	return kept[len(kept)-1]
}
