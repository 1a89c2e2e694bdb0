package conformance

import (
	"math"

	"github.com/hone-rl/hone/kernels"
)

func (s *suite) memory(t T) {
	x := s.randn(24)
	a := s.up(x, 2, 3, 4)
	if got := a.Shape(); len(got) != 3 || got[0] != 2 || got[2] != 4 || a.Len() != 24 {
		t.Fatalf("shape %v len %d", got, a.Len())
	}
	near(t, "upload/download", s.down(a), f64(x), 0, 0)
	v := s.be.View(a, 4, 2, 4)
	near(t, "view", s.down(v), f64(x[4:12]), 0, 0)
	s.be.Fill(v, 2)
	want := f64(x)
	for i := 4; i < 12; i++ {
		want[i] = 2
	}
	near(t, "fill through view", s.down(a), want, 0, 0)
	c := s.poisoned(24)
	s.be.Copy(c, a)
	near(t, "copy", s.down(c), want, 0, 0)
	z := s.be.New(3, 5)
	near(t, "new is zero", s.down(z), make([]float64, 15), 0, 0)
	for _, dt := range []kernels.DType{kernels.F32, kernels.BF16} {
		e := s.be.Empty(dt, 5, 3)
		if got := e.Shape(); len(got) != 2 || got[0] != 5 || got[1] != 3 || e.Len() != 15 || e.DType() != dt {
			t.Fatalf("empty %v: shape %v len %d dtype %v", dt, got, e.Len(), e.DType())
		}
		if dt == kernels.F32 {
			s.be.Copy(e, z)
			near(t, "empty, then written", s.down(e), make([]float64, 15), 0, 0)
		}
		s.be.Free(e)
	}
	s.be.Free(v)
	s.be.Free(z)
}

// refMatMul computes alpha*op(A)op(B) + beta*C in float64.
func refMatMul(a, b, c []float32, m, n, k int, ta, tb bool, alpha, beta float64) []float64 {
	out := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var sum float64
			for p := 0; p < k; p++ {
				av := a[i*k+p]
				if ta {
					av = a[p*m+i]
				}
				bv := b[p*n+j]
				if tb {
					bv = b[j*k+p]
				}
				sum += float64(av) * float64(bv)
			}
			out[i*n+j] = alpha * sum
			if beta != 0 {
				out[i*n+j] += beta * float64(c[i*n+j])
			}
		}
	}
	return out
}

func dims(rows, cols int, trans bool) []int {
	if trans {
		return []int{cols, rows}
	}
	return []int{rows, cols}
}

func (s *suite) matmul(t T) {
	shapes := [][3]int{{1, 1, 1}, {1, 7, 5}, {3, 5, 2}, {4, 4, 4}, {5, 9, 13}, {16, 33, 17}, {70, 300, 37}, {1, 260, 129}, {67, 8, 66},
		{37, 600, 16}, {70, 16, 300}} // the last two: LoRA-like, one dimension small
	for _, sh := range shapes {
		m, k, n := sh[0], sh[1], sh[2]
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				for _, ab := range [][2]float32{{1, 0}, {0.5, 1}, {-2, 0.25}} {
					a, b, c0 := s.randn(m*k), s.randn(k*n), s.randn(m*n)
					ct := s.poisoned(m, n)
					if ab[1] != 0 {
						ct = s.up(c0, m, n)
					}
					s.be.MatMul(ct, s.up(a, dims(m, k, ta)...), s.up(b, dims(k, n, tb)...), ta, tb, ab[0], ab[1])
					want := refMatMul(a, b, c0, m, n, k, ta, tb, float64(ab[0]), float64(ab[1]))
					near(t, name("matmul m%d k%d n%d ta=%v tb=%v alpha=%g beta=%g", m, k, n, ta, tb, ab[0], ab[1]),
						s.down(ct), want, 1e-4*math.Sqrt(float64(k)), 1e-5)
				}
			}
		}
	}
}

func (s *suite) matmulBatched(t T) {
	const batch, m, k, n = 3, 5, 7, 6
	for _, shared := range []bool{false, true} {
		for _, tb := range []bool{false, true} {
			a := s.randn(batch * m * k)
			nb := batch
			if shared {
				nb = 1
			}
			b := s.randn(nb * k * n)
			c := s.poisoned(batch, m, n)
			bshape := dims(k, n, tb)
			if !shared {
				bshape = append([]int{batch}, bshape...)
			}
			bt := s.up(b, bshape...)
			s.be.MatMul(c, s.up(a, batch, m, k), bt, false, tb, 1, 0)
			var want []float64
			for i := 0; i < batch; i++ {
				bi := b
				if !shared {
					bi = b[i*k*n : (i+1)*k*n]
				}
				want = append(want, refMatMul(a[i*m*k:(i+1)*m*k], bi, nil, m, n, k, false, tb, 1, 0)...)
			}
			near(t, name("batched shared=%v tb=%v", shared, tb), s.down(c), want, 1e-4, 1e-5)
		}
	}
}

