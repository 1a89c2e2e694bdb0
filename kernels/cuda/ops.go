//go:build cgo

package cuda

/*
#include "csrc/hone_cuda.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/hone-rl/hone/kernels"
)

func cbool(v bool) C.int {
	if v {
		return 1
	}
	return 0
}

// gemmPlan is one (strided-batched) row-major GEMM.
type gemmPlan struct {
	batch, m, n, k, strideB int
}

// planMatMul checks MatMul's shapes (see kernels.Backend.MatMul).
func planMatMul(c, a, bm kernels.Tensor, transA, transB bool) gemmPlan {
	d, err := kernels.MatMulShape(c, a, bm, transA, transB)
	must(err)
	batch, m, n, ka, bBatched := d.Batch, d.M, d.N, d.K, d.BBatched
	p := gemmPlan{batch: batch, m: m, n: n, k: ka}
	if bBatched {
		p.strideB = ka * n
	}
	return p
}

// MatMul implements kernels.Backend: one (strided-batched) cuBLAS GEMM.
// With bf16 A and B it is cuBLAS's bf16-input, fp32-accumulate GEMM; with one
// bf16 operand that operand is widened to a float32 copy first (exact, so
// the result is the float32 GEMM of the stored values, as on the CPU; a
// mixed-type GEMM is DESIGN.md's cuBLASLt step).
func (b *Backend) MatMul(c, a, bm kernels.Tensor, transA, transB bool, alpha, beta float32) {
	at, bt := host(a), host(bm)
	switch {
	case at.bf16 && bt.bf16:
		b.matMulBF16(c, at, bt, transA, transB, alpha, beta)
		return
	case at.bf16:
		a = b.widenBF16(at)
		defer b.Free(a)
	case bt.bf16:
		bm = b.widenBF16(bt)
		defer b.Free(bm)
	}
	p := planMatMul(c, a, bm, transA, transB)
	b.call("matmul", func(x *C.hone_ctx) C.int {
		return C.hone_gemm(x, cbool(transA), cbool(transB), C.long(p.m), C.long(p.n), C.long(p.k), C.float(alpha),
			fp(a), C.long(p.m*p.k), fp(bm), C.long(p.strideB), C.float(beta), fp(c), C.long(p.m*p.n), C.long(p.batch))
	})
}

func sameLen3(op string, dst, a, bt kernels.Tensor) {
	mustLen(op, a.Len(), dst.Len())
	mustLen(op, bt.Len(), dst.Len())
}

// Add implements kernels.Backend.
func (b *Backend) Add(dst, x, y kernels.Tensor) {
	sameLen3("add", dst, x, y)
	b.call("add", func(c *C.hone_ctx) C.int { return C.hone_add(c, fp(dst), fp(x), fp(y), C.long(dst.Len())) })
}

// Mul implements kernels.Backend.
func (b *Backend) Mul(dst, x, y kernels.Tensor) {
	sameLen3("mul", dst, x, y)
	b.call("mul", func(c *C.hone_ctx) C.int { return C.hone_mul(c, fp(dst), fp(x), fp(y), C.long(dst.Len())) })
}

// Scale implements kernels.Backend.
func (b *Backend) Scale(dst, x kernels.Tensor, s float32) {
	mustLen("scale", x.Len(), dst.Len())
	b.call("scale", func(c *C.hone_ctx) C.int { return C.hone_scale(c, fp(dst), fp(x), C.float(s), C.long(dst.Len())) })
}

// AXPY implements kernels.Backend.
func (b *Backend) AXPY(dst, x kernels.Tensor, s float32) {
	mustLen("axpy", x.Len(), dst.Len())
	b.call("axpy", func(c *C.hone_ctx) C.int { return C.hone_axpy(c, fp(dst), fp(x), C.float(s), C.long(dst.Len())) })
}

// AddRow implements kernels.Backend.
func (b *Backend) AddRow(dst, v kernels.Tensor) {
	n, w := kernels.Rows(dst)
	mustLen("addrow", v.Len(), w)
	b.call("addrow", func(c *C.hone_ctx) C.int { return C.hone_add_row(c, fp(dst), fp(v), C.long(n), C.long(w)) })
}

// SumRows implements kernels.Backend.
func (b *Backend) SumRows(dst, x kernels.Tensor) {
	n, w := kernels.Rows(x)
	mustLen("sumrows", dst.Len(), w)
	b.call("sumrows", func(c *C.hone_ctx) C.int { return C.hone_sum_rows(c, fp(dst), fp(x), C.long(n), C.long(w)) })
}

func (b *Backend) sum(x kernels.Tensor, squares bool) float64 {
	var out C.double
	b.call("sum", func(c *C.hone_ctx) C.int { return C.hone_sum(c, &out, fp(x), C.long(x.Len()), cbool(squares)) })
	return float64(out)
}

// Sum implements kernels.Backend (a device reduction, then one 8-byte copy).
func (b *Backend) Sum(x kernels.Tensor) float64 { return b.sum(x, false) }

// SumSquares implements kernels.Backend.
func (b *Backend) SumSquares(x kernels.Tensor) float64 { return b.sum(x, true) }

func (b *Backend) sumInto(op string, dst kernels.Tensor, i int, x kernels.Tensor, squares bool) {
	must(kernels.CheckElem(op, i, dst.Len()))
	b.call(op, func(c *C.hone_ctx) C.int {
		d := unsafe.Add(unsafe.Pointer(fp(dst)), 4*i)
		return C.hone_sum_into(c, (*C.float)(d), fp(x), C.long(x.Len()), cbool(squares))
	})
}

// SumInto implements kernels.Backend: a device reduction added to dst[i]
// by a one-thread kernel; no copy to the host.
func (b *Backend) SumInto(dst kernels.Tensor, i int, x kernels.Tensor) {
	b.sumInto("sum into", dst, i, x, false)
}

// SumSquaresInto implements kernels.Backend.
func (b *Backend) SumSquaresInto(dst kernels.Tensor, i int, x kernels.Tensor) {
	b.sumInto("sum squares into", dst, i, x, true)
}

// RMSNorm implements kernels.Backend.
func (b *Backend) RMSNorm(out, x, w kernels.Tensor, eps float32) {
	n, width := kernels.Rows(x)
	mustLen("rmsnorm out", out.Len(), x.Len())
	mustLen("rmsnorm weight", w.Len(), width)
	b.call("rmsnorm", func(c *C.hone_ctx) C.int {
		return C.hone_rmsnorm(c, fp(out), fp(x), fp(w), C.long(n), C.long(width), C.float(eps))
	})
}

// RMSNormBackward implements kernels.Backend.
func (b *Backend) RMSNormBackward(dx, dw, dy, x, w kernels.Tensor, eps float32) {
	n, width := kernels.Rows(x)
	mustLen("rmsnorm backward dx", dx.Len(), x.Len())
	mustLen("rmsnorm backward dy", dy.Len(), x.Len())
	mustLen("rmsnorm backward w", w.Len(), width)
	if dw != nil {
		mustLen("rmsnorm backward dw", dw.Len(), width)
	}
	b.call("rmsnorm backward", func(c *C.hone_ctx) C.int {
		return C.hone_rmsnorm_backward(c, fp(dx), optFP(dw), fp(dy), fp(x), fp(w), C.long(n), C.long(width), C.float(eps))
	})
}

// RoPE implements kernels.Backend.
func (b *Backend) RoPE(x kernels.Tensor, pos kernels.Index, rt kernels.RoPETable, inverse bool) {
	n, width, err := kernels.RoPEShape(x, pos, rt)
	must(err)
	b.call("rope", func(c *C.hone_ctx) C.int {
		return C.hone_rope(c, fp(x), ip(pos), rp(rt), C.long(n), C.long(width), C.long(rt.Half()), cbool(inverse))
	})
}

// checkAttn validates an attention call's shapes and returns the query count.
func checkAttn(out, q, k, v kernels.Tensor, a kernels.Attn) int {
	d, err := kernels.AttentionShape(out, q, k, v, a)
	must(err)
	return d.N
}

// Attention implements kernels.Backend.
func (b *Backend) Attention(out, q, k, v kernels.Tensor, a kernels.Attn) {
	n := checkAttn(out, q, k, v, a)
	if a.BF16 {
		// attention_flash.cu: tensor cores for head dimensions 64 and 128
		// in the fast variant, else the float32 kernels on rounded inputs.
		b.call("attention bf16", func(c *C.hone_ctx) C.int {
			return C.hone_attention_bf16(c, fp(out), optFP(a.LSE), fp(q), fp(k), fp(v), C.long(n), C.int(a.Heads),
				C.int(a.KVHeads), C.int(a.HeadDim), C.long(a.Past), C.float(a.Scale))
		})
		return
	}
	b.call("attention", func(c *C.hone_ctx) C.int {
		return C.hone_attention(c, fp(out), fp(q), fp(k), fp(v), C.long(n), C.int(a.Heads), C.int(a.KVHeads),
			C.int(a.HeadDim), C.long(a.Past), C.float(a.Scale))
	})
}

// AttentionBackward implements kernels.Backend.
func (b *Backend) AttentionBackward(dq, dk, dv, dout, q, k, v kernels.Tensor, a kernels.Attn) {
	n := checkAttn(dout, q, k, v, a)
	mustLen("attention backward dq", dq.Len(), q.Len())
	mustLen("attention backward dk", dk.Len(), k.Len())
	mustLen("attention backward dv", dv.Len(), v.Len())
	if a.BF16 {
		b.call("attention bf16 backward", func(c *C.hone_ctx) C.int {
			return C.hone_attention_bf16_backward(c, fp(dq), fp(dk), fp(dv), fp(dout), fp(q), fp(k), fp(v),
				optFP(a.Out), optFP(a.LSE), C.long(n), C.int(a.Heads), C.int(a.KVHeads), C.int(a.HeadDim),
				C.long(a.Past), C.float(a.Scale))
		})
		return
	}
	b.call("attention backward", func(c *C.hone_ctx) C.int {
		return C.hone_attention_backward(c, fp(dq), fp(dk), fp(dv), fp(dout), fp(q), fp(k), fp(v), C.long(n),
			C.int(a.Heads), C.int(a.KVHeads), C.int(a.HeadDim), C.long(a.Past), C.float(a.Scale))
	})
}

// SiLU implements kernels.Backend.
func (b *Backend) SiLU(out, x kernels.Tensor) {
	mustLen("silu", x.Len(), out.Len())
	b.call("silu", func(c *C.hone_ctx) C.int { return C.hone_silu(c, fp(out), fp(x), C.long(out.Len())) })
}

// SwiGLU implements kernels.Backend.
func (b *Backend) SwiGLU(out, gate, up kernels.Tensor) {
	sameLen3("swiglu", out, gate, up)
	b.call("swiglu", func(c *C.hone_ctx) C.int { return C.hone_swiglu(c, fp(out), fp(gate), fp(up), C.long(out.Len())) })
}

// SwiGLUBackward implements kernels.Backend.
func (b *Backend) SwiGLUBackward(dgate, dup, dout, gate, up kernels.Tensor) {
	sameLen3("swiglu backward", dout, gate, up)
	mustLen("swiglu backward dgate", dgate.Len(), dout.Len())
	mustLen("swiglu backward dup", dup.Len(), dout.Len())
	b.call("swiglu backward", func(c *C.hone_ctx) C.int {
		return C.hone_swiglu_backward(c, fp(dgate), fp(dup), fp(dout), fp(gate), fp(up), C.long(dout.Len()))
	})
}

func checkIDs(op string, ids kernels.Index, vocab int) {
	if err := kernels.CheckIDs(ids, vocab); err != nil {
		must(fmt.Errorf("%s: %w", op, err))
	}
}

// Embedding implements kernels.Backend.
func (b *Backend) Embedding(out, table kernels.Tensor, ids kernels.Index) {
	vocab, width := kernels.Rows(table)
	mustLen("embedding out", out.Len(), ids.Len()*width)
	checkIDs("embedding", ids, vocab)
	b.call("embedding", func(c *C.hone_ctx) C.int {
		if host(table).bf16 {
			return C.hone_embedding_bf16(c, fp(out), bfp(table), ip(ids), C.long(ids.Len()), C.long(width))
		}
		return C.hone_embedding(c, fp(out), fp(table), ip(ids), C.long(ids.Len()), C.long(width))
	})
}

// EmbeddingBackward implements kernels.Backend.
func (b *Backend) EmbeddingBackward(dtable, dout kernels.Tensor, ids kernels.Index) {
	vocab, width := kernels.Rows(dtable)
	mustLen("embedding backward dout", dout.Len(), ids.Len()*width)
	checkIDs("embedding backward", ids, vocab)
	b.call("embedding backward", func(c *C.hone_ctx) C.int {
		return C.hone_embedding_backward(c, fp(dtable), fp(dout), ip(ids), C.long(ids.Len()), C.long(width))
	})
}

func checkTargets(op string, targets kernels.Index, n, vocab int) {
	if err := kernels.CheckTargets(targets, n, vocab); err != nil {
		must(fmt.Errorf("%s: %w", op, err))
	}
}

func (b *Backend) logprobs(op string, out, logits kernels.Tensor, targets kernels.Index, negate bool) {
	n, vocab := kernels.Rows(logits)
	mustLen(op+" out", out.Len(), n)
	checkTargets(op, targets, n, vocab)
	b.call(op, func(c *C.hone_ctx) C.int {
		return C.hone_logprobs(c, fp(out), fp(logits), ip(targets), C.long(n), C.long(vocab), cbool(negate))
	})
}

// LogProbs implements kernels.Backend.
func (b *Backend) LogProbs(logp, logits kernels.Tensor, targets kernels.Index) {
	b.logprobs("logprobs", logp, logits, targets, false)
}

// CrossEntropy implements kernels.Backend.
func (b *Backend) CrossEntropy(loss, logits kernels.Tensor, targets kernels.Index) {
	b.logprobs("cross entropy", loss, logits, targets, true)
}

// LogProbsBackward implements kernels.Backend.
func (b *Backend) LogProbsBackward(dlogits, logits kernels.Tensor, targets kernels.Index, dlogp kernels.Tensor) {
	n, vocab := kernels.Rows(logits)
	mustLen("logprobs backward dlogits", dlogits.Len(), logits.Len())
	mustLen("logprobs backward dlogp", dlogp.Len(), n)
	checkTargets("logprobs backward", targets, n, vocab)
	b.call("logprobs backward", func(c *C.hone_ctx) C.int {
		return C.hone_logprobs_backward(c, fp(dlogits), fp(logits), ip(targets), fp(dlogp), C.long(n), C.long(vocab))
	})
}

func checkToken(op string, h, w kernels.Tensor, targets kernels.Index) (n, hid, vocab int) {
	n, hid = kernels.Rows(h)
	vocab, wh := kernels.Rows(w)
	if wh != hid {
		panic(fmt.Sprintf("kernels/cuda: %s: h %v w %v", op, h.Shape(), w.Shape()))
	}
	if h.DType() == kernels.BF16 && w.DType() != kernels.BF16 {
		panic(fmt.Sprintf("kernels/cuda: %s: a bf16 h needs a bf16 w", op))
	}
	checkTargets(op, targets, n, vocab)
	return n, hid, vocab
}

// TokenLogProbs implements kernels.Backend: logits formed one vocabulary
// chunk at a time by cuBLAS, an online log-sum-exp across the chunks.
func (b *Backend) TokenLogProbs(logp, lse, h, w kernels.Tensor, targets kernels.Index) {
	n, hid, vocab := checkToken("token logprobs", h, w, targets)
	mustLen("token logprobs out", logp.Len(), n)
	mustLen("token logprobs lse", lse.Len(), n)
	b.call("token logprobs", func(c *C.hone_ctx) C.int {
		hp, hbf := anyp(h)
		wp, wbf := anyp(w)
		return C.hone_token_logprobs(c, fp(logp), fp(lse), hp, hbf, wp, wbf, ip(targets), C.long(n), C.long(hid), C.long(vocab))
	})
}

// TokenLogProbsBackward implements kernels.Backend.
func (b *Backend) TokenLogProbsBackward(dh, dw, h, w, lse kernels.Tensor, targets kernels.Index, dlogp kernels.Tensor) {
	n, hid, vocab := checkToken("token logprobs backward", h, w, targets)
	mustLen("token logprobs backward dh", dh.Len(), h.Len())
	mustLen("token logprobs backward lse", lse.Len(), n)
	mustLen("token logprobs backward dlogp", dlogp.Len(), n)
	if dw != nil {
		mustLen("token logprobs backward dw", dw.Len(), w.Len())
	}
	b.call("token logprobs backward", func(c *C.hone_ctx) C.int {
		hp, hbf := anyp(h)
		wp, wbf := anyp(w)
		return C.hone_token_logprobs_backward(c, fp(dh), optFP(dw), hp, hbf, wp, wbf, fp(lse), ip(targets), fp(dlogp),
			C.long(n), C.long(hid), C.long(vocab))
	})
}

// AdamWStep implements kernels.Backend.
func (b *Backend) AdamWStep(param, grad, m, v kernels.Tensor, o kernels.AdamW) {
	for _, l := range []int{grad.Len(), m.Len(), v.Len()} {
		mustLen("adamw", l, param.Len())
	}
	b.call("adamw", func(c *C.hone_ctx) C.int {
		return C.hone_adamw(c, fp(param), fp(grad), fp(m), fp(v), C.long(param.Len()), C.float(o.LR), C.float(o.Beta1),
			C.float(o.Beta2), C.float(o.Eps), C.float(o.WeightDecay), C.int(o.Step))
	})
}
