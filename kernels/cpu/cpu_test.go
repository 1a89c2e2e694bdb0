package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hone-rl/hone/kernels/conformance"
)

// variants returns a backend per kernel variant this machine runs.
func variants(t testing.TB, workers int) []*Backend {
	var out []*Backend
	for _, v := range Variants() {
		be, err := NewVariant(workers, v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, be)
	}
	return out
}

func TestConformance(t *testing.T) {
	t.Logf("variants on this machine: %v (default %s)", Variants(), DefaultVariant())
	for _, w := range []int{1, 2} {
		for _, be := range variants(t, w) {
			t.Run(fmt.Sprintf("%s/workers=%d", be.Variant(), w), func(t *testing.T) { conformance.Run(t, be) })
		}
	}
}

func TestVariantSelection(t *testing.T) {
	vs := Variants()
	if vs[len(vs)-1] != VariantGeneric {
		t.Fatalf("Variants() = %v, want generic last", vs)
	}
	if _, err := NewVariant(1, "no-such-variant"); err == nil {
		t.Fatal("unknown variant accepted")
	}
	t.Setenv(KernelsEnv, VariantGeneric)
	if got := New(1).Variant(); got != VariantGeneric {
		t.Fatalf("%s=generic: New runs %q", KernelsEnv, got)
	}
	t.Setenv(KernelsEnv, "")
	if got := New(1).Variant(); got != vs[0] {
		t.Fatalf("default variant %q, want the fastest %q", got, vs[0])
	}
}

// matmulShapes cross the tile edges (6x16 and 3x4 tiles, 4x2 generic), the
// k block (256), the row block (144), the column block (2048), the
// dot-product/packed switch (16 rows; 64 at k >= 512) and the parallel splits.
var matmulShapes = [][3]int{ // m, k, n
	{1, 1, 1}, {4, 4, 4}, {1, 1000, 33}, {2, 7, 5}, {3, 9, 4}, {9, 513, 7}, {16, 64, 19}, {17, 64, 19}, {48, 600, 9}, {65, 600, 9}, {2, 17, 3},
	{130, 70, 5}, {5, 300, 130}, {67, 257, 66}, {6, 256, 16}, {12, 512, 32}, {145, 33, 17}, {150, 600, 47},
	{7, 300, 2100}, {20, 5, 2053}, {300, 17, 3},
}

// TestGemmFastMatchesPlain holds every variant's matmul to the readable
// triple loop, for every transpose, with beta 0 over a NaN-poisoned C and
// with beta != 0.
func TestGemmFastMatchesPlain(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, w := range []int{1, 2} {
		for _, be := range variants(t, w) {
			gemmMatchesPlain(t, rng, be, w, matmulShapes)
		}
	}
}

// gemmMatchesPlain compares be's matmul with gemmPlain on every shape
// (m, k, n), for every transpose, with beta 0 over a NaN-poisoned C and
// beta 0.3.
func gemmMatchesPlain(t *testing.T, rng *rand.Rand, be *Backend, w int, shapes [][3]int) {
	t.Helper()
	for _, sh := range shapes {
		m, k, n := sh[0], sh[1], sh[2]
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			for _, beta := range []float32{0, 0.3} {
				a, b, c := randSlice(rng, m*k), randSlice(rng, k*n), randSlice(rng, m*n)
				if beta == 0 {
					for i := range c {
						c[i] = float32(math.NaN())
					}
				}
				want := append([]float32(nil), c...)
				got := append([]float32(nil), c...)
				g := gemm{m: m, n: n, k: k, a: a, b: b, transA: tr[0], transB: tr[1], alpha: 0.7, beta: beta}
				g.c = want
				gemmPlain(g)
				g.c = got
				be.gemmFast(g)
				name := fmt.Sprintf("%s/w%d m%d k%d n%d trans %v beta %g", be.Variant(), w, m, k, n, tr, beta)
				closeTo(t, name, got, want, k)
			}
		}
	}
}

// TestGemmNTStrided holds the strided A*B^T entry point (attention's) to
// the triple loop with row strides larger than k and a sub-rectangle of C.
func TestGemmNTStrided(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, be := range variants(t, 1) {
		for _, sh := range [][3]int{{1, 64, 7}, {3, 64, 4}, {5, 33, 9}, {16, 128, 40}, {17, 128, 40}, {49, 20, 6}, {2, 9, 2}, {40, 37, 23}, {100, 300, 70}} {
			m, k, n := sh[0], sh[1], sh[2]
			lda, ldb, ldc := k+3, k+5, n+7
			i0, j0 := 1, 2
			rowsA, rowsB := i0+m, j0+n
			a, b := randSlice(rng, rowsA*lda), randSlice(rng, rowsB*ldb)
			c := randSlice(rng, rowsA*ldc)
			want := append([]float32(nil), c...)
			for i := i0; i < i0+m; i++ {
				for j := j0; j < j0+n; j++ {
					var s float32
					for p := 0; p < k; p++ {
						s += a[i*lda+p] * b[j*ldb+p]
					}
					want[i*ldc+j] += 0.5 * s
				}
			}
			be.gemmNT(ntArgs{c: c, ldc: ldc, a: a, lda: lda, b: b, ldb: ldb, k: k, alpha: 0.5}, i0, i0+m, j0, j0+n)
			closeTo(t, fmt.Sprintf("%s m%d k%d n%d", be.Variant(), m, k, n), c, want, k)
		}
	}
}

func closeTo(t *testing.T, name string, got, want []float32, k int) {
	t.Helper()
	for i := range want {
		d := math.Abs(float64(got[i] - want[i]))
		if !(d <= 1e-4*math.Sqrt(float64(k))*(1+math.Abs(float64(want[i])))) {
			t.Fatalf("%s: c[%d] = %g, plain %g", name, i, got[i], want[i])
		}
	}
}

func randSlice(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}