func (s *suite) elementwise(t T) {
	const n = 1000
	x, y, z := s.randn(n), s.randn(n), s.randn(n)
	ref := func(f func(a, b float64) float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = f(float64(x[i]), float64(y[i]))
		}
		return out
	}
	out := s.poisoned(n)
	s.be.Add(out, s.up(x, n), s.up(y, n))
	near(t, "add", s.down(out), ref(func(a, b float64) float64 { return a + b }), 1e-6, 1e-6)
	out = s.poisoned(n)
	s.be.Mul(out, s.up(x, n), s.up(y, n))
	near(t, "mul", s.down(out), ref(func(a, b float64) float64 { return a * b }), 1e-6, 1e-6)
	out = s.poisoned(n)
	s.be.Scale(out, s.up(x, n), 0.3)
	near(t, "scale", s.down(out), ref(func(a, _ float64) float64 { return 0.3 * a }), 1e-6, 1e-6)
	acc := s.up(z, n)
	s.be.AXPY(acc, s.up(x, n), -1.5)
	want := ref(func(a, _ float64) float64 { return -1.5 * a })
	near(t, "axpy", s.down(acc), addInto(z, want), 1e-5, 1e-6)

	const r, w = 25, 40
	mat := s.up(x, r, w)
	s.be.AddRow(mat, s.up(y[:w], w))
	want = f64(x)
	for i := range want {
		want[i] += float64(y[i%w])
	}
	near(t, "addrow", s.down(mat), want, 1e-6, 1e-6)
}

func (s *suite) reductions(t T) {
	const r, w = 30, 17
	x, base := s.randn(r*w), s.randn(w)
	dst := s.up(base, w)
	s.be.SumRows(dst, s.up(x, r, w))
	want := f64(base)
	var sum, sq float64
	for i, v := range x {
		want[i%w] += float64(v)
		sum += float64(v)
		sq += float64(v) * float64(v)
	}
	near(t, "sumrows", s.down(dst), want, 1e-5, 1e-5)
	xt := s.up(x, r, w)
	near(t, "sum", []float32{float32(s.be.Sum(xt))}, []float64{sum}, 1e-4, 1e-5)
	near(t, "sumsquares", []float32{float32(s.be.SumSquares(xt))}, []float64{sq}, 1e-4, 1e-5)

	// Into a device tensor: accumulated onto what the element holds, other
	// elements untouched, several tensors into one element (a global norm),
	// an empty tensor adds nothing.
	y := s.randn(50)
	acc0 := s.randn(4)
	acc := s.up(acc0, 2, 2)
	s.be.SumInto(acc, 1, xt)
	s.be.SumSquaresInto(acc, 2, xt)
	s.be.SumSquaresInto(acc, 2, s.up(y, 5, 10))
	s.be.SumInto(acc, 3, s.be.New(0))
	var sqy float64
	for _, v := range y {
		sqy += float64(v) * float64(v)
	}
	want = f64(acc0)
	want[1] += sum
	want[2] += sq + sqy
	near(t, "sum into, sum squares into", s.down(acc), want, 1e-4, 1e-5)
	panics(t, "sum into element past the end", func() { s.be.SumInto(acc, 4, xt) })
	panics(t, "sum squares into negative element", func() { s.be.SumSquaresInto(acc, -1, xt) })
}

// index checks UploadIndex's length and range, including the empty index
// (a step with nothing to gather), and that one index serves several ops.
func (s *suite) index(t T) {
	for _, tc := range []struct {
		ids    []int32
		lo, hi int32
	}{
		{[]int32{4, -3, 9, 0}, -3, 9},
		{[]int32{7}, 7, 7},
		{nil, 0, -1},
	} {
		x := s.be.UploadIndex(tc.ids)
		if lo, hi := x.Range(); x.Len() != len(tc.ids) || lo != tc.lo || hi != tc.hi {
			t.Errorf("index %v: len %d range [%d,%d], want %d [%d,%d]", tc.ids, x.Len(), lo, hi, len(tc.ids), tc.lo, tc.hi)
		}
		s.be.FreeIndex(x)
	}
	const vocab, width = 5, 3
	table := s.randn(vocab * width)
	tt := s.up(table, vocab, width)
	ix := s.ix([]int32{4, 4, 1})
	a, b := s.poisoned(3, width), s.poisoned(3, width)
	s.be.Embedding(a, tt, ix)
	s.be.Embedding(b, tt, ix)
	want := f64(append(append(append([]float32(nil), table[12:15]...), table[12:15]...), table[3:6]...))
	near(t, "gather through one index, first", s.down(a), want, 0, 0)
	near(t, "gather through one index, second", s.down(b), want, 0, 0)
	empty := s.ix(nil)
	s.be.Embedding(s.be.New(0, width), tt, empty)
}
