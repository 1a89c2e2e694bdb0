//go:build amd64

package cpu

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"golang.org/x/sys/cpu"
)

// needAVX512 skips a test on machines that cannot run the AVX-512 variant.
func needAVX512(t testing.TB) {
	t.Helper()
	if !hasAVX512() {
		t.Skip("no AVX512F (or the OS does not save the ZMM state) on this machine")
	}
}

// TestAVX512Detected: when /proc/cpuinfo lists avx512f the variant must be
// offered (and be the default), so a detection regression does not silently
// fall back to AVX2. A CPU flag without OS support (XCR0) is reported, not
// failed.
func TestAVX512Detected(t *testing.T) {
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil || !bytes.Contains(info, []byte(" avx512f")) {
		t.Skip("no avx512f in /proc/cpuinfo")
	}
	t.Logf("x/sys/cpu: AVX512F %v BW %v VL %v DQ %v BF16 %v; variants %v",
		cpu.X86.HasAVX512F, cpu.X86.HasAVX512BW, cpu.X86.HasAVX512VL, cpu.X86.HasAVX512DQ, cpu.X86.HasAVX512BF16, Variants())
	if !cpu.X86.HasAVX512F {
		t.Skip("the CPU lists avx512f but x/sys/cpu reports no OS support (XCR0 without ZMM state)")
	}
	if vs := Variants(); vs[0] != VariantAVX512 || !slices.Contains(vs, VariantAVX2) {
		t.Fatalf("Variants() = %v, want avx512 first, then avx2", vs)
	}
	t.Setenv(KernelsEnv, "")
	if v := DefaultVariant(); v != VariantAVX512 {
		t.Fatalf("default variant %q, want avx512", v)
	}
	for _, v := range []string{VariantAVX512, VariantAVX2, VariantGeneric} {
		t.Setenv(KernelsEnv, v)
		if got := New(1).Variant(); got != v {
			t.Fatalf("%s=%s: New runs %q", KernelsEnv, v, got)
		}
	}
}

// avx512Shapes cross the 12x32 tile, the k block (256), the row block (192),
// the column block (2048), the 8-wide transposes (k%8) and the dot-product
// switch (16-lane k blocks and k%16 tails).
var avx512Shapes = [][3]int{ // m, k, n
	{1, 1, 1}, {12, 8, 32}, {11, 7, 31}, {13, 9, 33}, {12, 256, 32}, {24, 257, 64}, {25, 255, 65},
	{1, 15, 5}, {1, 16, 4}, {1, 17, 4}, {1, 31, 8}, {1, 33, 9}, {3, 47, 7}, {16, 100, 50}, {17, 100, 50}, {64, 513, 20},
	{191, 40, 70}, {192, 64, 96}, {193, 264, 33}, {250, 300, 100}, {36, 24, 2050}, {12, 520, 2080},
}

// TestAVX512GemmMatchesPlain holds the AVX-512 matmul to the triple loop for
// every transpose, beta 0 over a NaN-poisoned C and beta 0.3, at 1 and 2
// workers.
func TestAVX512GemmMatchesPlain(t *testing.T) {
	needAVX512(t)
	rng := rand.New(rand.NewPCG(7, 8))
	for _, w := range []int{1, 2} {
		be, err := NewVariant(w, VariantAVX512)
		if err != nil {
			t.Fatal(err)
		}
		gemmMatchesPlain(t, rng, be, w, avx512Shapes)
	}
}

// TestAVX512Strided runs the drivers on operands with row strides larger
// than the matrix (odd ones) in every layout, into a sub-rectangle of a
// NaN-poisoned C whose other elements must stay NaN.
func TestAVX512Strided(t *testing.T) {
	needAVX512(t)
	rng := rand.New(rand.NewPCG(9, 10))
	be, err := NewVariant(2, VariantAVX512)
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range [][3]int{{1, 9, 3}, {5, 17, 40}, {13, 33, 35}, {6, 40, 4}, {14, 520, 9}, {64, 515, 13}, {40, 300, 70}, {100, 64, 97}, {200, 270, 130}} {
		m, k, n := sh[0], sh[1], sh[2]
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			// A(i,p) and B(p,j) with padded leading dimensions.
			var a, b operand
			if tr[0] {
				a = operand{d: randSlice(rng, k*(m+3)), rs: 1, cs: m + 3}
			} else {
				a = operand{d: randSlice(rng, m*(k+5)), rs: k + 5, cs: 1}
			}
			if tr[1] {
				b = operand{d: randSlice(rng, n*(k+7)), rs: 1, cs: k + 7}
			} else {
				b = operand{d: randSlice(rng, k*(n+1)), rs: n + 1, cs: 1}
			}
			ldc, i0, j0 := n+9, 2, 3
			c := make([]float32, (i0+m+1)*ldc)
			for i := range c {
				c[i] = float32(math.NaN())
			}
			want := make([]float32, m*n)
			for i := 0; i < m; i++ {
				for j := 0; j < n; j++ {
					var s float64
					for p := 0; p < k; p++ {
						s += float64(a.d[i*a.rs+p*a.cs]) * float64(b.d[p*b.rs+j*b.cs])
					}
					want[i*n+j] = float32(0.5 * s)
					c[(i0+i)*ldc+j0+j] = 0
				}
			}
			be.gemmParallel(m, n, k, a, b, c[i0*ldc+j0:], ldc, 0.5)
			name := fmt.Sprintf("m%d k%d n%d trans %v", m, k, n, tr)
			got := make([]float32, m*n)
			for i := range c {
				r, q := i/ldc-i0, i%ldc-j0
				inside := r >= 0 && r < m && q >= 0 && q < n
				if inside {
					got[r*n+q] = c[i]
				} else if !math.IsNaN(float64(c[i])) {
					t.Fatalf("%s: wrote c[%d] outside the output", name, i)
				}
			}
			closeTo(t, name, got, want, k)
		}
	}
}

