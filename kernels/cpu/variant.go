package cpu

import (
	"fmt"
	"os"
	"slices"
)

// Kernel variants. Every variant computes the same operations and passes the
// same conformance suite; they differ in speed only.
const (
	// VariantGeneric is plain Go: a register-tiled matmul and scalar loops
	// (the only variant off x86-64).
	VariantGeneric = "generic"
	// VariantAVX2 is Go assembly for x86-64 with AVX2 and FMA: packed,
	// cache-blocked 6x16 matmul micro-kernels and vectorised hot loops.
	VariantAVX2 = "avx2"
	// VariantAVX512 is the AVX2 variant with AVX-512 matmul kernels (12x32
	// packed tiles in 32 ZMM registers, 16-lane dot products), for CPUs and
	// OSes that run AVX512F.
	VariantAVX512 = "avx512"
)

// KernelsEnv names the environment variable that forces a variant
// (HONE_KERNELS=generic|avx2|avx512); unset or empty picks the fastest one the CPU
// supports.
const KernelsEnv = "HONE_KERNELS"

// simdKernels is one family of assembly kernels; nil means generic Go.
type simdKernels struct {
	name string
	// kern6x16 adds alpha times a packed 6-row A panel times a packed
	// 16-column B panel (k steps) into a 6x16 tile of C with rows ldc apart.
	kern6x16 func(k int, a, b, c *float32, ldc int, alpha float32)
	// dot3x4 adds alpha times the dot products of three k-contiguous rows of
	// A (lda apart) with four of B (ldb apart) into a 3x4 tile of C.
	dot3x4 func(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, alpha float32)
	// dot1x4 is dot3x4 for one row of A.
	dot1x4 func(k int, a, b *float32, ldb int, c *float32, alpha float32)
	// packNT8 transposes eight k-contiguous rows (lds apart) into half of a
	// 16-column B panel: dst[16p+j] = src[j*lds+p], k a multiple of 8.
	packNT8 func(dst, src *float32, lds, k int)
	// packA6 packs six k-contiguous rows (lds apart) into a 6-row A panel:
	// dst[6p+i] = src[i*lds+p], k a multiple of 8; it writes dst[6k] and
	// dst[6k+1] too.
	packA6 func(dst, src *float32, lds, k int)

	// tileM x tileN is the tile of C packFn's micro-kernel fills (the unit
	// gemmParallel splits C by); packFn, when set, replaces the 6x16 packed
	// driver (packed) with the variant's own. Zero and nil: 6x16, packed.
	tileM, tileN int
	packFn       func(m, n, k int, a, b operand, c []float32, ldc int, alpha float32)
	// dotFn, when set, replaces dotNT's row grouping for n >= 4.
	dotFn func(s *simdKernels, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, alpha float32)

	// Elementwise kernels over n values, n a multiple of 8 (callers finish
	// the tails); see elementwise_simd.go.
	exp          func(dst, src *float32, n int, shift float32) float32
	max          func(x *float32, n int) float32
	scale        func(x *float32, n int, s float32)
	silu         func(dst, x *float32, n int)
	swiglu       func(dst, gate, up *float32, n int)
	swigluBack   func(dgate, dup, dout, gate, up *float32, n int)
	weightedRows func(o *float32, hd int, p *float32, rows int, v *float32, ldv int)
}

// Variants lists the variants this machine can run, fastest first; the
// generic one is always last.
func Variants() []string {
	var v []string
	for _, s := range archKernels() {
		v = append(v, s.name)
	}
	return append(v, VariantGeneric)
}

// DefaultVariant is the variant New uses: $HONE_KERNELS when it names one
// this machine runs, else the fastest.
func DefaultVariant() string {
	if v := os.Getenv(KernelsEnv); v != "" && slices.Contains(Variants(), v) {
		return v
	}
	return Variants()[0]
}

// NewVariant returns a CPU backend running the named variant (see Variants),
// with workers as in New.
func NewVariant(workers int, variant string) (*Backend, error) {
	be := New(workers)
	if err := be.setVariant(variant); err != nil {
		return nil, err
	}
	return be, nil
}

func (be *Backend) setVariant(variant string) error {
	if variant == VariantGeneric {
		be.simd = nil
		return nil
	}
	for _, s := range archKernels() {
		if s.name == variant {
			be.simd = s
			return nil
		}
	}
	return fmt.Errorf("kernels/cpu: variant %q is not available on this machine (have %v)", variant, Variants())
}

// Variant reports which kernel variant be runs.
func (be *Backend) Variant() string {
	if be.simd == nil {
		return VariantGeneric
	}
	return be.simd.name
}

// tile is the register tile of C of s's packed driver: rows, columns.
func (s *simdKernels) tile() (int, int) {
	if s.packFn != nil {
		return s.tileM, s.tileN
	}
	return mr, nr
}

// runPacked runs s's packed driver.
func (s *simdKernels) runPacked(m, n, k int, a, b operand, c []float32, ldc int, alpha float32) {
	if s.packFn != nil {
		s.packFn(m, n, k, a, b, c, ldc, alpha)
		return
	}
	s.packed(m, n, k, a, b, c, ldc, alpha)
}
