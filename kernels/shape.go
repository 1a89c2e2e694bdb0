package kernels

import "fmt"

// MatMulDims are the dimensions of a (possibly batched) MatMul: Batch
// products C[M,N] = op(A)[M,K] op(B)[K,N]; BBatched when B has its own
// matrix per batch entry (else one B serves them all).
type MatMulDims struct {
	Batch, M, N, K int
	BBatched       bool
}

// MatMulShape checks MatMul's shapes (see Backend.MatMul) and returns its
// dimensions; every backend plans its products from them.
func MatMulShape(c, a, b Tensor, transA, transB bool) (MatMulDims, error) {
	as, bs, cs := a.Shape(), b.Shape(), c.Shape()
	d := MatMulDims{Batch: 1}
	if len(as) == 3 {
		d.Batch = as[0]
		as = as[1:]
		if len(cs) != 3 || cs[0] != d.Batch {
			return d, fmt.Errorf("matmul batched A %v needs C [%d,M,N], got %v", a.Shape(), d.Batch, c.Shape())
		}
		cs = cs[1:]
	}
	if d.BBatched = len(bs) == 3; d.BBatched {
		if bs[0] != d.Batch {
			return d, fmt.Errorf("matmul batch mismatch A %v B %v", a.Shape(), b.Shape())
		}
		bs = bs[1:]
	}
	if len(as) != 2 || len(bs) != 2 || len(cs) != 2 {
		return d, fmt.Errorf("matmul shapes A %v B %v C %v", a.Shape(), b.Shape(), c.Shape())
	}
	m, ka := as[0], as[1]
	if transA {
		m, ka = ka, m
	}
	kb, n := bs[0], bs[1]
	if transB {
		kb, n = n, kb
	}
	if ka != kb || cs[0] != m || cs[1] != n {
		return d, fmt.Errorf("matmul A %v(T=%v) B %v(T=%v) C %v", a.Shape(), transA, b.Shape(), transB, c.Shape())
	}
	d.M, d.N, d.K = m, n, ka
	return d, nil
}

// Rows splits t into rows of its last dimension (see the package's row
// convention): a scalar is one row of width 1, a zero width gives no rows.
func Rows(t Tensor) (n, width int) {
	s := t.Shape()
	if len(s) == 0 {
		return 1, 1
	}
	width = s[len(s)-1]
	if width == 0 {
		return 0, 0
	}
	return t.Len() / width, width
}

// AttnDims are the dimensions of an attention call: N queries, query rows
// of QWidth = Heads*HeadDim and key/value rows of KWidth = KVHeads*HeadDim.
type AttnDims struct {
	N, QWidth, KWidth int
}

// AttentionShape checks an attention call's shapes (see Backend.Attention):
// q [n, Heads*HeadDim], k and v [Past+n, KVHeads*HeadDim], and out (when not
// nil) as long as q.
func AttentionShape(out, q, k, v Tensor, a Attn) (AttnDims, error) {
	n, qw := Rows(q)
	kn, kw := Rows(k)
	vn, vw := Rows(v)
	d := AttnDims{N: n, QWidth: qw, KWidth: kw}
	if a.Heads <= 0 || a.KVHeads <= 0 || a.HeadDim <= 0 || a.Past < 0 || a.Heads%a.KVHeads != 0 {
		return d, fmt.Errorf("attention %+v: heads, kv heads and head dim must be positive, heads a multiple of kv heads, past >= 0", a)
	}
	if qw != a.Heads*a.HeadDim || kw != a.KVHeads*a.HeadDim || vw != kw || kn != a.Past+n || vn != kn {
		return d, fmt.Errorf("attention q %v k %v v %v with %+v", q.Shape(), k.Shape(), v.Shape(), a)
	}
	if out != nil && out.Len() != q.Len() {
		return d, fmt.Errorf("attention out %v for q %v", out.Shape(), q.Shape())
	}
	if a.LSE != nil && (!a.BF16 || a.LSE.Len() != n*a.Heads || a.LSE.DType() != F32) {
		return d, fmt.Errorf("attention lse %v (%v) for %d queries of %d heads (bf16 %v)", a.LSE.Shape(), a.LSE.DType(), n, a.Heads, a.BF16)
	}
	if a.Out != nil && (a.LSE == nil || a.Out.Len() != q.Len() || a.Out.DType() != F32) {
		return d, fmt.Errorf("attention saved out %v for q %v (lse set: %v)", a.Out.Shape(), q.Shape(), a.LSE != nil)
	}
	return d, nil
}

// CheckIDs checks that every id lies in [0, vocab), in constant time from
// the range recorded at upload.
func CheckIDs(ids Index, vocab int) error {
	if lo, hi := ids.Range(); ids.Len() > 0 && (lo < 0 || int(hi) >= vocab) {
		bad := lo
		if lo >= 0 {
			bad = hi
		}
		return fmt.Errorf("id %d outside vocabulary [0,%d)", bad, vocab)
	}
	return nil
}

// CheckTargets checks one target per row, each inside the vocabulary.
func CheckTargets(targets Index, rows, vocab int) error {
	if targets.Len() != rows {
		return fmt.Errorf("%d targets for %d rows", targets.Len(), rows)
	}
	return CheckIDs(targets, vocab)
}

// CheckElem checks that i indexes one of n elements.
func CheckElem(operand string, i, n int) error {
	if i < 0 || i >= n {
		return fmt.Errorf("%s: element %d of %d", operand, i, n)
	}
	return nil
}

// CheckLen checks that an operand has the length an operation needs.
func CheckLen(operand string, got, want int) error {
	if got != want {
		return fmt.Errorf("%s: length %d, want %d", operand, got, want)
	}
	return nil
}

// RoPEShape checks a RoPE call: one position per row of x, every position
// inside the table ([0, rt.MaxPos())), and rows made of whole heads of
// 2*rt.Half() elements.
func RoPEShape(x Tensor, pos Index, rt RoPETable) (n, width int, err error) {
	n, width = Rows(x)
	half := rt.Half()
	if pos.Len() != n || half <= 0 || width%(2*half) != 0 {
		return n, width, fmt.Errorf("rope x %v with %d positions, %d frequencies", x.Shape(), pos.Len(), half)
	}
	if lo, hi := pos.Range(); n > 0 && (lo < 0 || int(hi) >= rt.MaxPos()) {
		return n, width, fmt.Errorf("rope positions [%d,%d] outside the table's [0,%d)", lo, hi, rt.MaxPos())
	}
	return n, width, nil
}
