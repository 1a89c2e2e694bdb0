package conformance

import (
	"math"

	"github.com/hone-rl/hone/kernels"
)

func refRMSNorm(x, w []float64, width int, eps float64) []float64 {
	out := make([]float64, len(x))
	for i := 0; i < len(x); i += width {
		var ss float64
		for _, v := range x[i : i+width] {
			ss += v * v
		}
		r := 1 / math.Sqrt(ss/float64(width)+eps)
		for j := 0; j < width; j++ {
			out[i+j] = x[i+j] * r * w[j]
		}
	}
	return out
}

// rmsnorm: rows short enough for a device's warp-per-row kernels (9 rows:
// a partial block of them) and wider ones.
func (s *suite) rmsnorm(t T) {
	for _, sh := range [][2]int{{9, 48}, {3, 600}} {
		n, width := sh[0], sh[1]
		const eps = 1e-6
		x, w, dy, dw0 := s.randn(n*width), s.randn(width), s.randn(n*width), s.randn(width)
		out := s.poisoned(n, width)
		s.be.RMSNorm(out, s.up(x, n, width), s.up(w, width), eps)
		what := name("rmsnorm %dx%d", n, width)
		near(t, what, s.down(out), refRMSNorm(f64(x), f64(w), width, eps), 1e-5, 1e-5)

		dx, dw := s.poisoned(n, width), s.up(dw0, width)
		s.be.RMSNormBackward(dx, dw, s.up(dy, n, width), s.up(x, n, width), s.up(w, width), eps)
		xf, wf, dyf := f64(x), f64(w), f64(dy)
		near(t, what+" dx", s.down(dx), numGrad(func(v []float64) float64 {
			return dotf(dyf, refRMSNorm(v, wf, width, eps))
		}, xf), 1e-4, 1e-4)
		near(t, what+" dw", s.down(dw), addInto(dw0, numGrad(func(v []float64) float64 {
			return dotf(dyf, refRMSNorm(xf, v, width, eps))
		}, wf)), 1e-4, 1e-4)
	}
}

func refRoPE(x []float64, pos []int32, width, hd int, theta float64) []float64 {
	out := append([]float64(nil), x...)
	half := hd / 2
	for t, p := range pos {
		for h := 0; h < width; h += hd {
			for j := 0; j < half; j++ {
				a := float64(p) * math.Pow(theta, -float64(2*j)/float64(hd))
				i1, i2 := t*width+h+j, t*width+h+j+half
				out[i1] = x[i1]*math.Cos(a) - x[i2]*math.Sin(a)
				out[i2] = x[i2]*math.Cos(a) + x[i1]*math.Sin(a)
			}
		}
	}
	return out
}

func (s *suite) rope(t T) {
	const n, hd, heads, theta = 6, 16, 3, 10000.0
	x := s.randn(n * hd * heads)
	pos := []int32{0, 1, 2, 17, 100, 2047}
	xt := s.up(x, n, heads*hd)
	freqs := make([]float32, hd/2)
	for j := range freqs {
		freqs[j] = float32(math.Pow(theta, -float64(2*j)/float64(hd)))
	}
	rt := s.ropeTable(freqs, 2048)
	if rt.Half() != hd/2 || rt.MaxPos() != 2048 {
		t.Fatalf("rope table half %d max %d, want %d, 2048", rt.Half(), rt.MaxPos(), hd/2)
	}
	pi := s.ix(pos)
	s.be.RoPE(xt, pi, rt, false)
	near(t, "rope", s.down(xt), refRoPE(f64(x), pos, heads*hd, hd, theta), 1e-4, 1e-4)
	s.be.RoPE(xt, pi, rt, true)
	near(t, "rope inverse", s.down(xt), f64(x), 1e-5, 1e-5)

	// One table serves any positions below its bound, in any order, and
	// rows of several heads of another width's table.
	pos2 := []int32{1000, 3, 2047, 0}
	x2 := s.randn(len(pos2) * hd)
	xt2 := s.up(x2, len(pos2), hd)
	s.be.RoPE(xt2, s.ix(pos2), rt, false)
	near(t, "rope reused table", s.down(xt2), refRoPE(f64(x2), pos2, hd, hd, theta), 1e-4, 1e-4)

	panics(t, "rope position at the table's bound", func() { s.be.RoPE(s.up(x[:hd], 1, hd), s.ix([]int32{2048}), rt, false) })
	panics(t, "rope negative position", func() { s.be.RoPE(s.up(x[:hd], 1, hd), s.ix([]int32{-1}), rt, false) })
	panics(t, "rope positions for other rows", func() { s.be.RoPE(xt, s.ix(pos[:2]), rt, false) })
}

