package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// The assembly elementwise kernels against the generic code they replace.

func TestSIMDExp(t *testing.T) {
	for _, s := range archKernels() {
		x := []float32{0, 1, -1, 0.5, -0.5, 10, -10, 30, -30, 80, -80, 87, -87, -87.3, -87.4, -88, -100, -1000,
			float32(math.Inf(-1)), 88, 1e-8, -1e-8, 3.3, -17.25}
		for i := range 200 {
			x = append(x, float32(i)*0.7-70)
		}
		for len(x)%8 != 0 {
			x = append(x, 0)
		}
		got := make([]float32, len(x))
		s.exp(&got[0], &x[0], len(x), 0)
		for i, v := range x {
			want := math.Exp(float64(v))
			if want < 1.2e-38 { // below float32's normal range: flushed to 0
				if got[i] != 0 && float64(got[i]) > 1.2e-38 {
					t.Errorf("%s: exp(%g) = %g, want ~0", s.name, v, got[i])
				}
				continue
			}
			if rel := math.Abs(float64(got[i])-want) / want; rel > 3e-7 {
				t.Errorf("%s: exp(%g) = %g, want %g (rel %.2g)", s.name, v, got[i], want, rel)
			}
		}
		nan := []float32{float32(math.NaN()), 0, 0, 0, 0, 0, 0, 0}
		s.exp(&nan[0], &nan[0], 8, 0)
		if !math.IsNaN(float64(nan[0])) {
			t.Errorf("%s: exp(NaN) = %g", s.name, nan[0])
		}
	}
}

func TestSIMDElementwise(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	gen := New(1)
	if err := gen.setVariant(VariantGeneric); err != nil {
		t.Fatal(err)
	}
	for _, be := range variants(t, 1) {
		for _, n := range []int{1, 7, 8, 9, 16, 31, 64, 100, 1027} {
			name := fmt.Sprintf("%s n%d", be.Variant(), n)
			x := randSlice(rng, n)
			for i := range x {
				x[i] *= 4
			}
			// softmax, with a spread that underflows some terms
			want, got := append([]float32(nil), x...), append([]float32(nil), x...)
			got[0], want[0] = 60, 60
			softmax(want)
			be.softmax(got)
			closeRel(t, name+" softmax", got, want, 1e-6)

			g, u, do := randSlice(rng, n), randSlice(rng, n), randSlice(rng, n)
			w1, g1 := make([]float32, n), make([]float32, n)
			gen.silu(w1, g)
			be.silu(g1, g)
			closeRel(t, name+" silu", g1, w1, 1e-6)
			gen.swiglu(w1, g, u)
			be.swiglu(g1, g, u)
			closeRel(t, name+" swiglu", g1, w1, 1e-6)
			wdg, wdu, gdg, gdu := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
			gen.swigluBackward(wdg, wdu, do, g, u)
			be.swigluBackward(gdg, gdu, do, g, u)
			closeRel(t, name+" swiglu backward dgate", gdg, wdg, 1e-6)
			closeRel(t, name+" swiglu backward dup", gdu, wdu, 1e-6)
		}
		for _, hd := range []int{1, 8, 12, 32, 40, 64, 72, 128} {
			for _, rows := range []int{1, 3, 17} {
				ld := hd + 5
				p, v := randSlice(rng, rows), randSlice(rng, rows*ld)
				want, got := make([]float32, hd), make([]float32, hd)
				for i := range got {
					got[i] = float32(math.NaN())
				}
				weightedRows(want, p, v, ld)
				be.weightedRows(got, p, v, ld)
				closeRel(t, fmt.Sprintf("%s weightedRows hd%d rows%d", be.Variant(), hd, rows), got, want, 1e-5)
			}
		}
	}
}

func closeRel(t *testing.T, name string, got, want []float32, tol float64) {
	t.Helper()
	for i := range want {
		d := math.Abs(float64(got[i] - want[i]))
		if !(d <= tol*(1+math.Abs(float64(want[i])))) {
			t.Fatalf("%s: [%d] = %g, want %g", name, i, got[i], want[i])
		}
	}
}
