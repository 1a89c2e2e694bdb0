//go:build amd64

package cpu

import (
	"sync"

	"golang.org/x/sys/cpu"
)

//go:noescape
func kern12x32AVX512(k int, a, b, c *float32, ldc int, alpha float32)

//go:noescape
func packT8x8(dst, src *float32, lds, k, ldd int)

//go:noescape
func dot3x4AVX512(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, alpha float32)

//go:noescape
func dot4x4AVX512(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, alpha float32)

//go:noescape
func dot1x4AVX512(k int, a, b *float32, ldb int, c *float32, alpha float32)

//go:noescape
func fmaLoopAVX512(n int)

// The AVX-512 packed matmul: the same BLIS-style loops as the AVX2 one
// (gemm_simd.go) with a 12x32 register tile, 24 of the 32 ZMM registers
// accumulating, two holding the B row and six the broadcast A values. Each
// k step does 24 FMAs for 2 vector and 12 broadcast loads. A B panel (KC*32
// floats, 32 KiB) stays in L1 while the A panels of an MC-row block (192 KiB)
// stream from L2.
const (
	mr512 = 12
	nr512 = 32
	kc512 = 256
	mc512 = 192  // multiple of mr512
	nc512 = 2048 // multiple of nr512
)

// avx512Kernels: the AVX-512 matmul (12x32 packed tiles, 16-lane dot
// products for decode); the elementwise kernels are the AVX2 ones (they are
// a small share of a step and memory-bound on long rows).
var avx512Kernels = &simdKernels{
	name:     VariantAVX512,
	kern6x16: kern6x16AVX2,
	dot3x4:   dot3x4AVX512,
	dot1x4:   dot1x4AVX512,
	packNT8:  packNT8AVX2,
	packA6:   packA6AVX2,

	tileM:  mr512,
	tileN:  nr512,
	packFn: packed512,
	dotFn:  dotNT512,

	exp:          expAVX2,
	max:          maxAVX2,
	scale:        scaleAVX2,
	silu:         siluAVX2,
	swiglu:       swigluAVX2,
	swigluBack:   swigluBackAVX2,
	weightedRows: weightedRowsAVX2,
}

// hasAVX512 says whether the CPU and the OS run avx512Kernels: AVX512F
// (x/sys/cpu sets it only when XCR0 shows the OS saves the opmask and ZMM
// state) for the kernels, AVX2 and FMA for the transposes and the
// elementwise kernels they share with the AVX2 variant.
func hasAVX512() bool {
	return cpu.X86.HasAVX512F && cpu.X86.HasAVX2 && cpu.X86.HasFMA
}

type packBufs512 struct{ a, b []float32 }

var packPool512 = sync.Pool{New: func() any {
	return &packBufs512{a: make([]float32, mc512*kc512), b: make([]float32, kc512*nc512)}
}}

// packed512 runs the blocked loops with the 12x32 micro-kernel; tiles cut
// by the edges of C are computed into a scratch tile and added.
func packed512(m, n, k int, a, b operand, c []float32, ldc int, alpha float32) {
	_ = c[(m-1)*ldc+n-1]
	bufs := packPool512.Get().(*packBufs512)
	defer packPool512.Put(bufs)
	var tmp [mr512 * nr512]float32
	for jc := 0; jc < n; jc += nc512 {
		nc := min(nc512, n-jc)
		for pc := 0; pc < k; pc += kc512 {
			kc := min(kc512, k-pc)
			bp := packB512(bufs.b, b, pc, kc, jc, nc)
			for ic := 0; ic < m; ic += mc512 {
				mc := min(mc512, m-ic)
				ap := packA512(bufs.a, a, ic, mc, pc, kc)
				for jr := 0; jr < nc; jr += nr512 {
					bpan := &bp[(jr/nr512)*kc*nr512]
					nj := min(nr512, nc-jr)
					for ir := 0; ir < mc; ir += mr512 {
						apan := &ap[(ir/mr512)*kc*mr512]
						mi := min(mr512, mc-ir)
						ci := (ic+ir)*ldc + jc + jr
						if mi == mr512 && nj == nr512 {
							kern12x32AVX512(kc, apan, bpan, &c[ci], ldc, alpha)
							continue
						}
						clear(tmp[:])
						kern12x32AVX512(kc, apan, bpan, &tmp[0], nr512, alpha)
						for i := 0; i < mi; i++ {
							row := c[ci+i*ldc : ci+i*ldc+nj]
							for j := range row {
								row[j] += tmp[i*nr512+j]
							}
						}
					}
				}
			}
		}
	}
}

