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

// T is what the suite needs of a test. *testing.T satisfies it; so does
// kernels/selftest's recorder, which runs the suite outside `go test` (hone
// selftest on a GPU) and turns each group into a row of its table.
//
// Why an interface and not a re-exec'd child process under testing.MainStart:
// the suite runs in-process against any kernels.Backend value (a test's
// deliberately broken wrapper as well as a device backend), no test output is
// parsed back, and a check's worst error and tolerance reach the table as
// numbers (Meter); testing.MainStart's signature is also internal to the go
// command and changes between Go releases.
type T interface {
	Helper()
	Errorf(format string, args ...any)
	// Fatalf reports and stops the group (*testing.T calls runtime.Goexit).
	Fatalf(format string, args ...any)
}

// Meter is implemented by a T that wants every check's numbers: what the
// check was, its worst element's error and the tolerance at that element
// (tol + |want|*eps), the element with the largest error/tolerance ratio.
type Meter interface {
	Measure(check string, maxErr, tol float64)
}

// Group is one named group of checks of the suite (an op, with its backward).
type Group struct {
	Name string
	Run  func(T)
}

// Groups returns the suite's groups against be, in the order Run runs them.
// They share one random generator: run them in order, each once. A group
// fails if it leaves a device error (be.Err), which it then clears so the
// next group still runs.
func Groups(be kernels.Backend) []Group {
	s := &suite{be: be, rng: rand.New(rand.NewPCG(1, 2))}
	gs := []Group{
		{"Memory", s.memory},
		{"Index", s.index},
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
		{"Sample", s.sample},
		{"BF16", s.bf16},
		{"Convert", s.convert},
		// Last: groups draw from one generator, so appending keeps the
		// others' inputs.
		{"AttentionBF16", s.attentionBF16},
	}
	for i := range gs {
		name, fn := gs[i].Name, gs[i].Run
		gs[i].Run = func(t T) {
			// Checked even when fn stops the group with Fatalf.
			defer func() {
				s.release()
				if err := be.Err(); err != nil {
					t.Errorf("backend error after %s: %v", name, err)
					be.ClearErr()
				}
			}()
			fn(t)
		}
	}
	return gs
}

// Run runs the whole suite against be, one subtest per group.
func Run(t *testing.T, be kernels.Backend) {
	for _, g := range Groups(be) {
		t.Run(g.Name, func(t *testing.T) { g.Run(t) })
	}
}

type suite struct {
	be  kernels.Backend
	rng *rand.Rand
	// cleanup frees the group's indices and RoPE tables (release).
	cleanup []func()
}

// release frees what the group's ix and ropeTable made.
func (s *suite) release() {
	for _, f := range s.cleanup {
		f()
	}
	s.cleanup = nil
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

// ix uploads ids as an index freed when the group ends.
func (s *suite) ix(ids []int32) kernels.Index {
	x := s.be.UploadIndex(ids)
	s.cleanup = append(s.cleanup, func() { s.be.FreeIndex(x) })
	return x
}

// ropeTable builds a RoPE table freed when the group ends.
func (s *suite) ropeTable(freqs []float32, maxPos int) kernels.RoPETable {
	r := s.be.NewRoPETable(freqs, maxPos)
	s.cleanup = append(s.cleanup, func() { s.be.FreeRoPETable(r) })
	return r
}

// panics fails t unless fn panics (a shape or range error).
func panics(t T, what string, fn func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: no panic", what)
		}
	}()
	fn()
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
func near(t T, what string, got []float32, want []float64, tol, eps float64) {
	t.Helper()
	nearSlack(t, what, got, want, nil, tol, eps)
}

// nearSlack is near with slack[i] (nil: none) added to element i's
// allowance: what a reference cannot pin down (a rounding that may go
// either way).
func nearSlack(t T, what string, got []float32, want, slack []float64, tol, eps float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	bad := 0
	worst, worstD, worstTol := -1.0, 0.0, 0.0
	for i := range got {
		d := math.Abs(float64(got[i]) - want[i])
		allow := tol + math.Abs(want[i])*eps
		if slack != nil {
			allow += slack[i]
		}
		if r := ratio(d, allow); r > worst || math.IsNaN(d) && !math.IsNaN(worstD) {
			worst, worstD, worstTol = r, d, allow
		}
		if !(d <= allow) {
			if bad < 5 {
				t.Errorf("%s[%d] = %g, want %g (diff %.3g)", what, i, got[i], want[i], d)
			}
			bad++
		}
	}
	if m, ok := t.(Meter); ok && len(got) > 0 {
		m.Measure(what, worstD, worstTol)
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d values off", what, bad, len(got))
	}
}

// ratio is d/allow, +Inf for d > 0 = allow (exact checks) and NaN for NaN.
func ratio(d, allow float64) float64 {
	switch {
	case math.IsNaN(d):
		return math.Inf(1)
	case allow == 0 && d == 0:
		return 0
	case allow == 0:
		return math.Inf(1)
	}
	return d / allow
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
