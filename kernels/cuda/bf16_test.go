//go:build cgo && !cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hone-rl/hone/kernels"
)

// bf16Value is the value of bf16 bits h (sign aside), reading the all-ones
// exponent with a zero mantissa as 2^128 (the first value past the largest
// finite one, which is what rounding compares against).
func bf16Value(h uint16) float64 {
	e, m := int(h>>7&0xff), float64(h&0x7f)
	if e == 0 {
		return m / 128 * math.Ldexp(1, -126)
	}
	return (1 + m/128) * math.Ldexp(1, e-127)
}

// nearestBF16 rounds f to bf16 by comparing the two candidates around it
// (ties to the even one): a reference independent of the bit trick the
// kernels use.
func nearestBF16(f float32) uint16 {
	u := math.Float32bits(f)
	sign, mag := uint16(u>>16)&0x8000, u&0x7fffffff
	lo := uint16(mag >> 16)
	if mag&0xffff == 0 {
		return sign | lo
	}
	hi := lo + 1
	x := float64(math.Float32frombits(mag))
	dl, dh := x-bf16Value(lo), bf16Value(hi)-x
	switch {
	case dl < dh:
		return sign | lo
	case dh < dl:
		return sign | hi
	case lo&1 == 0:
		return sign | lo
	}
	return sign | hi
}

// TestBF16Conversion: the device conversion rounds to nearest, ties to
// even, for ties, near-overflow, subnormals, signed zeros and infinities,
// keeps NaN a NaN, and widening is exact.
func TestBF16Conversion(t *testing.T) {
	be, err := NewEmulated(VariantReadable)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	vals := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 1 + 1.0/256, 1 + 3.0/256, 1 + 1.0/256 + 1.0/65536,
		-(1 + 3.0/256), math.MaxFloat32, -math.MaxFloat32, 3.3961776e38, float32(math.Inf(1)), float32(math.Inf(-1)),
		math.SmallestNonzeroFloat32, 1.1754942e-38, 1e-40, -1e-40, 65504, 3.14159265, -2.7182818}
	rng := rand.New(rand.NewPCG(4, 4))
	for i := 0; i < 2000; i++ {
		vals = append(vals, math.Float32frombits(rng.Uint32()&0x7f7fffff|uint32(rng.IntN(2))<<31))
	}
	nan := float32(math.NaN())
	vals = append(vals, nan)
	bt := be.uploadBF16(vals, len(vals))
	bits := be.bf16Bits(bt)
	wide := be.widenBF16(bt)
	back := make([]float32, len(vals))
	be.Download(back, wide)
	for i, f := range vals {
		if f != f {
			if back[i] == back[i] {
				t.Errorf("NaN became %g (bits %#04x)", back[i], bits[i])
			}
			continue
		}
		if want := nearestBF16(f); bits[i] != want {
			t.Errorf("bf16(%g = %#08x) = %#04x, want %#04x", f, math.Float32bits(f), bits[i], want)
		}
		if got := math.Float32bits(back[i]); got != uint32(bits[i])<<16 {
			t.Errorf("widening %#04x gave %#08x", bits[i], got)
		}
	}
}

// TestMatMulBF16: bf16 inputs, float32 accumulation, through cuBLASLt
// (the shim's cublasLtMatmul) and the row-major mapping's descriptors, for
// every transpose, batched with
// a shared B, against float64 products of the bf16-rounded inputs (so the
// tolerance is the float32 one: rounding the inputs is not an error).
func TestMatMulBF16(t *testing.T) {
	be, err := NewEmulated(VariantReadable)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	rng := rand.New(rand.NewPCG(6, 6))
	randn := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	rounded := func(x []float32) []float64 {
		y := make([]float64, len(x))
		for i, v := range x {
			y[i] = float64(math.Float32frombits(uint32(nearestBF16(v)) << 16))
		}
		return y
	}
	for _, sh := range [][4]int{{1, 1, 1, 1}, {1, 5, 9, 13}, {1, 70, 300, 37}, {3, 5, 7, 6}} {
		batch, m, k, n := sh[0], sh[1], sh[2], sh[3]
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				a, b, c0 := randn(batch*m*k), randn(k*n), randn(batch*m*n)
				ashape := []int{m, k}
				if ta {
					ashape = []int{k, m}
				}
				bshape := []int{k, n}
				if tb {
					bshape = []int{n, k}
				}
				cshape := []int{m, n}
				if batch > 1 {
					ashape = append([]int{batch}, ashape...)
					cshape = append([]int{batch}, cshape...)
				}
				ct := be.Upload(c0, cshape...)
				be.matMulBF16(ct, be.uploadBF16(a, ashape...), be.uploadBF16(b, bshape...), ta, tb, 0.5, 0.25)
				got := make([]float32, len(c0))
				be.Download(got, ct)
				ar, br := rounded(a), rounded(b)
				for bi := 0; bi < batch; bi++ {
					for i := 0; i < m; i++ {
						for j := 0; j < n; j++ {
							var s float64
							for p := 0; p < k; p++ {
								av := ar[bi*m*k+i*k+p]
								if ta {
									av = ar[bi*m*k+p*m+i]
								}
								bv := br[p*n+j]
								if tb {
									bv = br[j*k+p]
								}
								s += av * bv
							}
							idx := bi*m*n + i*n + j
							want := 0.5*s + 0.25*float64(c0[idx])
							if d := math.Abs(float64(got[idx]) - want); !(d <= 1e-4*math.Sqrt(float64(k))+1e-5*math.Abs(want)) {
								t.Fatalf("%s: c[%d] = %g, want %g", fmt.Sprintf("batch %d m%d k%d n%d ta=%v tb=%v", batch, m, k, n, ta, tb), idx, got[idx], want)
							}
						}
					}
				}
			}
		}
	}
}

