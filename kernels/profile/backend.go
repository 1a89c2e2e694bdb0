package profile

import "github.com/hone-rl/hone/kernels"

// Wrap returns a backend that runs every operation on be and times it by
// class into the returned Recorder. The wrapper is a kernels.Sampler when
// be is one. Tensors, indexes and RoPE tables are be's own: the wrapper and
// be may be used side by side (only the wrapper's calls are timed).
func Wrap(be kernels.Backend) (kernels.Backend, *Recorder) {
	r := newRecorder(be)
	b := &Backend{be: be, r: r}
	if s, ok := be.(kernels.Sampler); ok {
		return &sampling{Backend: b, s: s}, r
	}
	return b, r
}

// Unwrap returns the backend a Wrap result runs on (be itself when it is
// not a wrapper).
func Unwrap(be kernels.Backend) kernels.Backend {
	switch w := be.(type) {
	case *Backend:
		return w.be
	case *sampling:
		return w.be
	}
	return be
}

// Backend is the timing decorator (Wrap).
type Backend struct {
	be kernels.Backend
	r  *Recorder
}

// sampling is a Backend over a kernels.Sampler.
type sampling struct {
	*Backend
	s kernels.Sampler
}

// Sample times the device-side draw as LM head work.
func (b *sampling) Sample(logits kernels.Tensor, params []kernels.Sampling, topN int) kernels.SampleOut {
	s := b.r.begin(LMHead)
	defer b.r.end(s)
	return b.s.Sample(logits, params, topN)
}

// Name is the wrapped backend's name (the model and trainer choose by it).
func (b *Backend) Name() string { return b.be.Name() }

// Err is the wrapped backend's.
func (b *Backend) Err() error { return b.be.Err() }

// ClearErr is the wrapped backend's.
func (b *Backend) ClearErr() { b.be.ClearErr() }

// New allocates (memory).
func (b *Backend) New(shape ...int) kernels.Tensor {
	s := b.r.begin(Memory)
	defer b.r.end(s)
	return b.be.New(shape...)
}

// NewT allocates (memory).
func (b *Backend) NewT(dt kernels.DType, shape ...int) kernels.Tensor {
	s := b.r.begin(Memory)
	defer b.r.end(s)
	return b.be.NewT(dt, shape...)
}

// Empty allocates (memory).
func (b *Backend) Empty(dt kernels.DType, shape ...int) kernels.Tensor {
	s := b.r.begin(Memory)
	defer b.r.end(s)
	return b.be.Empty(dt, shape...)
}

// Upload copies to the device (memory).
func (b *Backend) Upload(data []float32, shape ...int) kernels.Tensor {
	s := b.r.begin(Memory)
	defer b.r.end(s)
	return b.be.Upload(data, shape...)
}

// UploadT copies to the device (memory).
func (b *Backend) UploadT(dt kernels.DType, data []float32, shape ...int) kernels.Tensor {
	s := b.r.begin(Memory)
	defer b.r.end(s)
	return b.be.UploadT(dt, data, shape...)
}

// Download copies to the host (memory).
func (b *Backend) Download(dst []float32, t kernels.Tensor) {
	s := b.r.begin(Memory)
	defer b.r.end(s)
	b.be.Download(dst, t)
}

// View is not timed (no device work).
func (b *Backend) View(t kernels.Tensor, offset int, shape ...int) kernels.Tensor {
	return b.be.View(t, offset, shape...)
}

// Free is not timed (the allocator's cache; no device work).
func (b *Backend) Free(t kernels.Tensor) { b.be.Free(t) }

// Copy (other).
func (b *Backend) Copy(dst, src kernels.Tensor) {
	s := b.r.begin(Other)
	defer b.r.end(s)
	b.be.Copy(dst, src)
}

// Fill (other).
func (b *Backend) Fill(t kernels.Tensor, v float32) {
	s := b.r.begin(Other)
	defer b.r.end(s)
	b.be.Fill(t, v)
}

// Convert (other: autocast's rounding to bf16).
func (b *Backend) Convert(dst, src kernels.Tensor) {
	s := b.r.begin(Other)
	defer b.r.end(s)
	b.be.Convert(dst, src)
}

