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
