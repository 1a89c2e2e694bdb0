package cpu

import (
	"fmt"
	"math"

	"github.com/hone-rl/hone/kernels"
)

// logSumExp returns log(sum(exp(x))) in float64.
func logSumExp(x []float32) float64 {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = math.Max(mx, float64(v))
	}
	var s float64
	for _, v := range x {
		s += math.Exp(float64(v) - mx)
	}
	return mx + math.Log(s)
}

func checkIDs(op string, ids kernels.Index, vocab int) {
	if err := kernels.CheckIDs(ids, vocab); err != nil {
		must(fmt.Errorf("%s: %w", op, err))
	}
}

func checkTargets(op string, targets kernels.Index, t, vocab int) []int32 {
	if err := kernels.CheckTargets(targets, t, vocab); err != nil {
		must(fmt.Errorf("%s: %w", op, err))
	}
	return ints(targets)
}

// LogProbs implements kernels.Backend.
func (be *Backend) LogProbs(logp, logits kernels.Tensor, ix kernels.Index) {
	lp, lg := data(logp), data(logits)
	n, vocab := kernels.Rows(logits)
	mustLen("logprobs out", len(lp), n)
	targets := checkTargets("logprobs", ix, n, vocab)
	be.parallel(n, 30*vocab, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			row := lg[t*vocab : (t+1)*vocab]
			lp[t] = float32(float64(row[targets[t]]) - logSumExp(row))
		}
	})
}

// CrossEntropy implements kernels.Backend.
func (be *Backend) CrossEntropy(loss, logits kernels.Tensor, ix kernels.Index) {
	be.LogProbs(loss, logits, ix)
	l := data(loss)
	for i := range l {
		l[i] = -l[i]
	}
}

// LogProbsBackward implements kernels.Backend.
func (be *Backend) LogProbsBackward(dlogits, logits kernels.Tensor, ix kernels.Index, dlogp kernels.Tensor) {
	dl, lg, dp := data(dlogits), data(logits), data(dlogp)
	n, vocab := kernels.Rows(logits)
	mustLen("logprobs backward dlogits", len(dl), len(lg))
	mustLen("logprobs backward dlogp", len(dp), n)
	targets := checkTargets("logprobs backward", ix, n, vocab)
	be.parallel(n, 30*vocab, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			row, drow := lg[t*vocab:(t+1)*vocab], dl[t*vocab:(t+1)*vocab]
			softmaxGrad(drow, row, logSumExp(row), targets[t], dp[t])
		}
	})
}

// softmaxGrad sets d = g * (onehot(target) - exp(x - lse)); target may be
// outside d (a vocabulary chunk), then only the softmax term applies.
func softmaxGrad(d, x []float32, lse float64, target int32, g float32) {
	for j, v := range x {
		d[j] = -g * float32(math.Exp(float64(v)-lse))
	}
	if target >= 0 && int(target) < len(d) {
		d[target] += g
	}
}

// vocabChunk picks how many vocabulary rows to score at once for t tokens
// (about 1 MiB of logits).
func vocabChunk(t, vocab int) int {
	c := max(256, (1<<18)/max(t, 1))
	return min(c, vocab)
}

// headInput returns the LM head's h as float32 (a bf16 h widened, exactly)
// after checking its operands: a bf16 h (autocast) needs a bf16 w.
func headInput(op string, h, w kernels.Tensor) []float32 {
	t, hid := kernels.Rows(h)
	if _, wh := kernels.Rows(w); wh != hid {
		panic(fmt.Sprintf("kernels/cpu: %s h %v w %v", op, h.Shape(), w.Shape()))
	}
	if h.DType() == kernels.BF16 && w.DType() != kernels.BF16 {
		panic(fmt.Sprintf("kernels/cpu: %s: a bf16 h needs a bf16 w", op))
	}
	var buf []float32
	return rowsOf(h, 0, t, hid, &buf)
}

