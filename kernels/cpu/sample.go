package cpu

import (
	"container/heap"
	"fmt"
	"math"

	"github.com/hone-rl/hone/kernels"
)

var _ kernels.Sampler = (*Backend)(nil)

// Sample implements kernels.Sampler with kernels/cuda's algorithm
// (csrc/sample.cu) in float64 sums: the raw log-sum-exp for the returned
// log-probabilities; greedy; with top-k on, a draw over the best top_k
// logits in order, top-p cutting them against their mass; with top-k off, a
// draw by id over the shortest prefix of the row's order holding top_p of
// its mass (a threshold found by radix select; the whole row when top_p >=
// 1). The draw is kernels.SampleUniform(seed, row) times the kept mass,
// walked in that order. Rows run in parallel.
func (b *Backend) Sample(logits kernels.Tensor, params []kernels.Sampling, topN int) kernels.SampleOut {
	rows, vocab := kernels.Rows(logits)
	if len(params) != rows || topN < 0 || topN > kernels.MaxSampleCandidates || topN > vocab {
		panic(fmt.Sprintf("kernels/cpu: sample %v with %d parameter rows, top %d", logits.Shape(), len(params), topN))
	}
	x := data(logits)
	out := kernels.SampleOut{Tokens: make([]int32, rows), Logp: make([]float32, rows),
		TopIDs: make([]int32, rows*topN), TopLogp: make([]float32, rows*topN)}
	b.parallel(rows, vocab*8, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			sampleRow(x[r*vocab:(r+1)*vocab], params[r], r, topN, &out)
		}
	})
	return out
}

func sampleRow(x []float32, p kernels.Sampling, row, topN int, out *kernels.SampleOut) {
	greedy := p.Temperature <= 0
	topK := 0
	if !greedy && p.TopK > 0 && int(p.TopK) < len(x) {
		topK = min(int(p.TopK), kernels.MaxSampleCandidates)
	}
	k := max(topN, topK)
	if greedy {
		k = max(k, 1)
	}
	cand := topCandidates(x, k)
	m := math.Inf(-1) // the row's largest logit
	for _, v := range x {
		m = math.Max(m, float64(v))
	}
	e := func(v float32) float64 { return math.Exp((float64(v) - m) / float64(p.Temperature)) }
	u01 := kernels.SampleUniform(p.Seed, row)
	var chosen int32
	switch {
	case greedy:
		chosen = cand[0]
	case topK > 0:
		chosen = drawCandidates(x, cand[:topK], e, p.TopP, u01)
	default:
		chosen = drawRow(x, e, p.TopP, u01)
	}
	lse := logSumExp(x)
	out.Tokens[row] = chosen
	out.Logp[row] = float32(float64(x[chosen]) - lse)
	for c := 0; c < topN; c++ {
		out.TopIDs[row*topN+c] = cand[c]
		out.TopLogp[row*topN+c] = float32(float64(x[cand[c]]) - lse)
	}
}

// drawCandidates draws among cand (in order) by mass e, top-p keeping the
// shortest prefix that holds topP of their mass.
func drawCandidates(x []float32, cand []int32, e func(float32) float64, topP float32, u01 float64) int32 {
	var total float64
	for _, c := range cand {
		total += e(x[c])
	}
	kept := len(cand)
	if topP < 1 {
		var cum float64
		for i, c := range cand {
			if cum += e(x[c]) / total; cum >= float64(topP) {
				kept = i + 1
				break
			}
		}
	}
	var mass float64
	for _, c := range cand[:kept] {
		mass += e(x[c])
	}
	u, cum := u01*mass, 0.0
	for _, c := range cand[:kept] {
		if cum += e(x[c]); u < cum {
			return c
		}
	}
	return cand[kept-1]
}

