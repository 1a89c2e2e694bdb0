//go:build cgo && !cuda

package cuda

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

func splitmix64(x uint64) uint64 {
	x += 0x9E3779B97F4A7C15
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9
	x = (x ^ (x >> 27)) * 0x94D049BB133111EB
	return x ^ (x >> 31)
}

// refSample is sample.cu's algorithm in float64 (same candidates, same
// top-k/top-p rules, same counter-based draw).
func refSample(x []float32, p Sampling, row, topN int) (tok int32, logp float64, ids []int32, lps []float64) {
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
	k := 256
	if topK > 0 {
		k = topK
	}
	k = max(k, topN)
	k = min(k, 256, vocab)
	e := func(v float32) float64 { return math.Exp((float64(v) - m) / float64(p.Temperature)) }
	u01 := float64(splitmix64(p.Seed^splitmix64(uint64(row)))>>40) / (1 << 24)
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

// TestSampleMatchesReference: greedy, whole-row, top-k, top-p and both,
// with and without top-N log-probabilities, every row's token equal to the
// float64 reference's for the same seed, log-probabilities within 1e-5,
// under both of the shim's schedules.
func TestSampleMatchesReference(t *testing.T) {
	for _, sched := range Schedules() {
		t.Run(sched, func(t *testing.T) { sampleMatchesReference(t, sched) })
	}
}

func sampleMatchesReference(t *testing.T, sched string) {
	be, err := NewEmulated(VariantReadable) // one kernel for both variants
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	if err := be.SetSchedule(sched); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	// A vocabulary under a warp, one of a partial block, and one of four
	// slices per thread for the whole-row draw.
	for _, c := range []struct{ vocab, rows int }{{7, 60}, {100, 60}, {1000, 12}} {
		vocab, rows := c.vocab, c.rows
		x := make([]float32, rows*vocab)
		for i := range x {
			x[i] = float32(3 * rng.NormFloat64())
		}
		x[5] = x[6] // a tie: the smaller index comes first
		params := make([]Sampling, rows)
		for r := range params {
			params[r] = Sampling{Temperature: []float32{0, 0.6, 1, 1.3}[r%4], TopP: []float32{1, 0.9, 0.5}[r%3],
				TopK: []int32{0, 1, 5, 40, 5000}[r%5], Seed: rng.Uint64()}
		}
		for _, topN := range []int{0, min(5, vocab)} {
			lt := be.Upload(x, rows, vocab)
			got := be.Sample(lt, params, topN)
			be.Free(lt)
			for r := 0; r < rows; r++ {
				tok, lp, ids, lps := refSample(x[r*vocab:(r+1)*vocab], params[r], r, topN)
				if got.Tokens[r] != tok {
					t.Errorf("vocab %d top %d row %d %+v: token %d, reference %d", vocab, topN, r, params[r], got.Tokens[r], tok)
				}
				if math.Abs(float64(got.Logp[r])-lp) > 1e-5*(1+math.Abs(lp)) {
					t.Errorf("vocab %d row %d: logp %g, reference %g", vocab, r, got.Logp[r], lp)
				}
				for c := 0; c < topN; c++ {
					if got.TopIDs[r*topN+c] != ids[c] || math.Abs(float64(got.TopLogp[r*topN+c])-lps[c]) > 1e-5*(1+math.Abs(lps[c])) {
						t.Errorf("vocab %d row %d top %d: (%d, %g), reference (%d, %g)", vocab, r, c, got.TopIDs[r*topN+c], got.TopLogp[r*topN+c], ids[c], lps[c])
					}
				}
			}
		}
	}
}

// TestSampleDistribution: over many seeds, a row's tokens follow the
// temperature-scaled softmax restricted by top-k (a chi-square test), so
// the draw is a draw and not only equal to a reference.
func TestSampleDistribution(t *testing.T) {
	be, err := NewEmulated(VariantFast)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	x := []float32{2, 1.5, 1, 0.5, 0, -0.5, -1, -3}
	const rows = 3000
	logits := make([]float32, 0, rows*len(x))
	params := make([]Sampling, rows)
	for r := range params {
		logits = append(logits, x...)
		params[r] = Sampling{Temperature: 0.8, TopP: 1, TopK: 5, Seed: uint64(r) * 7919}
	}
	lt := be.Upload(logits, rows, len(x))
	got := be.Sample(lt, params, 0)
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
				t.Fatalf("token %d outside the top 5 drawn %g times", i, c)
			}
			continue
		}
		want := rows * math.Exp(float64(x[i])/0.8) / z
		chi2 += (c - want) * (c - want) / want
	}
	// 4 degrees of freedom: P(chi2 > 18.5) < 0.001.
	if chi2 > 18.5 {
		t.Fatalf("chi-square %.1f over counts %v", chi2, counts)
	}
}
