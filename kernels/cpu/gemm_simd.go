package cpu

import "sync"

// The assembly matmul drivers, BLIS-style: for each NC-column block of B and
// KC-long slice of k, B is packed into 16-column panels (k-major, kept in
// L3/L2), for each MC-row block A into 6-row panels (kept in L2), and the
// 6x16 micro-kernel runs over the panels with a B panel (KC*16 floats,
// 16 KiB) in L1. Packing also turns every transpose into the same layout.
// With few rows of A and B^T k-contiguous (a linear layer at decode) the
// packing would cost as much as the product, so a dot-product kernel streams
// B's rows once instead.
const (
	mr      = 6
	nr      = 16
	kcBlock = 256
	mcBlock = 144  // multiple of mr; 144 KiB of packed A
	ncBlock = 2048 // multiple of nr; 2 MiB of packed B
)

// useDot says whether an A*B^T product with k-contiguous rows takes the
// dot-product kernels instead of packing: with few rows of A packing B costs
// about as much as the product (measured: up to 64 rows when k >= 512, 16
// below).
func useDot(m, k int) bool { return m <= 16 || (m <= 64 && k >= 512) }

// operand is a strided matrix: element (i, p) at d[i*rs + p*cs].
type operand struct {
	d      []float32
	rs, cs int
}

// rowsFrom is the operand from row i on.
func (o operand) rowsFrom(i int) operand { return operand{d: o.d[i*o.rs:], rs: o.rs, cs: o.cs} }

// colsFrom is the operand from column j on.
func (o operand) colsFrom(j int) operand { return operand{d: o.d[j*o.cs:], rs: o.rs, cs: o.cs} }

// gemmSIMD is gemmFast for an assembly variant.
func (be *Backend) gemmSIMD(g gemm) {
	scaleC(g.c, g.beta)
	if g.k == 0 || g.alpha == 0 {
		return
	}
	a := operand{d: g.a, rs: g.k, cs: 1}
	if g.transA {
		a = operand{d: g.a, rs: 1, cs: g.m}
	}
	b := operand{d: g.b, rs: g.n, cs: 1}
	if g.transB {
		b = operand{d: g.b, rs: 1, cs: g.k}
	}
	be.gemmParallel(g.m, g.n, g.k, a, b, g.c, g.n, g.alpha)
}

// gemmParallel computes C[i*ldc+j] += alpha * sum_p A(i,p)*B(p,j) for an
// m x n C, split over the workers by rows or columns of C (each worker packs
// its own panels; nested calls stay on the caller's goroutine).
func (be *Backend) gemmParallel(m, n, k int, a, b operand, c []float32, ldc int, alpha float32) {
	if m == 0 || n == 0 || k == 0 {
		return
	}
	s := be.simd
	if a.cs == 1 && b.rs == 1 && useDot(m, k) {
		be.parallel((n+3)/4, 2*m*k*4, func(lo, hi int) {
			j0, j1 := 4*lo, min(4*hi, n)
			s.dotNT(m, j1-j0, k, a.d, a.rs, b.d[j0*b.cs:], b.cs, c[j0:], ldc, alpha)
		})
		return
	}
	// Splitting columns makes every worker pack all of A, splitting rows all
	// of B: duplicate the smaller, unless it leaves a worker without tiles.
	tm, tn := s.tile()
	mt, nt := (m+tm-1)/tm, (n+tn-1)/tn
	if (m <= n && nt >= be.workers) || mt < be.workers {
		be.parallel(nt, 2*tm*tn*k, func(lo, hi int) {
			j0, j1 := tn*lo, min(tn*hi, n)
			s.runPacked(m, j1-j0, k, a, b.colsFrom(j0), c[j0:], ldc, alpha)
		})
		return
	}
	be.parallel(mt, 2*tm*tn*k, func(lo, hi int) {
		i0, i1 := tm*lo, min(tm*hi, m)
		s.runPacked(i1-i0, n, k, a.rowsFrom(i0), b, c[i0*ldc:], ldc, alpha)
	})
}

// gemmSerial is gemmParallel on the calling goroutine.
func (s *simdKernels) gemmSerial(m, n, k int, a, b operand, c []float32, ldc int, alpha float32) {
	if m == 0 || n == 0 || k == 0 {
		return
	}
	if a.cs == 1 && b.rs == 1 && useDot(m, k) {
		s.dotNT(m, n, k, a.d, a.rs, b.d, b.cs, c, ldc, alpha)
		return
	}
	s.runPacked(m, n, k, a, b, c, ldc, alpha)
}