// UploadIndex (memory).
func (b *Backend) UploadIndex(ids []int32) kernels.Index {
	s := b.r.begin(Memory)
	defer b.r.end(s)
	return b.be.UploadIndex(ids)
}

// FreeIndex is not timed.
func (b *Backend) FreeIndex(ix kernels.Index) { b.be.FreeIndex(ix) }

// NewRoPETable (memory: built once per model).
func (b *Backend) NewRoPETable(freqs []float32, maxPos int) kernels.RoPETable {
	s := b.r.begin(Memory)
	defer b.r.end(s)
	return b.be.NewRoPETable(freqs, maxPos)
}

// FreeRoPETable is not timed.
func (b *Backend) FreeRoPETable(rt kernels.RoPETable) { b.be.FreeRoPETable(rt) }

// MatMul (GEMM).
func (b *Backend) MatMul(c, a, bb kernels.Tensor, transA, transB bool, alpha, beta float32) {
	s := b.r.begin(GEMM)
	defer b.r.end(s)
	b.be.MatMul(c, a, bb, transA, transB, alpha, beta)
}

// Add (other).
func (b *Backend) Add(dst, x, y kernels.Tensor) {
	s := b.r.begin(Other)
	defer b.r.end(s)
	b.be.Add(dst, x, y)
}

// Mul (other).
func (b *Backend) Mul(dst, x, y kernels.Tensor) {
	s := b.r.begin(Other)
	defer b.r.end(s)
	b.be.Mul(dst, x, y)
}

// Scale (other).
func (b *Backend) Scale(dst, x kernels.Tensor, v float32) {
	s := b.r.begin(Other)
	defer b.r.end(s)
	b.be.Scale(dst, x, v)
}

// AXPY (other).
func (b *Backend) AXPY(dst, x kernels.Tensor, v float32) {
	s := b.r.begin(Other)
	defer b.r.end(s)
	b.be.AXPY(dst, x, v)
}

// AddRow (other).
func (b *Backend) AddRow(dst, v kernels.Tensor) {
	s := b.r.begin(Other)
	defer b.r.end(s)
	b.be.AddRow(dst, v)
}

// SumRows (other).
func (b *Backend) SumRows(dst, x kernels.Tensor) {
	s := b.r.begin(Other)
	defer b.r.end(s)
	b.be.SumRows(dst, x)
}

// Sum (other; it synchronises a device).
func (b *Backend) Sum(x kernels.Tensor) float64 {
	s := b.r.begin(Other)
	defer b.r.end(s)
	return b.be.Sum(x)
}

// SumSquares (other; it synchronises a device).
func (b *Backend) SumSquares(x kernels.Tensor) float64 {
	s := b.r.begin(Other)
	defer b.r.end(s)
	return b.be.SumSquares(x)
}

// SumInto (other).
func (b *Backend) SumInto(dst kernels.Tensor, i int, x kernels.Tensor) {
	s := b.r.begin(Other)
	defer b.r.end(s)
	b.be.SumInto(dst, i, x)
}

// SumSquaresInto (optimizer: the global gradient norm).
func (b *Backend) SumSquaresInto(dst kernels.Tensor, i int, x kernels.Tensor) {
	s := b.r.begin(Optimizer)
	defer b.r.end(s)
	b.be.SumSquaresInto(dst, i, x)
}

// RMSNorm (norms).
func (b *Backend) RMSNorm(out, x, w kernels.Tensor, eps float32) {
	s := b.r.begin(Norm)
	defer b.r.end(s)
	b.be.RMSNorm(out, x, w, eps)
}

// RMSNormBackward (norms).
func (b *Backend) RMSNormBackward(dx, dw, dy, x, w kernels.Tensor, eps float32) {
	s := b.r.begin(Norm)
	defer b.r.end(s)
	b.be.RMSNormBackward(dx, dw, dy, x, w, eps)
}

