// Package kernels is hone's compute backend interface: device-resident float32
// tensors and the operations a transformer forward and backward pass needs.
//
// The model never touches a backend's memory directly; it allocates, views,
// uploads and downloads through Backend, so a CUDA backend can replace the CPU
// one. All tensors are dense, row-major float32. Unless an operation says
// otherwise, outputs are overwritten, may not alias inputs, and shapes must
// agree (a mismatch panics: it is a programming error, not bad input).
//
// Conventions:
//   - A "row" tensor [T, N] is viewed with any shape of the same length; an
//     operation that works per row uses the last dimension of the shape.
//   - Token ids, positions and targets are Index values: int32 data uploaded
//     once (UploadIndex) and passed to every operation that reads them, so a
//     device backend copies them to the device once per forward, not once per
//     layer and op. Their range is found on the host at upload, so an
//     operation checks its ids against its table in constant time.
//   - RoPE's cos/sin live in a RoPETable, built once per model.
//   - Backward operations that produce a parameter gradient (dw, dtable,
//     dbias) accumulate into it, so gradients of shared weights sum; input
//     gradients (dx, dq, ...) are overwritten unless documented otherwise.
package kernels

import "fmt"

// DType is a tensor's storage type.
type DType uint8

// Storage types: float32 (the default, and what every operation computes
// in) and bfloat16 (the upper half of a float32, rounded to nearest even),
// which only MatMul's A and B, Embedding's table and TokenLogProbs' h and w
// (with its backward's) accept, besides View, Copy and Convert; the result and
// its accumulation stay float32.
const (
	F32 DType = iota
	BF16
)