type packBufs struct{ a, b []float32 }

var packPool = sync.Pool{New: func() any {
	// packA6 writes two floats past a panel.
	return &packBufs{a: make([]float32, mcBlock*kcBlock+8), b: make([]float32, kcBlock*ncBlock)}
}}

// packed runs the blocked loops with the 6x16 micro-kernel.
func (s *simdKernels) packed(m, n, k int, a, b operand, c []float32, ldc int, alpha float32) {
	_ = c[(m-1)*ldc+n-1]
	bufs := packPool.Get().(*packBufs)
	defer packPool.Put(bufs)
	var tmp [mr * nr]float32
	for jc := 0; jc < n; jc += ncBlock {
		nc := min(ncBlock, n-jc)
		for pc := 0; pc < k; pc += kcBlock {
			kc := min(kcBlock, k-pc)
			bp := s.packB(bufs.b, b, pc, kc, jc, nc)
			for ic := 0; ic < m; ic += mcBlock {
				mc := min(mcBlock, m-ic)
				ap := s.packA(bufs.a, a, ic, mc, pc, kc)
				for jr := 0; jr < nc; jr += nr {
					bpan := &bp[(jr/nr)*kc*nr]
					nj := min(nr, nc-jr)
					for ir := 0; ir < mc; ir += mr {
						apan := &ap[(ir/mr)*kc*mr]
						mi := min(mr, mc-ir)
						ci := (ic+ir)*ldc + jc + jr
						if mi == mr && nj == nr {
							s.kern6x16(kc, apan, bpan, &c[ci], ldc, alpha)
							continue
						}
						clear(tmp[:])
						s.kern6x16(kc, apan, bpan, &tmp[0], nr, alpha)
						for i := 0; i < mi; i++ {
							row := c[ci+i*ldc : ci+i*ldc+nj]
							for j := range row {
								row[j] += tmp[i*nr+j]
							}
						}
					}
				}
			}
		}
	}
}

// packA packs rows [i0, i0+mc) x k [p0, p0+kc) of a into 6-row panels,
// panel-major then k-major (panel q holds a(i0+6q+r, p0+p) at p*6+r), the
// last panel zero-padded. dst has room for two floats more.
func (s *simdKernels) packA(dst []float32, a operand, i0, mc, p0, kc int) []float32 {
	panels := (mc + mr - 1) / mr
	_ = dst[panels*kc*mr+1]
	out := dst[:panels*kc*mr]
	for q := 0; q < panels; q++ {
		pan := out[q*kc*mr : (q+1)*kc*mr]
		rows := min(mr, mc-q*mr)
		base := i0 + q*mr
		switch {
		case a.cs == 1 && rows == mr && kc >= 8:
			k8 := kc &^ 7
			_ = a.d[(base+mr-1)*a.rs+p0+k8-1]
			s.packA6(&dst[q*kc*mr], &a.d[base*a.rs+p0], a.rs, k8)
			for r := 0; r < mr; r++ {
				src := a.d[(base+r)*a.rs+p0+k8:][:kc-k8]
				for p, x := range src {
					pan[(k8+p)*mr+r] = x
				}
			}
		case a.cs == 1 && rows == mr:
			r0 := a.d[base*a.rs+p0:][:kc]
			r1 := a.d[(base+1)*a.rs+p0:][:kc]
			r2 := a.d[(base+2)*a.rs+p0:][:kc]
			r3 := a.d[(base+3)*a.rs+p0:][:kc]
			r4 := a.d[(base+4)*a.rs+p0:][:kc]
			r5 := a.d[(base+5)*a.rs+p0:][:kc]
			for p := range r0 {
				d := pan[p*mr : p*mr+mr : p*mr+mr]
				d[0], d[1], d[2], d[3], d[4], d[5] = r0[p], r1[p], r2[p], r3[p], r4[p], r5[p]
			}
		case a.rs == 1 && rows == mr:
			for p := 0; p < kc; p++ {
				*(*[mr]float32)(pan[p*mr:]) = *(*[mr]float32)(a.d[(p0+p)*a.cs+base:])
			}
		case a.rs == 1:
			for p := 0; p < kc; p++ {
				d := pan[p*mr : p*mr+mr]
				copy(d, a.d[(p0+p)*a.cs+base:][:rows])
				clear(d[rows:])
			}
		default:
			for p := 0; p < kc; p++ {
				d := pan[p*mr : p*mr+mr]
				for r := 0; r < rows; r++ {
					d[r] = a.d[(base+r)*a.rs+(p0+p)*a.cs]
				}
				clear(d[rows:])
			}
		}
	}
	return out
}

