package model

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hone-rl/hone/kernels"
)

// TestBaseMatMulAutocast: with autocast and a bf16 weight, a base GEMM is
// the product of the activation rounded to bf16 (round to nearest even) and
// the weight: equal, bit for bit on the CPU, to the float32 GEMM of the
// rounded values, and not to exact mode's; with autocast off, or a float32
// weight, it is exact mode's product.
func TestBaseMatMulAutocast(t *testing.T) {
	m := newTestModel(t, ArchLlama)
	be := m.be
	rng := rand.New(rand.NewPCG(5, 5))
	const rows, in, out = 7, 32, 48
	x := make([]float32, rows*in)
	rx := make([]float32, len(x))
	for i := range x {
		x[i] = float32(rng.NormFloat64())
		rx[i] = kernels.FromBF16(kernels.ToBF16(x[i]))
	}
	wHost := make([]float32, out*in)
	for i := range wHost {
		wHost[i] = float32(rng.NormFloat64())
	}
	product := func(x []float32, w kernels.Tensor, autocast bool) []float32 {
		m.SetAutocast(autocast)
		c := be.New(rows, out)
		m.baseMatMul(c, be.Upload(x, rows, in), w, true, 0)
		got := make([]float32, rows*out)
		be.Download(got, c)
		return got
	}
	wb, wf := be.UploadT(kernels.BF16, wHost, out, in), be.Upload(wHost, out, in)
	exact, rounded := product(x, wb, false), product(rx, wb, false)
	if slices.Equal(exact, rounded) {
		t.Fatal("rounding the activation changed nothing: the test cannot tell autocast from exact mode")
	}
	tests := []struct {
		name     string
		w        kernels.Tensor
		autocast bool
		want     []float32
	}{
		{"bf16 weight, autocast", wb, true, rounded},
		{"bf16 weight, exact", wb, false, exact},
		{"f32 weight, autocast does nothing", wf, true, product(x, wf, false)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := product(x, tc.w, tc.autocast); !slices.Equal(got, tc.want) {
				t.Errorf("product differs from the expected one")
			}
		})
	}
}

// TestAutocastTraining: a LoRA step with bf16 weights and autocast trains
// (finite loss, gradients) and lands near exact mode's step, but not on it;
// with float32 weights autocast changes nothing.
func TestAutocastTraining(t *testing.T) {
	seqs := [][]int32{{5, 6, 7, 8, 9, 10, 11}, {17, 2, 33, 60, 0}}
	mask := [][]float32{{0, 1, 1, 1, 1, 1}, {1, 1, 0, 1}}
	step := func(dt kernels.DType, autocast bool) (float64, []float32) {
		m := newTestModel(t, ArchQwen3)
		if err := m.SetWeightDType(dt); err != nil {
			t.Fatal(err)
		}
		m.SetAutocast(autocast)
		a, err := NewAdapter(m, "a", AdapterConfig{Rank: 4, Alpha: 8}, 1)
		if err != nil {
			t.Fatal(err)
		}
		randomizeB(t, m, a)
		loss, act, dlogp := maskedLoss(t, m, seqs, mask, a)
		g := m.NewGrads(a, false)
		if err := m.Backward(context.Background(), act, dlogp, g); err != nil {
			t.Fatal(err)
		}
		var flat []float32
		for _, p := range g.Adapter() {
			d := make([]float32, p.Tensor.Len())
			m.be.Download(d, p.Tensor)
			flat = append(flat, d...)
		}
		return loss, flat
	}
	l32, g32 := step(kernels.F32, false)
	l32a, g32a := step(kernels.F32, true)
	if l32 != l32a || !slices.Equal(g32, g32a) {
		t.Errorf("autocast changed a float32 model's step: loss %g vs %g", l32a, l32)
	}
	lx, gx := step(kernels.BF16, false)
	la, ga := step(kernels.BF16, true)
	rel := relNorm(ga, gx)
	t.Logf("autocast against exact mode: loss %.7g vs %.7g, gradients relative %.2g", la, lx, rel)
	if la == lx || !(rel > 1e-4 && rel < 0.2) {
		t.Errorf("autocast step: loss %g (exact %g), gradients %.2g relative from exact mode; want a small, nonzero change", la, lx, rel)
	}
}

// relNorm is |got-want| / |want| in the Euclidean norm.
func relNorm(got, want []float32) float64 {
	var num, den float64
	for i := range want {
		d := float64(got[i] - want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num / den)
}
