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
		xo := m.operand(be.Upload(x, rows, in))
		m.baseMatMul(c, &xo, w, true, 0)
		xo.free()
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

// loraCase is one module of a bf16 test model with a rank-4 adapter, and
// random float32 inputs and output gradients, for the LoRA GEMMs'
// autocast tests, with host copies of everything.
type loraCase struct {
	m             *Model
	a             *Adapter
	mod           Module
	rows, in, out int
	x, dy         []float32 // [rows, in], [rows, out]
	w, la, lb     []float32 // W [out, in] (the stored bf16 values), A [rank, in], B [out, rank]
}

func newLoRACase(t *testing.T) *loraCase {
	t.Helper()
	m := newTestModel(t, ArchQwen3)
	if err := m.SetWeightDType(kernels.BF16); err != nil {
		t.Fatal(err)
	}
	a, err := NewAdapter(m, "a", AdapterConfig{Rank: 4, Alpha: 8}, 1)
	if err != nil {
		t.Fatal(err)
	}
	randomizeB(t, m, a)
	c := &loraCase{m: m, a: a, mod: ModGate, rows: 9}
	c.out, c.in = m.cfg.Dims(c.mod)
	rng := rand.New(rand.NewPCG(11, 12))
	normal := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	c.x, c.dy = normal(c.rows*c.in), normal(c.rows*c.out)
	down := func(x kernels.Tensor) []float32 {
		d := make([]float32, x.Len())
		m.be.Download(d, x)
		return d
	}
	lw := a.Layers[0][c.mod]
	c.w, c.la, c.lb = down(m.layers[0].w[c.mod]), down(lw.A), down(lw.B)
	return c
}

// matmul64 is op(a)*op(b) in float64 for row-major host matrices: a is
// [m,k] ([k,m] with ta), b is [k,n] ([n,k] with tb).
func matmul64(a, b []float64, m, k, n int, ta, tb bool) []float64 {
	c := make([]float64, m*n)
	for i := range m {
		for j := range n {
			var s float64
			for p := range k {
				av, bv := a[i*k+p], b[p*n+j]
				if ta {
					av = a[p*m+i]
				}
				if tb {
					bv = b[j*k+p]
				}
				s += av * bv
			}
			c[i*n+j] = s
		}
	}
	return c
}

// widen64 returns v in float64, rounded to bf16 first when round is set.
func widen64(v []float32, round bool) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		if round {
			x = kernels.FromBF16(kernels.ToBF16(x))
		}
		out[i] = float64(x)
	}
	return out
}

func round64(v []float64, round bool) []float64 {
	if !round {
		return v
	}
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(kernels.FromBF16(kernels.ToBF16(float32(x))))
	}
	return out
}

func relNorm64(got []float32, want []float64) float64 {
	var num, den float64
	for i := range want {
		d := float64(got[i]) - want[i]
		num += d * d
		den += want[i] * want[i]
	}
	return math.Sqrt(num / den)
}

// TestLinearAutocastLoRA: under autocast a module's LoRA GEMMs take bf16
// operands (activation, A, B and the rank-sized intermediate rounded, as
// torch.autocast runs a LoRA's linears), forward and backward;
// SetAutocastLoRA(false) keeps them float32. Each result is held to a
// float64 reference of its own rounding, and the two references differ by
// more than the bound, so either path fails the other's check.
func TestLinearAutocastLoRA(t *testing.T) {
	c := newLoRACase(t)
	m, be, r := c.m, c.m.be, c.a.Rank
	scale := float64(c.a.Scale)
	m.SetAutocast(true)
	// ref computes the forward output, din, dA and dB with the LoRA
	// operands rounded (cast) or not; the base GEMMs round under autocast
	// either way.
	ref := func(cast bool) (out, din, ga, gb []float64) {
		x, xr, dy, dyr := widen64(c.x, cast), widen64(c.x, true), widen64(c.dy, cast), widen64(c.dy, true)
		w, la, lb := widen64(c.w, false), widen64(c.la, cast), widen64(c.lb, cast)
		out = matmul64(xr, w, c.rows, c.in, c.out, false, true)
		tt := round64(matmul64(x, la, c.rows, c.in, r, false, true), cast)
		for i, v := range matmul64(tt, lb, c.rows, r, c.out, false, true) {
			out[i] += scale * v
		}
		din = matmul64(dyr, w, c.rows, c.out, c.in, false, false)
		dt := matmul64(dy, lb, c.rows, c.out, r, false, false)
		for i := range dt {
			dt[i] *= scale
		}
		dt = round64(dt, cast)
		for i, v := range matmul64(dt, la, c.rows, r, c.in, false, false) {
			din[i] += v
		}
		gb = matmul64(dy, tt, c.out, c.rows, r, true, false)
		for i := range gb {
			gb[i] *= scale
		}
		ga = matmul64(dt, x, r, c.rows, c.in, true, false)
		return out, din, ga, gb
	}
	run := func(castLoRA bool) (out, din, ga, gb []float32) {
		m.SetAutocastLoRA(castLoRA)
		defer m.SetAutocastLoRA(true)
		x := m.operand(be.Upload(c.x, c.rows, c.in))
		defer x.free()
		o := be.New(c.rows, c.out)
		segs := []segment{{off: 0, n: c.rows, adapter: c.a}}
		m.linear(o, &x, 0, c.mod, segs, be.New(c.rows*r))
		g := m.NewGrads(c.a, false)
		w := &bwd{m: m, act: &Activations{adapter: c.a, b: &batch{ids: make([]int32, c.rows)}}, g: g}
		defer w.free()
		w.lora, w.dt = w.alloc(c.rows, r), w.alloc(c.rows, r)
		d := be.New(c.rows, c.in)
		w.linear(d, &x, be.Upload(c.dy, c.rows, c.out), 0, c.mod, false)
		down := func(x kernels.Tensor) []float32 {
			h := make([]float32, x.Len())
			be.Download(h, x)
			return h
		}
		gl := g.adapter.Layers[0][c.mod]
		return down(o), down(d), down(gl.A), down(gl.B)
	}
	// a frozen adapter (an engine's) uses bf16 copies made once: the same
	// products
	wantOut, wantDin, _, _ := run(true)
	c.a.Freeze()
	if out, din, _, _ := run(true); !slices.Equal(out, wantOut) || !slices.Equal(din, wantDin) {
		t.Errorf("a frozen adapter's bf16 LoRA GEMMs differ from an unfrozen one's")
	}
	if out, _, _, _ := run(true); !slices.Equal(out, wantOut) {
		t.Errorf("a frozen adapter's second pass differs")
	}
	for _, cast := range []bool{true, false} {
		gotOut, gotDin, gotA, gotB := run(cast)
		got := [][]float32{gotOut, gotDin, gotA, gotB}
		wo, wd, wa, wb := ref(cast)
		oo, od, oa, ob := ref(!cast)
		want, other := [][]float64{wo, wd, wa, wb}, [][]float64{oo, od, oa, ob}
		for i, name := range []string{"output", "input gradient", "dA", "dB"} {
			e, apart := relNorm64(got[i], want[i]), relNorm64(got[i], other[i])
			t.Logf("LoRA bf16 %v, %s: %.2g from its reference, %.2g from the other", cast, name, e, apart)
			if e > 2e-6 || apart < 20*e {
				t.Errorf("LoRA bf16 %v, %s: %.2g from its reference (bound 2e-6), %.2g from the other path's", cast, name, e, apart)
			}
		}
	}
}