// TestLtArgumentChecks: the shim's cuBLASLt refuses what cublasLt.h says
// the library refuses, so hone's descriptors are checked as cublasSgemm's
// arguments are: each case breaks one thing of a valid product.
func TestLtArgumentChecks(t *testing.T) {
	const (
		ok             = 0
		notInitialized = 1
		invalidValue   = 7
		notSupported   = 15
	)
	for _, tc := range []struct {
		which int
		name  string
		want  int
	}{
		{0, "valid product", ok},
		{1, "lda under the rows of A", invalidValue},
		{2, "ld of D under its rows", invalidValue},
		{3, "transa not an operation", invalidValue},
		{4, "transa T on a layout for N (dimensions do not chain)", invalidValue},
		{5, "batch count of B differs", invalidValue},
		{6, "fp32 A", notSupported},
		{7, "attribute of the wrong size", invalidValue},
		{8, "workspace smaller than the algorithm's", invalidValue},
		{9, "D less aligned than the heuristic was told", invalidValue},
		{10, "transposed C", notSupported},
		{11, "in place with two layouts", invalidValue},
		{12, "no handle", notInitialized},
		{13, "D less aligned, and the heuristic told so", ok},
	} {
		if got := emuLtCheck(tc.which); got != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestMatMulBF16Lt: the cuBLASLt path's context state and edge cases: the
// heuristic runs once per GEMM shape (cached per context), views at any
// offset (operands less aligned than the heuristic's default of 256 bytes)
// multiply right, and k == 0 sets C = beta*C.
func TestMatMulBF16Lt(t *testing.T) {
	be, err := NewEmulated(VariantReadable)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	vals := func(n int, f func(i int) float32) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = f(i)
		}
		return x
	}
	const m, k, n = 3, 4, 5
	a := be.uploadBF16(vals(m*k+1, func(i int) float32 { return float32(i%7) - 3 }), m*k+1)
	w := be.uploadBF16(vals(n*k+3, func(i int) float32 { return float32(i%5) - 2 }), n*k+3)
	want := func(ao, wo int) []float32 {
		ah, wh := be.bf16Bits(a), be.bf16Bits(w)
		out := make([]float32, m*n)
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				for p := 0; p < k; p++ {
					out[i*n+j] += kernels.FromBF16(ah[ao+i*k+p]) * kernels.FromBF16(wh[wo+j*k+p])
				}
			}
		}
		return out
	}
	run := func(ao, wo int) []float32 {
		c := be.New(m, n)
		be.MatMul(c, be.View(a, ao, m, k), be.View(w, wo, n, k), false, true, 1, 0)
		got := make([]float32, m*n)
		be.Download(got, c)
		return got
	}
	for _, off := range [][2]int{{0, 0}, {1, 0}, {0, 3}, {1, 1}} {
		if got, w := run(off[0], off[1]), want(off[0], off[1]); fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("views at offsets %v: %v, want %v", off, got, w)
		}
	}
	if err := be.Err(); err != nil {
		t.Fatal(err)
	}
	// Four alignments of one shape, each asked once, then cached.
	algos, asked := be.ltAlgos(), be.ltHeuristics()
	run(0, 0)
	run(1, 1)
	if be.ltAlgos() != algos || be.ltHeuristics() != asked || algos != 4 {
		t.Errorf("heuristic cache: %d shapes after four, %d queries then %d; want 4 and no new query", algos, asked, be.ltHeuristics())
	}
	c := be.Upload(vals(m*n, func(i int) float32 { return float32(i) }), m, n)
	be.MatMul(c, be.NewT(kernels.BF16, m, 0), be.NewT(kernels.BF16, 0, n), false, false, 1, 0.5)
	got := make([]float32, m*n)
	be.Download(got, c)
	for i, v := range got {
		if v != 0.5*float32(i) {
			t.Fatalf("k == 0 with beta 0.5: c[%d] = %g, want %g", i, v, 0.5*float32(i))
		}
	}
}
