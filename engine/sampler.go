package engine

import (
	"math"
	"math/rand/v2"
	"sort"
)

// samplingParams are one sequence's validated sampling settings.
type samplingParams struct {
	Temperature float64 // below samplingEps = greedy
	TopP        float64 // (0, 1]
	TopK        int     // 0 = all
	MinP        float64 // 0 = off
	TopLogprobs int     // alternatives to report per token
	Logprobs    bool    // report the sampled token's logprob

	// Guide is this sequence's output constraint (constrain.go); nil: none.
	Guide *guideState
}

// samplingEps is vLLM's _SAMPLING_EPS: temperatures below it are greedy.
const samplingEps = 1e-5

// tokenProb is a token id with its (raw, pre-temperature) log-probability.
type tokenProb struct {
	ID      int32
	Logprob float32
}

// sample picks the next token from the processed logits and, when asked,
// reports its log-probability and the top alternatives from the raw logits
// (vLLM's raw_logprobs: before penalties, temperature, min-p, top-k, top-p).
func sample(logits, processed []float32, p samplingParams, rng *rand.Rand) (tok int32, lp float32, top []tokenProb) {
	if p.Guide != nil { // constrained decoding draws among the allowed tokens
		return p.Guide.sample(logits, processed, p, rng)
	}
	if p.Temperature < samplingEps {
		tok = argmax(processed)
	} else {
		tok = sampleFiltered(processed, p, rng)
	}
	if p.Logprobs || p.TopLogprobs > 0 {
		lse := logSumExp(logits)
		lp = logits[tok] - lse
		if p.TopLogprobs > 0 {
			top = topK(logits, p.TopLogprobs)
			for i := range top {
				top[i].Logprob -= lse
			}
		}
	}
	return tok, lp, top
}

func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

func logSumExp(x []float32) float32 {
	m := x[argmax(x)]
	var s float64
	for _, v := range x {
		s += math.Exp(float64(v - m))
	}
	return m + float32(math.Log(s))
}

// topK returns the k largest entries of x (value in Logprob), descending;
// ties keep the lower id first.
func topK(x []float32, k int) []tokenProb {
	if k > len(x) {
		k = len(x)
	}
	out := make([]tokenProb, 0, k+1)
	for i, v := range x {
		if len(out) == k && v <= out[k-1].Logprob {
			continue
		}
		j := len(out)
		if j < k {
			out = append(out, tokenProb{})
		} else {
			j = k - 1
		}
		for j > 0 && out[j-1].Logprob < v {
			out[j] = out[j-1]
			j--
		}
		out[j] = tokenProb{ID: int32(i), Logprob: v}
	}
	return out
}

// sampleFiltered samples from softmax(logits/T) restricted by top-k then
// top-p, as vLLM applies them.
func sampleFiltered(logits []float32, p samplingParams, rng *rand.Rand) int32 {
	var cand []tokenProb
	if p.TopK > 0 && p.TopK < len(logits) {
		cand = topK(logits, p.TopK)
		cand = minPFilter(cand, logits[cand[0].ID], p)
	} else {
		cand = make([]tokenProb, len(logits))
		for i, v := range logits {
			cand[i] = tokenProb{ID: int32(i), Logprob: v}
		}
		cand = minPFilter(cand, logits[argmax(logits)], p)
		if p.TopP < 1 {
			sort.SliceStable(cand, func(a, b int) bool { return cand[a].Logprob > cand[b].Logprob })
		}
	}
	probs := softmaxScaled(cand, p.Temperature)
	if p.TopP < 1 {
		n, cum := 0, 0.0
		for n < len(probs) {
			cum += probs[n]
			n++
			if cum >= p.TopP {
				break
			}
		}
		probs, cand = probs[:n], cand[:n]
	}
	return cand[draw(probs, rng)].ID
}

// minPFilter drops candidates whose probability after temperature is below
// min_p times the most likely token's.
func minPFilter(cand []tokenProb, best float32, p samplingParams) []tokenProb {
	if p.MinP <= 0 {
		return cand
	}
	floor := math.Log(p.MinP) * p.Temperature
	keep := cand[:0]
	for _, c := range cand {
		if float64(c.Logprob-best) >= floor {
			keep = append(keep, c)
		}
	}
	return keep
}

// softmaxScaled returns softmax(v/T) over the candidates.
func softmaxScaled(cand []tokenProb, t float64) []float64 {
	m := cand[0].Logprob
	for _, c := range cand {
		m = max(m, c.Logprob)
	}
	out := make([]float64, len(cand))
	var s float64
	for i, c := range cand {
		out[i] = math.Exp(float64(c.Logprob-m) / t)
		s += out[i]
	}
	for i := range out {
		out[i] /= s
	}
	return out
}

// draw samples an index from unnormalised weights.
func draw(w []float64, rng *rand.Rand) int {
	var s float64
	for _, v := range w {
		s += v
	}
	r := rng.Float64() * s
	for i, v := range w {
		r -= v
		if r < 0 {
			return i
		}
	}
	return len(w) - 1
}
