package cpu

import (
	"github.com/hone-rl/hone/kernels"
)

// gemm describes one C = alpha*op(A)*op(B) + beta*C on host slices.
type gemm struct {
	m, n, k     int
	a, b, c     []float32
	transA      bool
	transB      bool
	alpha, beta float32
}

// MatMul implements kernels.Backend.
func (be *Backend) MatMul(c, a, b kernels.Tensor, transA, transB bool, alpha, beta float32) {
	for _, g := range planMatMul(c, a, b, transA, transB, alpha, beta) {
		be.gemmFast(g)
	}
}

// planMatMul checks shapes and splits a (possibly batched) MatMul into gemms.
func planMatMul(c, a, b kernels.Tensor, transA, transB bool, alpha, beta float32) []gemm {
	d, err := kernels.MatMulShape(c, a, b, transA, transB)
	must(err)
	batch, m, n, ka, bBatched := d.Batch, d.M, d.N, d.K, d.BBatched
	ad, bd, cd := widened(a), widened(b), data(c) // bf16 A or B: widened once per call
	out := make([]gemm, batch)
	for i := range out {
		bOff := 0
		if bBatched {
			bOff = i * ka * n
		}
		out[i] = gemm{m: m, n: n, k: ka, transA: transA, transB: transB, alpha: alpha, beta: beta,
			a: ad[i*m*ka : (i+1)*m*ka], b: bd[bOff : bOff+ka*n], c: cd[i*m*n : (i+1)*m*n]}
	}
	return out
}

// gemmPlain is the readable reference: a triple loop with float32
// accumulation in k order.
func gemmPlain(g gemm) {
	for i := 0; i < g.m; i++ {
		for j := 0; j < g.n; j++ {
			var s float32
			for p := 0; p < g.k; p++ {
				s += g.at(i, p) * g.bt(p, j)
			}
			g.c[i*g.n+j] = g.alpha*s + g.betaTerm(g.c[i*g.n+j])
		}
	}
}

func (g gemm) at(i, p int) float32 {
	if g.transA {
		return g.a[p*g.m+i]
	}
	return g.a[i*g.k+p]
}

func (g gemm) bt(p, j int) float32 {
	if g.transB {
		return g.b[j*g.k+p]
	}
	return g.b[p*g.n+j]
}

func (g gemm) betaTerm(c float32) float32 {
	if g.beta == 0 {
		return 0
	}
	return g.beta * c
}

// Blocking of the generic kernel: kc values of k per pass keep 4 rows of
// each operand in L1; mc rows of A per block stay in L2 while B panels stream
// past.
const (
	kc = 256
	mc = 64
)

// gemmFast runs the backend variant's matmul: the packed assembly kernels
// (gemm_simd.go), or in generic Go: both operands brought to k-contiguous
// rows (A as [M,K], B as [N,K], transposing into scratch when needed) and the
// blocked 4x2 kernel.
func (be *Backend) gemmFast(g gemm) {
	if g.m == 0 || g.n == 0 {
		return
	}
	if be.simd != nil {
		be.gemmSIMD(g)
		return
	}
	scaleC(g.c, g.beta)
	if g.k == 0 || g.alpha == 0 {
		return
	}
	a := g.a
	if g.transA {
		a = transpose(g.a, g.k, g.m)
	}
	b := g.b
	if !g.transB {
		b = transpose(g.b, g.k, g.n)
	}
	nt := (g.n + 3) / 4
	mt := (g.m + 3) / 4
	cost := 16 * g.k
	if nt >= mt || nt >= 2*be.workers {
		be.parallel(nt, cost*mt, func(lo, hi int) {
			gemmNTGeneric(ntArgs{c: g.c, ldc: g.n, a: a, lda: g.k, b: b, ldb: g.k, k: g.k, alpha: g.alpha}, 0, g.m, 4*lo, min(4*hi, g.n))
		})
		return
	}
	be.parallel(mt, cost*nt, func(lo, hi int) {
		gemmNTGeneric(ntArgs{c: g.c, ldc: g.n, a: a, lda: g.k, b: b, ldb: g.k, k: g.k, alpha: g.alpha}, 4*lo, min(4*hi, g.m), 0, g.n)
	})
}

func scaleC(c []float32, beta float32) {
	switch beta {
	case 1:
	case 0:
		clear(c)
	default:
		for i := range c {
			c[i] *= beta
		}
	}
}

// transpose returns the [cols, rows] transpose of a row-major [rows, cols]
// matrix, in cache-friendly tiles.
func transpose(src []float32, rows, cols int) []float32 {
	dst := make([]float32, len(src))
	const t = 32
	for i0 := 0; i0 < rows; i0 += t {
		for j0 := 0; j0 < cols; j0 += t {
			for i := i0; i < min(i0+t, rows); i++ {
				row := src[i*cols : (i+1)*cols]
				for j := j0; j < min(j0+t, cols); j++ {
					dst[j*rows+i] = row[j]
				}
			}
		}
	}
	return dst
}

// ntArgs are strided row-major operands of C += alpha * A*B^T: A has rows of
// k values every lda elements, B likewise with ldb, C rows every ldc.
type ntArgs struct {
	c, a, b       []float32
	ldc, lda, ldb int
	k             int
	alpha         float32
}

