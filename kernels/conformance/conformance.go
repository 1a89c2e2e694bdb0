// Package conformance is the test suite every kernels.Backend must pass: each
// operation against a float64 reference written here, on fresh random inputs,
// with outputs poisoned (NaN) beforehand so unwritten elements fail.
// Backward operations are checked against central finite differences of the
// float64 reference forward, so the gradient math is verified independently.
package conformance

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hone-rl/hone/kernels"
)

// Run runs the whole suite against be.
func Run(t *testing.T, be kernels.Backend) {
	s := &suite{be: be, rng: rand.New(rand.NewPCG(1, 2))}
	for _, c := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"Memory", s.memory},
		{"MatMul", s.matmul},
		{"MatMulBatched", s.matmulBatched},
		{"Elementwise", s.elementwise},
		{"Reductions", s.reductions},
		{"RMSNorm", s.rmsnorm},
		{"RoPE", s.rope},
		{"Attention", s.attention},
		{"Activations", s.activations},
		{"Embedding", s.embedding},
		{"LogProbs", s.logprobs},
		{"TokenLogProbs", s.tokenLogProbs},
		{"AdamW", s.adamw},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.fn(t)
			// No op of the suite may record a device error; clear one so
			// the next group still runs.
			if err := be.Err(); err != nil {
				t.Errorf("backend error after %s: %v", c.name, err)
				be.ClearErr()
			}
		})
	}
}

type suite struct {
	be  kernels.Backend
	rng *rand.Rand
}

func (s *suite) randn(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(s.rng.NormFloat64())
	}
	return x
}

func (s *suite) ids(n, vocab int) []int32 {
	x := make([]int32, n)
	for i := range x {
		x[i] = int32(s.rng.IntN(vocab))
	}
	return x
}

func (s *suite) up(x []float32, shape ...int) kernels.Tensor { return s.be.Upload(x, shape...) }

// poisoned uploads a NaN-filled tensor.
func (s *suite) poisoned(shape ...int) kernels.Tensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(math.NaN())
	}
	return s.be.Upload(x, shape...)
}

func (s *suite) down(t kernels.Tensor) []float32 {
	x := make([]float32, t.Len())
	s.be.Download(x, t)
	return x
}

func f64(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// near fails t unless every |got-want| <= tol + |want|*eps (NaN fails).
func near(t *testing.T, what string, got []float32, want []float64, tol, eps float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range got {
		d := math.Abs(float64(got[i]) - want[i])
		if !(d <= tol+math.Abs(want[i])*eps) {
			if bad < 5 {
				t.Errorf("%s[%d] = %g, want %g (diff %.3g)", what, i, got[i], want[i], d)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d values off", what, bad, len(got))
	}
}

// numGrad returns the central-difference gradient of f at x.
func numGrad(f func([]float64) float64, x []float64) []float64 {
	g := make([]float64, len(x))
	for i := range x {
		h := 1e-6 * math.Max(1, math.Abs(x[i]))
		old := x[i]
		x[i] = old + h
		fp := f(x)
		x[i] = old - h
		fm := f(x)
		x[i] = old
		g[i] = (fp - fm) / (2 * h)
	}
	return g
}

func dotf(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func addInto(base []float32, g []float64) []float64 {
	out := f64(base)
	for i := range out {
		out[i] += g[i]
	}
	return out
}

func name(format string, args ...any) string { return fmt.Sprintf(format, args...) }
