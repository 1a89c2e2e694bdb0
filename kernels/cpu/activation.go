package cpu

import (
	"math"

	"github.com/hone-rl/hone/kernels"
)

func sigmoid(x float32) float32 { return float32(1 / (1 + math.Exp(-float64(x)))) }

// SiLU implements kernels.Backend.
func (be *Backend) SiLU(out, x kernels.Tensor) {
	o, xs := data(out), data(x)
	mustLen("silu", len(o), len(xs))
	be.parallel(len(o), 20, func(lo, hi int) { be.silu(o[lo:hi], xs[lo:hi]) })
}

// SwiGLU implements kernels.Backend.
func (be *Backend) SwiGLU(out, gate, up kernels.Tensor) {
	o, g, u := data(out), data(gate), data(up)
	mustLen("swiglu gate", len(g), len(o))
	mustLen("swiglu up", len(u), len(o))
	be.parallel(len(o), 20, func(lo, hi int) { be.swiglu(o[lo:hi], g[lo:hi], u[lo:hi]) })
}

// SwiGLUBackward implements kernels.Backend: with s = sigmoid(g),
// dup = dout*g*s and dgate = dout*u*s*(1 + g*(1-s)).
func (be *Backend) SwiGLUBackward(dgate, dup, dout, gate, up kernels.Tensor) {
	dg, du, do, g, u := data(dgate), data(dup), data(dout), data(gate), data(up)
	for _, l := range []int{len(du), len(do), len(g), len(u)} {
		mustLen("swiglu backward", l, len(dg))
	}
	be.parallel(len(dg), 30, func(lo, hi int) {
		be.swigluBackward(dg[lo:hi], du[lo:hi], do[lo:hi], g[lo:hi], u[lo:hi])
	})
}

// Embedding implements kernels.Backend.
func (be *Backend) Embedding(out, table kernels.Tensor, ix kernels.Index) {
	o, tb, ids := data(out), cpuTensor(table), ints(ix)
	vocab, width := kernels.Rows(table)
	mustLen("embedding out", len(o), len(ids)*width)
	checkIDs("embedding", ix, vocab)
	for i, id := range ids {
		if tb.dt == kernels.BF16 {
			widenInto(o[i*width:(i+1)*width], tb.half[int(id)*width:(int(id)+1)*width])
		} else {
			copy(o[i*width:(i+1)*width], tb.data[int(id)*width:(int(id)+1)*width])
		}
	}
}

// EmbeddingBackward implements kernels.Backend.
func (be *Backend) EmbeddingBackward(dtable, dout kernels.Tensor, ix kernels.Index) {
	dt, do, ids := data(dtable), data(dout), ints(ix)
	vocab, width := kernels.Rows(dtable)
	mustLen("embedding backward", len(do), len(ids)*width)
	checkIDs("embedding backward", ix, vocab)
	for i, id := range ids {
		row := dt[int(id)*width : (int(id)+1)*width]
		for j, v := range do[i*width : (i+1)*width] {
			row[j] += v
		}
	}
}

// AdamWStep implements kernels.Backend (decoupled weight decay, bias
// corrected moments, as torch.optim.AdamW).
func (be *Backend) AdamWStep(param, grad, m, v kernels.Tensor, o kernels.AdamW) {
	p, g, ms, vs := data(param), data(grad), data(m), data(v)
	for _, l := range []int{len(g), len(ms), len(vs)} {
		mustLen("adamw", l, len(p))
	}
	bc1 := 1 - math.Pow(float64(o.Beta1), float64(o.Step))
	bc2 := 1 - math.Pow(float64(o.Beta2), float64(o.Step))
	stepSize := float32(float64(o.LR) / bc1)
	sq2 := float32(math.Sqrt(bc2))
	decay := 1 - o.LR*o.WeightDecay
	be.parallel(len(p), 20, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			ms[i] = o.Beta1*ms[i] + (1-o.Beta1)*g[i]
			vs[i] = o.Beta2*vs[i] + (1-o.Beta2)*g[i]*g[i]
			denom := float32(math.Sqrt(float64(vs[i])))/sq2 + o.Eps
			p[i] = p[i]*decay - stepSize*ms[i]/denom
		}
	})
}