// packA512 packs rows [i0, i0+mc) x k [p0, p0+kc) of a into 12-row panels,
// panel-major then k-major (panel q holds a(i0+12q+r, p0+p) at p*12+r), the
// last panel zero-padded.
func packA512(dst []float32, a operand, i0, mc, p0, kc int) []float32 {
	panels := (mc + mr512 - 1) / mr512
	out := dst[:panels*kc*mr512]
	for q := 0; q < panels; q++ {
		pan := out[q*kc*mr512 : (q+1)*kc*mr512]
		rows := min(mr512, mc-q*mr512)
		base := i0 + q*mr512
		switch {
		case a.cs == 1 && rows == mr512:
			// Rows 4..11 then rows 0..7 by 8x8 transposes (rows 4..7 are
			// written twice, with the same values), the k%8 tail in Go.
			k8 := kc &^ 7
			if k8 > 0 {
				_ = a.d[(base+mr512-1)*a.rs+p0+k8-1]
				_ = pan[(k8-1)*mr512+mr512-1]
				packT8x8(&pan[4], &a.d[(base+4)*a.rs+p0], a.rs, k8, mr512)
				packT8x8(&pan[0], &a.d[base*a.rs+p0], a.rs, k8, mr512)
			}
			for r := 0; r < mr512 && k8 < kc; r++ {
				src := a.d[(base+r)*a.rs+p0+k8:][:kc-k8]
				for p, x := range src {
					pan[(k8+p)*mr512+r] = x
				}
			}
		case a.rs == 1 && rows == mr512:
			for p := 0; p < kc; p++ {
				*(*[mr512]float32)(pan[p*mr512:]) = *(*[mr512]float32)(a.d[(p0+p)*a.cs+base:])
			}
		case a.rs == 1:
			for p := 0; p < kc; p++ {
				d := pan[p*mr512 : p*mr512+mr512]
				copy(d, a.d[(p0+p)*a.cs+base:][:rows])
				clear(d[rows:])
			}
		default:
			for p := 0; p < kc; p++ {
				d := pan[p*mr512 : p*mr512+mr512]
				for r := 0; r < rows; r++ {
					d[r] = a.d[(base+r)*a.rs+(p0+p)*a.cs]
				}
				clear(d[rows:])
			}
		}
	}
	return out
}

// packB512 packs k [p0, p0+kc) x columns [j0, j0+nc) of b into 32-column
// panels (panel q holds b(p0+p, j0+32q+j) at p*32+j), the last one
// zero-padded.
func packB512(dst []float32, b operand, p0, kc, j0, nc int) []float32 {
	panels := (nc + nr512 - 1) / nr512
	out := dst[:panels*kc*nr512]
	for q := 0; q < panels; q++ {
		pan := out[q*kc*nr512 : (q+1)*kc*nr512]
		cols := min(nr512, nc-q*nr512)
		base := j0 + q*nr512
		switch {
		case b.cs == 1 && cols == nr512:
			for p := 0; p < kc; p++ {
				*(*[nr512]float32)(pan[p*nr512:]) = *(*[nr512]float32)(b.d[(p0+p)*b.rs+base:])
			}
		case b.cs == 1:
			for p := 0; p < kc; p++ {
				d := pan[p*nr512 : p*nr512+nr512]
				copy(d, b.d[(p0+p)*b.rs+base:][:cols])
				clear(d[cols:])
			}
		case b.rs == 1 && cols == nr512:
			// B^T (a linear layer's weight): four 8x8 transposes per k block.
			k8 := kc &^ 7
			if k8 > 0 {
				_ = b.d[(base+nr512-1)*b.cs+p0+k8-1]
				_ = pan[(k8-1)*nr512+nr512-1]
				for j := 0; j < nr512; j += 8 {
					packT8x8(&pan[j], &b.d[(base+j)*b.cs+p0], b.cs, k8, nr512)
				}
			}
			for j := 0; j < nr512 && k8 < kc; j++ {
				src := b.d[(base+j)*b.cs+p0+k8:][:kc-k8]
				d := pan[k8*nr512+j:]
				for p, x := range src {
					d[p*nr512] = x
				}
			}
		default:
			for p := 0; p < kc; p++ {
				d := pan[p*nr512 : p*nr512+nr512]
				for j := 0; j < cols; j++ {
					d[j] = b.d[(p0+p)*b.rs+(base+j)*b.cs]
				}
				clear(d[cols:])
			}
		}
	}
	return out
}

// dotNT512 is dotNT with the 4x4 dot-product kernel (16 ZMM accumulators, 8
// loads per 16 FMAs, against 7 per 12 for 3x4): rows in fours, three left
// over with the 3x4 kernel, one or two with the 1x4. A last partial group of
// four columns is recomputed from the four ending at the edge into a scratch
// tile, of which only the new columns are added; n < 4 goes to dotNT's
// padded path.
func dotNT512(s *simdKernels, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, alpha float32) {
	_ = a[(m-1)*lda+k-1]
	_ = b[(n-1)*ldb+k-1]
	_ = c[(m-1)*ldc+n-1]
	// rows runs the kernels over rows [0, m) for the four columns at bj into
	// C at cj (ldc apart).
	rows := func(bj *float32, cj []float32, ldc int) {
		i := 0
		for ; i+4 <= m; i += 4 {
			dot4x4AVX512(k, &a[i*lda], lda, bj, ldb, &cj[i*ldc], ldc, alpha)
		}
		if m-i == 3 {
			dot3x4AVX512(k, &a[i*lda], lda, bj, ldb, &cj[i*ldc], ldc, alpha)
			return
		}
		for ; i < m; i++ {
			dot1x4AVX512(k, &a[i*lda], bj, ldb, &cj[i*ldc], alpha)
		}
	}
	for j := 0; j < n; j += 4 {
		jb := min(j, n-4)
		if jb == j {
			rows(&b[j*ldb], c[j:], ldc)
			continue
		}
		tmp := make([]float32, 4*m)
		rows(&b[jb*ldb], tmp, 4)
		for r := 0; r < m; r++ {
			row := c[r*ldc : r*ldc+n]
			for q := j - jb; q < 4; q++ {
				row[jb+q] += tmp[r*4+q]
			}
		}
	}
}