// String names the type ("f32", "bf16").
func (d DType) String() string {
	switch d {
	case F32:
		return "f32"
	case BF16:
		return "bf16"
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Size is the bytes per element.
func (d DType) Size() int {
	if d == BF16 {
		return 2
	}
	return 4
}

// Tensor is a handle to device-resident storage with a shape.
type Tensor interface {
	// Shape returns the dimensions (do not modify the slice).
	Shape() []int
	// Len is the number of elements, the product of Shape.
	Len() int
	// DType is the storage type.
	DType() DType
}

// Index is device-resident int32 data (token ids, positions, targets) made
// by Backend.UploadIndex and released by Backend.FreeIndex.
type Index interface {
	// Len is the number of values.
	Len() int
	// Range returns the smallest and largest value, found on the host when
	// the index was uploaded; (0, -1) when it is empty.
	Range() (lo, hi int32)
}

// IndexRange returns the smallest and largest of ids, or (0, -1) for none:
// what a backend's UploadIndex records for Index.Range.
func IndexRange(ids []int32) (lo, hi int32) {
	if len(ids) == 0 {
		return 0, -1
	}
	lo, hi = ids[0], ids[0]
	for _, v := range ids[1:] {
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi
}

// RoPETable holds the rotary position embedding's cos and sin for positions
// [0, MaxPos) and Half frequencies per head, made by Backend.NewRoPETable
// (once per model) and released by Backend.FreeRoPETable.
type RoPETable interface {
	// Half is the number of frequencies: half the head dimension.
	Half() int
	// MaxPos bounds the positions the table covers: [0, MaxPos).
	MaxPos() int
}

// Attn describes a causal grouped-query attention call. Queries are
// [n, Heads*HeadDim]; keys and values are [Past+n, KVHeads*HeadDim] (the
// cached positions followed by the new ones). Query i sits at position Past+i
// and attends to keys 0..Past+i. Query head h reads key/value head
// h / (Heads/KVHeads).
type Attn struct {
	Heads, KVHeads, HeadDim int
	Past                    int
	Scale                   float32 // usually 1/sqrt(HeadDim)

	// BF16 selects attention with bfloat16 inputs, PyTorch's attention
	// under bf16 autocast: q, k, v (and the backward's dout) are rounded to
	// bf16 (round to nearest even) before their products, which accumulate
	// in float32 (tensor cores on a GPU). A backend may also round the
	// probabilities and the score gradients to bf16 for their products
	// (kernels/cuda's tensor-core kernels do; kernels/cpu does not), so
	// backends agree to bf16's precision, not float32's. Off, attention is
	// float32 throughout.
	BF16 bool
	// LSE, with BF16, is float32 [n, Heads] or nil. When set, Attention
	// writes each (query, head)'s log-sum-exp of its scaled scores (natural
	// log) at LSE[query*Heads+head], and AttentionBackward may read it, and
	// Out, instead of recomputing the softmax's statistics; they must then
	// hold what Attention wrote for the same q, k and v.
	LSE Tensor
	// Out, with BF16 and LSE, is the forward's output, for the backward.
	Out Tensor
}

// AdamW holds one AdamW step's hyper-parameters. Step counts from 1 and sets
// the bias correction.
type AdamW struct {
	LR, Beta1, Beta2, Eps, WeightDecay float32
	Step                               int
}

// Backend is a compute device.
type Backend interface {
	// Name identifies the backend ("cpu", "cuda").
	Name() string

	// Err returns the first device error (out of memory, a launch failure, a
	// fault) since the backend was made or since ClearErr; once it is set,
	// operations are no-ops and their outputs undefined. Shape mismatches
	// stay panics: they are programming errors. Callers check Err at their
	// boundaries (once per forward, backward or optimiser step), not per op.
	Err() error
	// ClearErr forgets the recorded error. Tensors made while it was set
	// hold no storage: free them and make them again.
	ClearErr()

	// New allocates a zero-filled float32 tensor.
	New(shape ...int) Tensor
	// NewT allocates a zero-filled tensor of type dt.
	NewT(dt DType, shape ...int) Tensor
	// Empty allocates a tensor of type dt whose elements are undefined
	// until written: for an output that the next operation sets whole (a
	// device backend then skips the fill, one launch and a pass over the
	// memory per tensor).
	Empty(dt DType, shape ...int) Tensor
	// Upload copies host data (len == product of shape) into a new float32
	// tensor.
	Upload(data []float32, shape ...int) Tensor
	// UploadT copies host data into a new tensor of type dt, rounding to
	// nearest even for BF16.
	UploadT(dt DType, data []float32, shape ...int) Tensor
	// Download copies t into dst (len(dst) == t.Len()), widening bf16.
	Download(dst []float32, t Tensor)
	// View returns a tensor sharing t's storage: elements
	// [offset, offset+prod(shape)) of t reinterpreted with shape (same
	// type).
	View(t Tensor, offset int, shape ...int) Tensor
	// Free releases t's storage (views of it become invalid). Freeing a view
	// is a no-op.
	Free(t Tensor)
	// Copy copies src into dst (equal lengths; shapes may differ).
	Copy(dst, src Tensor)
	// Fill sets every element of t to v.
	Fill(t Tensor, v float32)
	// Convert copies src into dst (equal lengths; shapes may differ)
	// converting between their types: float32 to BF16 rounds to nearest
	// even (as UploadT), BF16 to float32 widens exactly, equal types copy.
	// It is how the model's autocast rounds an activation to bf16 for a
	// bf16 x bf16 GEMM.
	Convert(dst, src Tensor)

	// UploadIndex copies ids into a new device index and records their
	// range. ids must not change until FreeIndex: a host backend may keep
	// the slice instead of copying it.
	UploadIndex(ids []int32) Index
	// FreeIndex releases an index's storage.
	FreeIndex(ix Index)
	// NewRoPETable builds the cos/sin of float32(p) * freqs[j] (the product
	// in float32, as Hugging Face forms it) for positions p in [0, maxPos);
	// freqs are the inverse frequencies, theta^(-2j/headDim) unless scaled.
	NewRoPETable(freqs []float32, maxPos int) RoPETable
	// FreeRoPETable releases a RoPE table's storage.
	FreeRoPETable(rt RoPETable)

	// MatMul computes C = alpha*op(A)*op(B) + beta*C where op transposes when
	// asked. A and B may be BF16 (either or both; C is float32, and so is
	// the accumulation). Rank-2 operands are [M,K]x[K,N]->[M,N] (before transposition).
	// Rank-3 operands are batched: A is [B,·,·], C is [B,M,N], and B is
	// either [B,·,·] or rank 2 (shared across the batch). With beta == 0, C
	// is overwritten even if it held NaN.
	MatMul(c, a, b Tensor, transA, transB bool, alpha, beta float32)

	// Add sets dst = a + b elementwise (dst may alias a or b).
	Add(dst, a, b Tensor)
	// Mul sets dst = a * b elementwise (dst may alias a or b).
	Mul(dst, a, b Tensor)
	// Scale sets dst = s * a (dst may alias a).
	Scale(dst, a Tensor, s float32)
	// AXPY sets dst += s * x.
	AXPY(dst, x Tensor, s float32)
	// AddRow sets dst[i,:] += v for every row i (v has the row length): a bias.
	AddRow(dst, v Tensor)
	// SumRows accumulates dst[j] += sum_i x[i,j] (bias gradients).
	SumRows(dst, x Tensor)
	// Sum returns the sum of all elements (a device backend synchronises to
	// return it; prefer SumInto inside a loop).
	Sum(x Tensor) float64
	// SumSquares returns the sum of squared elements, as Sum.
	SumSquares(x Tensor) float64
	// SumInto accumulates dst[i] += sum(x) on the device: the sum is taken
	// in float64 and added to dst[i] with one rounding to float32. i indexes
	// dst's elements (any shape); x may not alias dst. Nothing reaches the
	// host: several reductions fill one tensor, downloaded once.
	SumInto(dst Tensor, i int, x Tensor)
	// SumSquaresInto accumulates dst[i] += sum(x^2), as SumInto (a global
	// gradient norm: one [1] tensor over every parameter, one download).
	SumSquaresInto(dst Tensor, i int, x Tensor)

	// RMSNorm sets out[i,:] = x[i,:] / sqrt(mean(x[i,:]^2) + eps) * w.
	RMSNorm(out, x, w Tensor, eps float32)
	// RMSNormBackward sets dx and accumulates dw (nil skips it) for RMSNorm.
	RMSNormBackward(dx, dw, dy, x, w Tensor, eps float32)

	// RoPE rotates x ([T, heads*headDim], headDim = 2*rt.Half()) in place,
	// Hugging Face rotate_half layout: pairs (j, j+headDim/2) rotate by the
	// angle float32(pos[t]) * freqs[j] of rt's frequencies; every position
	// lies in [0, rt.MaxPos()). inverse rotates the other way, which is the
	// backward pass.
	RoPE(x Tensor, pos Index, rt RoPETable, inverse bool)

	// Attention computes causal grouped-query attention (see Attn).
	Attention(out, q, k, v Tensor, a Attn)
	// AttentionBackward sets dq and accumulates dk and dv.
	AttentionBackward(dq, dk, dv, dout, q, k, v Tensor, a Attn)

	// SiLU sets out = x * sigmoid(x).
	SiLU(out, x Tensor)
	// SwiGLU sets out = silu(gate) * up.
	SwiGLU(out, gate, up Tensor)
	// SwiGLUBackward sets dgate and dup from dout.
	SwiGLUBackward(dgate, dup, dout, gate, up Tensor)

	// Embedding sets out[i,:] = table[ids[i],:] (also a row gather); table
	// may be BF16.
	Embedding(out, table Tensor, ids Index)
	// EmbeddingBackward accumulates dtable[ids[i],:] += dout[i,:].
	EmbeddingBackward(dtable, dout Tensor, ids Index)

	// LogProbs sets logp[t] = log_softmax(logits[t,:])[targets[t]].
	LogProbs(logp, logits Tensor, targets Index)
	// LogProbsBackward sets dlogits[t,:] = dlogp[t] * (onehot(targets[t]) -
	// softmax(logits[t,:])).
	LogProbsBackward(dlogits, logits Tensor, targets Index, dlogp Tensor)
	// CrossEntropy sets loss[t] = -log_softmax(logits[t,:])[targets[t]].
	CrossEntropy(loss, logits Tensor, targets Index)

	// TokenLogProbs is LogProbs of logits = h * w^T (h [T,H], w [V,H])
	// computed in chunks over the vocabulary so the [T,V] logits never exist.
	// w may be BF16 (here and in the backward, whose dw stays float32), and
	// h too when w is (autocast: the logits are the bf16 x bf16 product with
	// float32 accumulation, and the backward rounds the logits' gradient to
	// bf16 for its products, as PyTorch's autocast does). It also stores
	// each row's log-sum-exp in lse [T] for the backward.
	TokenLogProbs(logp, lse, h, w Tensor, targets Index)
	// TokenLogProbsBackward sets dh and accumulates dw (nil skips it) given
	// dlogp, recomputing logits chunk by chunk.
	TokenLogProbsBackward(dh, dw, h, w, lse Tensor, targets Index, dlogp Tensor)

	// AdamWStep updates param in place from grad, with moment buffers m, v.
	AdamWStep(param, grad, m, v Tensor, o AdamW)
}