func refAttention(q, k, v []float64, a kernels.Attn) []float64 {
	qw, kw := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	n := len(q) / qw
	out := make([]float64, len(q))
	group := a.Heads / a.KVHeads
	for i := 0; i < n; i++ {
		for h := 0; h < a.Heads; h++ {
			kv := (h / group) * a.HeadDim
			keys := a.Past + i + 1
			sc := make([]float64, keys)
			mx := math.Inf(-1)
			for j := range sc {
				sc[j] = float64(a.Scale) * dotf(q[i*qw+h*a.HeadDim:i*qw+(h+1)*a.HeadDim], k[j*kw+kv:j*kw+kv+a.HeadDim])
				mx = math.Max(mx, sc[j])
			}
			var sum float64
			for j := range sc {
				sc[j] = math.Exp(sc[j] - mx)
				sum += sc[j]
			}
			for j := range sc {
				for d := 0; d < a.HeadDim; d++ {
					out[i*qw+h*a.HeadDim+d] += sc[j] / sum * v[j*kw+kv+d]
				}
			}
		}
	}
	return out
}

func (s *suite) attention(t T) {
	for _, a := range []kernels.Attn{
		{Heads: 4, KVHeads: 2, HeadDim: 8, Past: 0},
		{Heads: 4, KVHeads: 2, HeadDim: 8, Past: 3},
		{Heads: 2, KVHeads: 2, HeadDim: 4, Past: 9},
		{Heads: 6, KVHeads: 1, HeadDim: 6, Past: 0},
	} {
		a.Scale = float32(1 / math.Sqrt(float64(a.HeadDim)))
		// 37 queries exercise a backend's blocked (prefill) path, if any.
		for _, n := range []int{1, 5, 37} {
			qw, kw, keys := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim, a.Past+n
			q, k, v := s.randn(n*qw), s.randn(keys*kw), s.randn(keys*kw)
			dout, dk0, dv0 := s.randn(n*qw), s.randn(keys*kw), s.randn(keys*kw)
			out := s.poisoned(n, qw)
			qt, kt, vt := s.up(q, n, qw), s.up(k, keys, kw), s.up(v, keys, kw)
			s.be.Attention(out, qt, kt, vt, a)
			what := name("attention heads %d/%d dim %d past %d scale %g n=%d", a.Heads, a.KVHeads, a.HeadDim, a.Past, a.Scale, n)
			near(t, what, s.down(out), refAttention(f64(q), f64(k), f64(v), a), 1e-5, 1e-4)

			dq, dk, dv := s.poisoned(n, qw), s.up(dk0, keys, kw), s.up(dv0, keys, kw)
			s.be.AttentionBackward(dq, dk, dv, s.up(dout, n, qw), qt, kt, vt, a)
			qf, kf, vf, df := f64(q), f64(k), f64(v), f64(dout)
			var wantQ, wantK, wantV []float64
			if n <= 5 {
				wantQ = numGrad(func(x []float64) float64 { return dotf(df, refAttention(x, kf, vf, a)) }, qf)
				wantK = numGrad(func(x []float64) float64 { return dotf(df, refAttention(qf, x, vf, a)) }, kf)
				wantV = numGrad(func(x []float64) float64 { return dotf(df, refAttention(qf, kf, x, a)) }, vf)
			} else {
				// Finite differences grow quadratically; the analytic float64
				// gradient (itself checked against them at n <= 5) stands in.
				wantQ, wantK, wantV = refAttentionGrads(qf, kf, vf, df, a)
			}
			near(t, what+" dq", s.down(dq), wantQ, 1e-4, 1e-4)
			near(t, what+" dk", s.down(dk), addInto(dk0, wantK), 1e-4, 1e-4)
			near(t, what+" dv", s.down(dv), addInto(dv0, wantV), 1e-4, 1e-4)
		}
	}
}