// RoPE (other).
func (b *Backend) RoPE(x kernels.Tensor, pos kernels.Index, rt kernels.RoPETable, inverse bool) {
	s := b.r.begin(Other)
	defer b.r.end(s)
	b.be.RoPE(x, pos, rt, inverse)
}

// Attention (attention fwd).
func (b *Backend) Attention(out, q, k, v kernels.Tensor, a kernels.Attn) {
	s := b.r.begin(AttentionFwd)
	defer b.r.end(s)
	b.be.Attention(out, q, k, v, a)
}

// AttentionBackward (attention bwd).
func (b *Backend) AttentionBackward(dq, dk, dv, dout, q, k, v kernels.Tensor, a kernels.Attn) {
	s := b.r.begin(AttentionBwd)
	defer b.r.end(s)
	b.be.AttentionBackward(dq, dk, dv, dout, q, k, v, a)
}

// SiLU (other).
func (b *Backend) SiLU(out, x kernels.Tensor) {
	s := b.r.begin(Other)
	defer b.r.end(s)
	b.be.SiLU(out, x)
}

// SwiGLU (other).
func (b *Backend) SwiGLU(out, gate, up kernels.Tensor) {
	s := b.r.begin(Other)
	defer b.r.end(s)
	b.be.SwiGLU(out, gate, up)
}

// SwiGLUBackward (other).
func (b *Backend) SwiGLUBackward(dgate, dup, dout, gate, up kernels.Tensor) {
	s := b.r.begin(Other)
	defer b.r.end(s)
	b.be.SwiGLUBackward(dgate, dup, dout, gate, up)
}

// Embedding (other).
func (b *Backend) Embedding(out, table kernels.Tensor, ids kernels.Index) {
	s := b.r.begin(Other)
	defer b.r.end(s)
	b.be.Embedding(out, table, ids)
}

// EmbeddingBackward (other).
func (b *Backend) EmbeddingBackward(dtable, dout kernels.Tensor, ids kernels.Index) {
	s := b.r.begin(Other)
	defer b.r.end(s)
	b.be.EmbeddingBackward(dtable, dout, ids)
}

// LogProbs (LM head + logprob).
func (b *Backend) LogProbs(logp, logits kernels.Tensor, targets kernels.Index) {
	s := b.r.begin(LMHead)
	defer b.r.end(s)
	b.be.LogProbs(logp, logits, targets)
}

// LogProbsBackward (LM head + logprob).
func (b *Backend) LogProbsBackward(dlogits, logits kernels.Tensor, targets kernels.Index, dlogp kernels.Tensor) {
	s := b.r.begin(LMHead)
	defer b.r.end(s)
	b.be.LogProbsBackward(dlogits, logits, targets, dlogp)
}

// CrossEntropy (LM head + logprob).
func (b *Backend) CrossEntropy(loss, logits kernels.Tensor, targets kernels.Index) {
	s := b.r.begin(LMHead)
	defer b.r.end(s)
	b.be.CrossEntropy(loss, logits, targets)
}

// TokenLogProbs (LM head + logprob: the chunked LM head GEMMs included).
func (b *Backend) TokenLogProbs(logp, lse, h, w kernels.Tensor, targets kernels.Index) {
	s := b.r.begin(LMHead)
	defer b.r.end(s)
	b.be.TokenLogProbs(logp, lse, h, w, targets)
}

// TokenLogProbsBackward (LM head + logprob).
func (b *Backend) TokenLogProbsBackward(dh, dw, h, w, lse kernels.Tensor, targets kernels.Index, dlogp kernels.Tensor) {
	s := b.r.begin(LMHead)
	defer b.r.end(s)
	b.be.TokenLogProbsBackward(dh, dw, h, w, lse, targets, dlogp)
}

// AdamWStep (optimizer).
func (b *Backend) AdamWStep(param, grad, m, v kernels.Tensor, o kernels.AdamW) {
	s := b.r.begin(Optimizer)
	defer b.r.end(s)
	b.be.AdamWStep(param, grad, m, v, o)
}

var (
	_ kernels.Backend = (*Backend)(nil)
	_ kernels.Sampler = (*sampling)(nil)
)