// TokenLogProbs implements kernels.Backend with an online log-sum-exp over
// vocabulary chunks.
func (be *Backend) TokenLogProbs(logp, lse, h, w kernels.Tensor, ix kernels.Index) {
	lp, ls, hd := data(logp), data(lse), headInput("token logprobs", h, w)
	var wbuf []float32 // a bf16 w's chunk, widened
	t, hid := kernels.Rows(h)
	vocab, _ := kernels.Rows(w)
	mustLen("token logprobs out", len(lp), t)
	mustLen("token logprobs lse", len(ls), t)
	targets := checkTargets("token logprobs", ix, t, vocab)
	cv := vocabChunk(t, vocab)
	scratch := make([]float32, t*cv)
	mx := make([]float64, t)
	sum := make([]float64, t)
	for i := range mx {
		mx[i] = math.Inf(-1)
	}
	for v0 := 0; v0 < vocab; v0 += cv {
		nv := min(cv, vocab-v0)
		chunk := scratch[:t*nv]
		be.gemmFast(gemm{m: t, n: nv, k: hid, a: hd, b: rowsOf(w, v0, nv, hid, &wbuf), c: chunk, transB: true, alpha: 1})
		for i := 0; i < t; i++ {
			row := chunk[i*nv : (i+1)*nv]
			m := mx[i]
			for _, v := range row {
				m = math.Max(m, float64(v))
			}
			s := sum[i] * math.Exp(mx[i]-m)
			for _, v := range row {
				s += math.Exp(float64(v) - m)
			}
			mx[i], sum[i] = m, s
			if tg := int(targets[i]) - v0; tg >= 0 && tg < nv {
				lp[i] = row[tg]
			}
		}
	}
	for i := range lp {
		l := mx[i] + math.Log(sum[i])
		ls[i] = float32(l)
		lp[i] = float32(float64(lp[i]) - l)
	}
}

// TokenLogProbsBackward implements kernels.Backend: per vocabulary chunk,
// G = dlogp*(onehot - softmax), dh += G*W_chunk and dW_chunk += G^T*h,
// with G rounded to bf16 when h is bf16 (autocast).
func (be *Backend) TokenLogProbsBackward(dh, dw, h, w, lse kernels.Tensor, ix kernels.Index, dlogp kernels.Tensor) {
	dhd, hd, ls, dp := data(dh), headInput("token logprobs backward", h, w), data(lse), data(dlogp)
	roundG := h.DType() == kernels.BF16
	var wbuf []float32 // a bf16 w's chunk, widened
	t, hid := kernels.Rows(h)
	vocab, _ := kernels.Rows(w)
	mustLen("token logprobs backward dh", len(dhd), len(hd))
	mustLen("token logprobs backward dlogp", len(dp), t)
	targets := checkTargets("token logprobs backward", ix, t, vocab)
	var dwd []float32
	if dw != nil {
		dwd = data(dw)
		mustLen("token logprobs backward dw", len(dwd), w.Len())
	}
	clear(dhd)
	cv := vocabChunk(t, vocab)
	scratch := make([]float32, t*cv)
	for v0 := 0; v0 < vocab; v0 += cv {
		nv := min(cv, vocab-v0)
		chunk, wc := scratch[:t*nv], rowsOf(w, v0, nv, hid, &wbuf)
		be.gemmFast(gemm{m: t, n: nv, k: hid, a: hd, b: wc, c: chunk, transB: true, alpha: 1})
		for i := 0; i < t; i++ {
			row := chunk[i*nv : (i+1)*nv]
			softmaxGrad(row, row, float64(ls[i]), targets[i]-int32(v0), dp[i])
		}
		if roundG {
			for i, v := range chunk {
				chunk[i] = kernels.FromBF16(kernels.ToBF16(v))
			}
		}
		be.gemmFast(gemm{m: t, n: hid, k: nv, a: chunk, b: wc, c: dhd, alpha: 1, beta: 1})
		if dwd != nil {
			be.gemmFast(gemm{m: nv, n: hid, k: t, a: chunk, b: hd, c: dwd[v0*hid : (v0+nv)*hid], transA: true, alpha: 1, beta: 1})
		}
	}
}