// packB packs k [p0, p0+kc) x columns [j0, j0+nc) of b into 16-column
// panels (panel q holds b(p0+p, j0+16q+j) at p*16+j), the last one
// zero-padded.
func (s *simdKernels) packB(dst []float32, b operand, p0, kc, j0, nc int) []float32 {
	panels := (nc + nr - 1) / nr
	out := dst[:panels*kc*nr]
	for q := 0; q < panels; q++ {
		pan := out[q*kc*nr : (q+1)*kc*nr]
		cols := min(nr, nc-q*nr)
		base := j0 + q*nr
		switch {
		case b.cs == 1 && cols == nr:
			for p := 0; p < kc; p++ {
				*(*[nr]float32)(pan[p*nr:]) = *(*[nr]float32)(b.d[(p0+p)*b.rs+base:])
			}
		case b.cs == 1:
			for p := 0; p < kc; p++ {
				d := pan[p*nr : p*nr+nr]
				copy(d, b.d[(p0+p)*b.rs+base:][:cols])
				clear(d[cols:])
			}
		case b.rs == 1 && cols == nr:
			k8 := kc &^ 7
			if k8 > 0 {
				_ = b.d[(base+nr-1)*b.cs+p0+k8-1]
				s.packNT8(&pan[0], &b.d[base*b.cs+p0], b.cs, k8)
				s.packNT8(&pan[8], &b.d[(base+8)*b.cs+p0], b.cs, k8)
			}
			for j := 0; j < nr && k8 < kc; j++ {
				src := b.d[(base+j)*b.cs+p0+k8:][:kc-k8]
				d := pan[k8*nr+j:]
				for p, x := range src {
					d[p*nr] = x
				}
			}
		default:
			for p := 0; p < kc; p++ {
				d := pan[p*nr : p*nr+nr]
				for j := 0; j < cols; j++ {
					d[j] = b.d[(p0+p)*b.rs+(base+j)*b.cs]
				}
				clear(d[cols:])
			}
		}
	}
	return out
}

// dotNT computes C[i*ldc+j] += alpha * dot(a[i*lda:][:k], b[j*ldb:][:k]) for
// an m x n C: rows in threes with the 3x4 kernel, the one or two left over
// with the 1x4 kernel. A last partial group of four columns is recomputed
// from the four ending at the edge into a scratch tile, of which only the
// new columns are added (B padded to four rows when n < 4).
func (s *simdKernels) dotNT(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, alpha float32) {
	_ = a[(m-1)*lda+k-1]
	_ = b[(n-1)*ldb+k-1]
	_ = c[(m-1)*ldc+n-1]
	if s.dotFn != nil && n >= 4 {
		s.dotFn(s, m, n, k, a, lda, b, ldb, c, ldc, alpha)
		return
	}
	if n < 4 {
		pad := make([]float32, 4*k)
		for q := 0; q < n; q++ {
			copy(pad[q*k:(q+1)*k], b[q*ldb:][:k])
		}
		var tmp [12]float32
		for i := 0; i < m; i++ {
			clear(tmp[:4])
			s.dot1x4(k, &a[i*lda], &pad[0], k, &tmp[0], alpha)
			row := c[i*ldc : i*ldc+n]
			for q := range row {
				row[q] += tmp[q]
			}
		}
		return
	}
	m3 := m - m%3
	var tmp [12]float32
	for j := 0; j < n; j += 4 {
		jb := min(j, n-4)
		if jb == j {
			for i := 0; i < m3; i += 3 {
				s.dot3x4(k, &a[i*lda], lda, &b[j*ldb], ldb, &c[i*ldc+j], ldc, alpha)
			}
			for i := m3; i < m; i++ {
				s.dot1x4(k, &a[i*lda], &b[j*ldb], ldb, &c[i*ldc+j], alpha)
			}
			continue
		}
		for i := 0; i < m; i += 3 {
			rows := min(3, m-i)
			clear(tmp[:])
			if rows == 3 {
				s.dot3x4(k, &a[i*lda], lda, &b[jb*ldb], ldb, &tmp[0], 4, alpha)
			} else {
				for r := 0; r < rows; r++ {
					s.dot1x4(k, &a[(i+r)*lda], &b[jb*ldb], ldb, &tmp[4*r], alpha)
				}
			}
			for r := 0; r < rows; r++ {
				row := c[(i+r)*ldc : (i+r)*ldc+n]
				for q := j - jb; q < 4; q++ {
					row[jb+q] += tmp[r*4+q]
				}
			}
		}
	}
}