// gemmNT accumulates C[i0:i1, j0:j1] += alpha * A[i,:]·B[j,:] on the
// calling goroutine.
func (be *Backend) gemmNT(g ntArgs, i0, i1, j0, j1 int) {
	if be.simd != nil {
		be.simd.gemmSerial(i1-i0, j1-j0, g.k, operand{d: g.a[i0*g.lda:], rs: g.lda, cs: 1},
			operand{d: g.b[j0*g.ldb:], rs: 1, cs: g.ldb}, g.c[i0*g.ldc+j0:], g.ldc, g.alpha)
		return
	}
	gemmNTGeneric(g, i0, i1, j0, j1)
}

// gemmNTGeneric is gemmNT in Go. With few rows of A (decode) each B row
// streams once, unblocked.
func gemmNTGeneric(g ntArgs, i0, i1, j0, j1 int) {
	kb := kc
	if i1-i0 <= 16 {
		kb = max(g.k, 1)
	}
	for p0 := 0; p0 < g.k; p0 += kb {
		kk := min(kb, g.k-p0)
		for ib := i0; ib < i1; ib += mc {
			ie := min(ib+mc, i1)
			for j := j0; j < j1; j += 4 {
				nj := min(4, j1-j)
				for i := ib; i < ie; i += 4 {
					mi := min(4, ie-i)
					block(g.c[i*g.ldc+j:], g.ldc, g.a[i*g.lda+p0:], g.lda, g.b[j*g.ldb+p0:], g.ldb, mi, nj, kk, g.alpha)
				}
			}
		}
	}
}

// block computes an mi x nj (each <= 4) tile with the micro-kernels: 4x2
// for full row groups, 1x4 for leftover rows, dot products at the edges.
func block(c []float32, ldc int, a []float32, lda int, b []float32, ldb int, mi, nj, k int, alpha float32) {
	j := 0
	if mi == 4 {
		for ; j+2 <= nj; j += 2 {
			kern4x2(c[j:], ldc, a, lda, b[j*ldb:], ldb, k, alpha)
		}
	}
	for i := 0; i < mi; i++ {
		ai := a[i*lda : i*lda+k]
		ci := c[i*ldc:]
		jj := j
		if nj-jj == 4 {
			kern1x4(ci, ai, b, ldb, k, alpha)
			continue
		}
		for ; jj < nj; jj++ {
			ci[jj] += alpha * dot(ai, b[jj*ldb:jj*ldb+k])
		}
	}
}

func dot(x, y []float32) float32 {
	y = y[:len(x)]
	var s0, s1, s2, s3 float32
	p := 0
	for ; p+4 <= len(x); p += 4 {
		s0 += x[p] * y[p]
		s1 += x[p+1] * y[p+1]
		s2 += x[p+2] * y[p+2]
		s3 += x[p+3] * y[p+3]
	}
	for ; p < len(x); p++ {
		s0 += x[p] * y[p]
	}
	return (s0 + s1) + (s2 + s3)
}

// kern1x4 computes one row of A against four rows of B.
func kern1x4(c []float32, a []float32, b []float32, ldb int, k int, alpha float32) {
	a = a[:k]
	b0 := b[:k][:len(a)]
	b1 := b[ldb : ldb+k][:len(a)]
	b2 := b[2*ldb : 2*ldb+k][:len(a)]
	b3 := b[3*ldb : 3*ldb+k][:len(a)]
	var c0, c1, c2, c3 float32
	for p, x := range a {
		c0 += x * b0[p]
		c1 += x * b1[p]
		c2 += x * b2[p]
		c3 += x * b3[p]
	}
	c = c[:4]
	c[0] += alpha * c0
	c[1] += alpha * c1
	c[2] += alpha * c2
	c[3] += alpha * c3
}

// kern4x2 is the register-tiled micro-kernel: four rows of A against two
// rows of B, 8 accumulators. Wider tiles spill: the Go compiler has 15 float
// registers and two-operand SSE multiplies, and 4x2 measured fastest
// (4x4 runs at 70% of its speed).
func kern4x2(c []float32, ldc int, a []float32, lda int, b []float32, ldb int, k int, alpha float32) {
	a0 := a[:k]
	a1 := a[lda : lda+k][:len(a0)]
	a2 := a[2*lda : 2*lda+k][:len(a0)]
	a3 := a[3*lda : 3*lda+k][:len(a0)]
	b0 := b[:k][:len(a0)]
	b1 := b[ldb : ldb+k][:len(a0)]
	var c00, c01, c10, c11, c20, c21, c30, c31 float32
	for p := range a0 {
		x0, x1, x2, x3 := a0[p], a1[p], a2[p], a3[p]
		y := b0[p]
		c00 += x0 * y
		c10 += x1 * y
		c20 += x2 * y
		c30 += x3 * y
		y = b1[p]
		c01 += x0 * y
		c11 += x1 * y
		c21 += x2 * y
		c31 += x3 * y
	}
	r := c[:2]
	r[0] += alpha * c00
	r[1] += alpha * c01
	r = c[ldc : ldc+2]
	r[0] += alpha * c10
	r[1] += alpha * c11
	r = c[2*ldc : 2*ldc+2]
	r[0] += alpha * c20
	r[1] += alpha * c21
	r = c[3*ldc : 3*ldc+2]
	r[0] += alpha * c30
	r[1] += alpha * c31
}