// refAttentionGrads is the analytic float64 gradient of sum(dout*attention):
// dV += P^T dO, dS = P*(dO V^T - rowsum), dQ = scale dS K, dK = scale dS^T Q.
func refAttentionGrads(q, k, v, dout []float64, a kernels.Attn) (dq, dk, dv []float64) {
	qw, kw, hd := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim, a.HeadDim
	n, group := len(q)/qw, a.Heads/a.KVHeads
	dq, dk, dv = make([]float64, len(q)), make([]float64, len(k)), make([]float64, len(v))
	scale := float64(a.Scale)
	for i := 0; i < n; i++ {
		for h := 0; h < a.Heads; h++ {
			kv, qo := (h/group)*hd, i*qw+h*hd
			keys := a.Past + i + 1
			p := make([]float64, keys)
			mx := math.Inf(-1)
			for j := range p {
				p[j] = scale * dotf(q[qo:qo+hd], k[j*kw+kv:j*kw+kv+hd])
				mx = math.Max(mx, p[j])
			}
			var sum float64
			for j := range p {
				p[j] = math.Exp(p[j] - mx)
				sum += p[j]
			}
			dp := make([]float64, keys)
			var d float64
			for j := range p {
				p[j] /= sum
				dp[j] = dotf(dout[qo:qo+hd], v[j*kw+kv:j*kw+kv+hd])
				d += p[j] * dp[j]
			}
			for j := range p {
				ds := p[j] * (dp[j] - d) * scale
				for x := 0; x < hd; x++ {
					dq[qo+x] += ds * k[j*kw+kv+x]
					dk[j*kw+kv+x] += ds * q[qo+x]
					dv[j*kw+kv+x] += p[j] * dout[qo+x]
				}
			}
		}
	}
	return dq, dk, dv
}

func silu(x float64) float64 { return x / (1 + math.Exp(-x)) }

func (s *suite) activations(t T) {
	const n = 300
	g, u, dout := s.randn(n), s.randn(n), s.randn(n)
	for i := range g {
		g[i] *= 4
	}
	out := s.poisoned(n)
	s.be.SiLU(out, s.up(g, n))
	want := make([]float64, n)
	for i, v := range g {
		want[i] = silu(float64(v))
	}
	near(t, "silu", s.down(out), want, 1e-6, 1e-5)

	out = s.poisoned(n)
	s.be.SwiGLU(out, s.up(g, n), s.up(u, n))
	swiglu := func(gv, uv []float64) []float64 {
		o := make([]float64, n)
		for i := range o {
			o[i] = silu(gv[i]) * uv[i]
		}
		return o
	}
	gf, uf, df := f64(g), f64(u), f64(dout)
	near(t, "swiglu", s.down(out), swiglu(gf, uf), 1e-6, 1e-5)

	dg, du := s.poisoned(n), s.poisoned(n)
	s.be.SwiGLUBackward(dg, du, s.up(dout, n), s.up(g, n), s.up(u, n))
	near(t, "swiglu dgate", s.down(dg), numGrad(func(x []float64) float64 { return dotf(df, swiglu(x, uf)) }, gf), 1e-4, 1e-4)
	near(t, "swiglu dup", s.down(du), numGrad(func(x []float64) float64 { return dotf(df, swiglu(gf, x)) }, uf), 1e-4, 1e-4)
}

func (s *suite) embedding(t T) {
	const vocab, width = 11, 9
	table, base := s.randn(vocab*width), s.randn(vocab*width)
	ids := []int32{3, 0, 10, 3, 7}
	ix := s.ix(ids)
	out := s.poisoned(len(ids), width)
	s.be.Embedding(out, s.up(table, vocab, width), ix)
	var want []float64
	for _, id := range ids {
		want = append(want, f64(table[int(id)*width:(int(id)+1)*width])...)
	}
	near(t, "embedding", s.down(out), want, 0, 0)

	dout := s.randn(len(ids) * width)
	dt := s.up(base, vocab, width)
	s.be.EmbeddingBackward(dt, s.up(dout, len(ids), width), ix)
	want = f64(base)
	for i, id := range ids {
		for j := 0; j < width; j++ {
			want[int(id)*width+j] += float64(dout[i*width+j])
		}
	}
	near(t, "embedding backward", s.down(dt), want, 1e-6, 1e-6)

	// Ids are range-checked against the table (from the range recorded at
	// upload), forward and backward.
	tt := s.up(table, vocab, width)
	panics(t, "embedding id = vocab", func() { s.be.Embedding(s.be.New(1, width), tt, s.ix([]int32{vocab})) })
	panics(t, "embedding negative id", func() { s.be.Embedding(s.be.New(2, width), tt, s.ix([]int32{1, -1})) })
	panics(t, "embedding backward id = vocab", func() {
		s.be.EmbeddingBackward(dt, s.up(dout[:width], 1, width), s.ix([]int32{vocab}))
	})
	panics(t, "embedding rows for other ids", func() { s.be.Embedding(s.be.New(2, width), tt, ix) })
}
