package conformance

import (
	"math"
	"sort"

	"github.com/hone-rl/hone/kernels"
)

// sample holds a backend's kernels.Sampler to refSample: greedy, the
// whole-row draw, top-k, top-p and both, with and without top-N
// log-probabilities, vocabularies under a warp, of a partial block, of
// several slices per thread and over the 256 candidates: every row's
// token equal to the reference's for the same seed, log-probabilities
// within 1e-5. Backends that are no Sampler skip it.
func (s *suite) sample(t T) {
	sm, ok := s.be.(kernels.Sampler)
	if !ok {
		return
	}
	for _, c := range []struct{ vocab, rows int }{{7, 60}, {100, 60}, {1000, 12}, {3000, 10}} {
		vocab, rows := c.vocab, c.rows
		x := s.randn(rows * vocab)
		for i := range x {
			x[i] *= 3
		}
		x[5] = x[6] // a tie: the smaller id comes first
		params := make([]kernels.Sampling, rows)
		for r := range params {
			params[r] = kernels.Sampling{Temperature: []float32{0, 0.6, 1, 1.3}[r%4], TopP: []float32{1, 0.9, 0.5}[r%3],
				TopK: []int32{0, 1, 5, 40, 5000}[r%5], Seed: s.rng.Uint64()}
		}
		for _, topN := range []int{0, min(5, vocab)} {
			got := sm.Sample(s.up(x, rows, vocab), params, topN)
			if len(got.Tokens) != rows || len(got.Logp) != rows || len(got.TopIDs) != rows*topN || len(got.TopLogp) != rows*topN {
				t.Fatalf("sample: %d tokens, %d logp, %d top ids, %d top logp for %d rows, top %d",
					len(got.Tokens), len(got.Logp), len(got.TopIDs), len(got.TopLogp), rows, topN)
			}
			var lp, topLp []float32
			var wantLp, wantTop []float64
			for r := 0; r < rows; r++ {
				tok, l, ids, lps := refSample(x[r*vocab:(r+1)*vocab], params[r], r, topN)
				if got.Tokens[r] != tok {
					t.Errorf("sample: vocab %d top %d row %d %+v: token %d, reference %d", vocab, topN, r, params[r], got.Tokens[r], tok)
				}
				lp, wantLp = append(lp, got.Logp[r]), append(wantLp, l)
				for c := 0; c < topN; c++ {
					if got.TopIDs[r*topN+c] != ids[c] {
						t.Errorf("sample: vocab %d row %d: top %d id %d, reference %d", vocab, r, c, got.TopIDs[r*topN+c], ids[c])
					}
				}
				topLp, wantTop = append(topLp, got.TopLogp[r*topN:(r+1)*topN]...), append(wantTop, lps...)
			}
			near(t, "sample logp", lp, wantLp, 1e-5, 1e-5)
			near(t, "sample top logp", topLp, wantTop, 1e-5, 1e-5)
		}
	}
	s.sampleDistribution(t, sm)
	panics(t, "sample with a missing parameter row", func() { sm.Sample(s.up(s.randn(6), 2, 3), make([]kernels.Sampling, 1), 0) })
	panics(t, "sample top 4 of 3", func() { sm.Sample(s.up(s.randn(6), 2, 3), make([]kernels.Sampling, 2), 4) })
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
// the plain way (a full stable sort for the candidates).
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
	greedy := p.Temperature <= 0
	wholeRow := !greedy && topK <= 0 && p.TopP >= 1
	k := kernels.MaxSampleCandidates
	if topK > 0 {
		k = topK
	}
	k = min(max(k, topN), kernels.MaxSampleCandidates, vocab)
	e := func(v float32) float64 { return math.Exp((float64(v) - m) / float64(p.Temperature)) }
	u01 := kernels.SampleUniform(p.Seed, row)
	chosen := order[0]
	switch {
	case greedy:
	case wholeRow:
		var total float64
		for _, v := range x {
			total += e(v)
		}
		u, cum := u01*total, 0.0
		chosen = vocab - 1
		for j, v := range x {
			cum += e(v)
			if u < cum {
				chosen = j
				break
			}
		}
	default:
		keptK := k
		if topK > 0 && topK < k {
			keptK = topK
		}
		var total float64
		if topK > 0 {
			for c := 0; c < keptK; c++ {
				total += e(x[order[c]])
			}
		} else {
			for _, v := range x {
				total += e(v)
			}
		}
		kept := keptK
		if p.TopP < 1 {
			var cum float64
			for c := 0; c < keptK; c++ {
				cum += e(x[order[c]]) / total
				if cum >= float64(p.TopP) {
					kept = c + 1
					break
				}
			}
		}
		var mass float64
		for c := 0; c < kept; c++ {
			mass += e(x[order[c]])
		}
		u, cum := u01*mass, 0.0
		chosen = order[kept-1]
		for c := 0; c < kept; c++ {
			cum += e(x[order[c]])
			if u < cum {
				chosen = order[c]
				break
			}
		}
	}
	for c := 0; c < topN; c++ {
		ids = append(ids, int32(order[c]))
		lps = append(lps, float64(x[order[c]])-lse)
	}
	return int32(chosen), float64(x[chosen]) - lse, ids, lps
}