// TestPackT8x8 checks the transposing pack on its own, including that it
// writes only the eight columns of each k step it owns.
func TestPackT8x8(t *testing.T) {
	needAVX512(t)
	rng := rand.New(rand.NewPCG(11, 12))
	for _, k := range []int{8, 16, 64} {
		lds, ldd := k+3, 12
		src := randSlice(rng, 8*lds)
		dst := make([]float32, k*ldd+8)
		for i := range dst {
			dst[i] = -1
		}
		packT8x8(&dst[2], &src[0], lds, k, ldd)
		for i, x := range dst {
			p, j := (i-2)/ldd, (i-2)%ldd
			if i >= 2 && p < k && j < 8 {
				if x != src[j*lds+p] {
					t.Fatalf("k%d: dst[%d] = %g, want src[%d]", k, i, x, j*lds+p)
				}
			} else if x != -1 {
				t.Fatalf("k%d: dst[%d] written", k, i)
			}
		}
	}
}

// BenchmarkAVX512Peak measures the register-only AVX-512 FMA loop (16
// chains of 16-lane VFMADD231PS): the peak the 12x32 kernel is held to.
func BenchmarkAVX512Peak(b *testing.B) {
	needAVX512(b)
	const iters = 1 << 16
	c0 := cpuSeconds()
	for b.Loop() {
		fmaLoopAVX512(iters)
	}
	b.ReportMetric(float64(b.N)*iters*512/(cpuSeconds()-c0)/1e9, "GFLOP/cpu-s")
}

// BenchmarkAVX512MicroKernel: the 12x32 kernel with operands in L1.
func BenchmarkAVX512MicroKernel(b *testing.B) {
	needAVX512(b)
	for _, k := range []int{64, 256} {
		a, bb, c := make([]float32, k*mr512), make([]float32, k*nr512), make([]float32, mr512*nr512)
		b.Run(fmt.Sprintf("12x32_k%d", k), func(b *testing.B) {
			c0 := cpuSeconds()
			for b.Loop() {
				kern12x32AVX512(k, &a[0], &bb[0], &c[0], nr512, 1)
			}
			b.ReportMetric(float64(b.N)*2*mr512*nr512*float64(k)/(cpuSeconds()-c0)/1e9, "GFLOP/cpu-s")
		})
	}
	x, y, z := make([]float32, 3*512), make([]float32, 4*512), make([]float32, 16)
	b.Run("dot3x4_k512", func(b *testing.B) {
		c0 := cpuSeconds()
		for b.Loop() {
			dot3x4AVX512(512, &x[0], 512, &y[0], 512, &z[0], 4, 1)
		}
		b.ReportMetric(float64(b.N)*2*12*512/(cpuSeconds()-c0)/1e9, "GFLOP/cpu-s")
	})
	b.Run("dot4x4_k512", func(b *testing.B) {
		w := make([]float32, 4*512)
		c0 := cpuSeconds()
		for b.Loop() {
			dot4x4AVX512(512, &w[0], 512, &y[0], 512, &z[0], 4, 1)
		}
		b.ReportMetric(float64(b.N)*2*16*512/(cpuSeconds()-c0)/1e9, "GFLOP/cpu-s")
	})
	b.Run("dot1x4_k512", func(b *testing.B) {
		c0 := cpuSeconds()
		for b.Loop() {
			dot1x4AVX512(512, &x[0], &y[0], 512, &z[0], 1)
		}
		b.ReportMetric(float64(b.N)*2*4*512/(cpuSeconds()-c0)/1e9, "GFLOP/cpu-s")
	})
}

// BenchmarkVariantsOnShapes compares the assembly variants on bench/kernels'
// shapes (op nt: C = A*W^T, nn: A*B, tn: A^T*B), 2 workers, GFLOP per
// CPU-second and per wall second.
func BenchmarkVariantsOnShapes(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	shapes := []struct {
		op      string
		m, k, n int
	}{
		{"nt", 1, 1024, 3072}, {"nt", 16, 1024, 3072}, {"nt", 1, 3072, 1024}, {"nt", 16, 512, 1536},
		{"nt", 128, 128, 384}, {"nt", 1024, 128, 384}, {"nt", 512, 512, 1536}, {"nt", 512, 1024, 1024},
		{"nt", 512, 1024, 3072}, {"nt", 4096, 1024, 1024}, {"nn", 1024, 384, 128}, {"nn", 512, 3072, 1024},
		{"tn", 384, 1024, 128}, {"tn", 1024, 512, 1024},
	}
	for _, sh := range shapes {
		g := gemm{m: sh.m, n: sh.n, k: sh.k, a: randSlice(rng, sh.m*sh.k), b: randSlice(rng, sh.k*sh.n),
			c: make([]float32, sh.m*sh.n), transA: sh.op == "tn", transB: sh.op == "nt", alpha: 1}
		for _, v := range archKernels() {
			be, err := NewVariant(2, v.name)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("%s_m%d_k%d_n%d/%s", sh.op, sh.m, sh.k, sh.n, v.name), func(b *testing.B) {
				c0 := cpuSeconds()
				for b.Loop() {
					be.gemmFast(g)
				}
				flops := 2 * float64(sh.m*sh.n*sh.k) * float64(b.N)
				b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				b.ReportMetric(flops/(cpuSeconds()-c0)/1e9, "GFLOP/cpu-s")
			})
		}
	}
}