// drawRow draws by id among the tokens of the shortest prefix of x's order
// that holds topP of the mass e (every token when topP >= 1); past the
// kept mass (rounding) it takes the last kept token.
func drawRow(x []float32, e func(float32) float64, topP float32, u01 float64) int32 {
	key, ties := uint32(0), len(x) // every token
	if topP < 1 {
		key, ties = topPThreshold(x, e, topP)
	}
	// walk calls f on the kept tokens by id, with their masses, while it
	// returns true: those above key, and the first ties at it.
	walk := func(f func(j int, mass float64) bool) {
		left := ties
		for j, v := range x {
			k := orderKey(v)
			if k < key || k == key && left == 0 {
				continue
			}
			if k == key {
				left--
			}
			if !f(j, e(v)) {
				return
			}
		}
	}
	var kept float64
	walk(func(_ int, mass float64) bool { kept += mass; return true })
	u, cum, chosen := u01*kept, 0.0, int32(0) // token 0 if nothing is kept (NaN logits only)
	walk(func(j int, mass float64) bool {
		chosen, cum = int32(j), cum+mass
		return u >= cum
	})
	return chosen
}

// topPThreshold returns the shortest prefix of x's order holding topP of
// the mass e: the largest key whose mass at and above reaches it (a radix
// select, 8 bits of the key per pass), and how many of the tokens tied at
// that key complete the prefix.
func topPThreshold(x []float32, e func(float32) float64, topP float32) (key uint32, ties int) {
	mass := make([]float64, len(x))
	var total float64
	for j, v := range x {
		mass[j] = e(v)
		total += mass[j]
	}
	// A top_p of 0 or below keeps the first token: a prefix holds one.
	target := float64(topP) * total
	if !(target > tinyMass) {
		target = tinyMass
	}
	var above float64
	for shift := 24; shift >= 0; shift -= 8 {
		var hist [256]float64
		found := ^uint32(0) << (shift + 8) // the bits found so far
		for j, v := range x {
			if k := orderKey(v); k&found == key {
				hist[k>>shift&255] += mass[j]
			}
		}
		b := 255
		for ; b > 0 && above+hist[b] < target; b-- {
			above += hist[b]
		}
		key |= uint32(b) << shift
	}
	n := math.Ceil((target - above) / e(keyValue(key)))
	if !(n >= 1) {
		return key, 1
	}
	return key, int(min(n, float64(len(x))))
}

// tinyMass is the least top-p target: every kept set holds a token.
const tinyMass = 1e-300

// orderKey maps a logit to a uint32 whose unsigned order is the float
// order (-0 as +0, which compare equal).
func orderKey(v float32) uint32 {
	if v == 0 {
		v = 0
	}
	b := math.Float32bits(v)
	if b>>31 != 0 {
		return ^b
	}
	return b | 1<<31
}

// keyValue is orderKey's inverse.
func keyValue(k uint32) float32 {
	if k>>31 != 0 {
		return math.Float32frombits(k &^ (1 << 31))
	}
	return math.Float32frombits(^k)
}

// topCandidates returns the ids of the k largest logits, largest first,
// ties by the smaller id: one pass with a min-heap of k.
func topCandidates(x []float32, k int) []int32 {
	if k == 0 {
		return nil
	}
	h := &candHeap{x: x, ids: make([]int32, 0, k)}
	for j := range x {
		id := int32(j)
		switch {
		case len(h.ids) < k:
			heap.Push(h, id)
		case h.before(id, h.ids[0]):
			h.ids[0] = id
			heap.Fix(h, 0)
		}
	}
	out := make([]int32, len(h.ids))
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(h).(int32)
	}
	return out
}

// candHeap is a min-heap of ids by candidate order: its root is the worst
// kept candidate.
type candHeap struct {
	x   []float32
	ids []int32
}

// before reports whether id a comes before id b: a larger logit, or an
// equal one with a smaller id.
func (h *candHeap) before(a, b int32) bool {
	return h.x[a] > h.x[b] || (h.x[a] == h.x[b] && a < b)
}

func (h *candHeap) Len() int           { return len(h.ids) }
func (h *candHeap) Less(i, j int) bool { return h.before(h.ids[j], h.ids[i]) }
func (h *candHeap) Swap(i, j int)      { h.ids[i], h.ids[j] = h.ids[j], h.ids[i] }
func (h *candHeap) Push(v any)         { h.ids = append(h.ids, v.(int32)) }
func (h *candHeap) Pop() any {
	v := h.ids[len(h.ids)-1]
	h.ids = h.ids[:len(h.ids)-1]
	return v
}
