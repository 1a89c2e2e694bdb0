package conformance

import (
	"math"

	"github.com/hone-rl/hone/kernels"
)

// convert is the Convert group: float32 to bf16 equals the float64
// rounding (roundBF16) and kernels.ToBF16 bit for bit, ties to even,
// infinities, subnormals and overflow included; NaN stays NaN; bf16 to
// float32 is exact; equal types copy; views convert in place; every
// element of the destination is written (it starts as NaN); lengths must
// agree. Then the autocast product the model forms with it: an activation
// converted to bf16 times a bf16 weight equals the float64 product of the
// rounded operands, also from views at odd offsets.
func (s *suite) convert(t T) {
	be := s.be
	special := []float32{0, float32(math.Copysign(0, -1)), 1, -2, 1 + 0x1p-8, 1 + 3*0x1p-8, 1 + 0x1p-8 + 0x1p-20,
		-(1 + 0x1p-8), 3.14159265, -1e-3, 6e4, math.MaxFloat32, -math.MaxFloat32, float32(math.Inf(1)),
		float32(math.Inf(-1)), 0x1p-126, 0x1p-130, 1e-40, -1e-45}
	x := append(special, s.randn(300)...)
	want := roundAll(x)
	for i, v := range x {
		if got := kernels.FromBF16(kernels.ToBF16(v)); got != want[i] && !(math.IsNaN(float64(got)) && math.IsNaN(float64(want[i]))) {
			t.Errorf("reference disagreement at %g: kernels.ToBF16 %g, float64 rounding %g", v, got, want[i])
		}
	}
	src := s.up(x, len(x))
	dst := be.UploadT(kernels.BF16, s.nans(len(x)), len(x))
	be.Convert(dst, src)
	if dst.DType() != kernels.BF16 {
		t.Fatalf("convert changed the destination's type to %v", dst.DType())
	}
	exact(t, "convert f32 to bf16 (round to nearest even)", s.down(dst), want)
	back := s.poisoned(len(x))
	be.Convert(back, dst)
	exact(t, "convert bf16 to f32 (exact)", s.down(back), want)

	nan := be.NewT(kernels.BF16, 2)
	be.Convert(nan, s.up([]float32{float32(math.NaN()), float32(-math.NaN())}, 2))
	for i, v := range s.down(nan) {
		if !math.IsNaN(float64(v)) {
			t.Errorf("convert of NaN [%d] = %g, want NaN", i, v)
		}
	}

	// Equal types copy; views convert just their elements; shapes may
	// differ when lengths agree.
	same := s.poisoned(len(x))
	be.Convert(same, src)
	exact(t, "convert f32 to f32 (copy)", s.down(same), x)
	sameB := be.UploadT(kernels.BF16, s.nans(len(x)), len(x))
	be.Convert(sameB, dst)
	exact(t, "convert bf16 to bf16 (copy)", s.down(sameB), want)
	part := be.UploadT(kernels.BF16, s.nans(30), 30)
	be.Convert(be.View(part, 10, 2, 5), be.View(src, 40, 5, 2))
	got := s.down(part)
	exact(t, "convert into a bf16 view", got[10:20], want[40:50])
	for i, v := range append(got[:10:10], got[20:]...) {
		if !math.IsNaN(float64(v)) {
			t.Errorf("convert into a view wrote element %d outside it: %g", i, v)
			break
		}
	}
	panics(t, "convert of unequal lengths", func() { be.Convert(be.NewT(kernels.BF16, 3), s.up(x[:4], 4)) })

	// The autocast product: activation [m,k] rounded by Convert, bf16 weight
	// [n,k] transposed, float32 result.
	const m, k, n = 9, 37, 11
	a, w := s.randn(m*k), s.randn(n*k)
	ab := be.NewT(kernels.BF16, m, k)
	be.Convert(ab, s.up(a, m, k))
	c := s.poisoned(m, n)
	be.MatMul(c, ab, be.UploadT(kernels.BF16, w, n, k), false, true, 1, 0)
	near(t, "autocast matmul (convert, then bf16 x bf16)", s.down(c),
		refMatMul(roundAll(a), roundAll(w), nil, m, n, k, false, true, 1, 0), 1e-4*math.Sqrt(k), 1e-5)

	// The same from views one element in (2-byte aligned operands: a
	// device GEMM must not assume more).
	abig, wbig := be.NewT(kernels.BF16, m*k+1), be.UploadT(kernels.BF16, append([]float32{7}, w...), n*k+1)
	be.Convert(be.View(abig, 1, m, k), s.up(a, m, k))
	c1 := s.poisoned(m*n + 1)
	be.MatMul(be.View(c1, 1, m, n), be.View(abig, 1, m, k), be.View(wbig, 1, n, k), false, true, 1, 0)
	near(t, "autocast matmul from views at odd offsets", s.down(c1)[1:],
		refMatMul(roundAll(a), roundAll(w), nil, m, n, k, false, true, 1, 0), 1e-4*math.Sqrt(k), 1e-5)
}

// nans returns n NaNs (a poisoned destination of any type).
func (s *suite) nans(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(math.NaN())
	}
	return x
}
