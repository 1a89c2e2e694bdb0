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
// log-probabilities; greedy, or a draw over the whole row when top-k and
// top-p are off, else over the best min(max(top_k, topN), 256) logits
// (top-k keeps the first top_k, top-p cuts them against their mass, or the
// whole row's when top-k is off); the draw is kernels.SampleUniform(seed,
// row) times the kept mass, walked in order. Rows run in parallel.
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
	vocab, lse := len(x), logSumExp(x)
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
	if wholeRow || greedy {
		k = max(topN, 1)
	}
	cand := topCandidates(x, k)
	m := float64(x[cand[0]]) // the row's largest logit
	e := func(v float32) float64 { return math.Exp((float64(v) - m) / float64(p.Temperature)) }
	u01 := kernels.SampleUniform(p.Seed, row)
	chosen := cand[0]
	switch {
	case greedy:
	case wholeRow:
		var total float64
		for _, v := range x {
			total += e(v)
		}
		u, cum := u01*total, 0.0
		chosen = int32(vocab - 1)
		for j, v := range x {
			if cum += e(v); u < cum {
				chosen = int32(j)
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
			for _, c := range cand[:keptK] {
				total += e(x[c])
			}
		} else {
			for _, v := range x {
				total += e(v)
			}
		}
		kept := keptK
		if p.TopP < 1 {
			var cum float64
			for i, c := range cand[:keptK] {
				if cum += e(x[c]) / total; cum >= float64(p.TopP) {
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
		chosen = cand[kept-1]
		for _, c := range cand[:kept] {
			if cum += e(x[c]); u < cum {
				chosen = c
				break
			}
		}
	}
	out.Tokens[row] = chosen
	out.Logp[row] = float32(float64(x[chosen]) - lse)
	for c := 0; c < topN; c++ {
		out.TopIDs[row*topN+c] = cand[c]
		out.TopLogp[row*topN+c] = float32(float64(x[cand[c]]) - lse)
	}
}

// topCandidates returns the ids of the k largest logits, largest first,
// ties by the smaller id: one pass with a min-heap of k.
func topCandidates(x []float32, k int) []int32 {
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
