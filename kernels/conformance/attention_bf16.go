package conformance

import (
	"math"

	"github.com/hone-rl/hone/kernels"
)

// bf16Unit is bf16's unit roundoff: round to nearest even with 8
// significant bits moves a value by at most half a unit in the last place,
// 2^-8 of the value's leading power of two, so at most 2^-8 of itself.
const bf16Unit = 1.0 / 256

// attnBF16Ref is the float64 reference of one bf16 attention call, from the
// bf16-rounded inputs, with an error bound per output element for what a
// backend may round beyond the inputs (Attn.BF16): the probabilities P for
// P V and P^T dO, the score gradients dS for dS K and dS^T Q.
type attnBF16Ref struct {
	out, outBound, lse                    []float64
	dq, dk, dv, dqBound, dkBound, dvBound []float64
	// dqMag, dkMag, dvMag: the sums of the terms' magnitudes, for the
	// float32 part of the tolerance.
	dqMag, dkMag, dvMag []float64
}

// refAttentionBF16 computes the reference. The bounds, per element:
//   - out[i,d] = sum_j p_j v[j,d]: each p_j rounded moves out by at most
//     u*sum_j p_j |v[j,d]| (u = 2^-8, bf16Unit), outBound;
//   - delta_i = dO_i . O_i then errs by at most E_i = u*sum_d |dO[i,d]| *
//     outBound[i,d] (the kernels take delta from the computed output);
//   - dS_ij = p_ij (dp_ij - delta_i) then errs by p_ij E_i, and its
//     rounding adds u |dS_ij|: dq[i,d] = scale sum_j dS_ij k[j,d] errs by at
//     most scale sum_j (p_ij E_i + u |dS_ij|) |k[j,d]|, dk alike with q;
//   - dv[j,d] = sum_i p_ij dO[i,d] errs by at most u sum_i p_ij |dO[i,d]|.
func refAttentionBF16(q, k, v, dout []float64, a kernels.Attn) attnBF16Ref {
	qw, kw, hd := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim, a.HeadDim
	n, group := len(q)/qw, a.Heads/a.KVHeads
	scale := float64(a.Scale)
	r := attnBF16Ref{
		out: make([]float64, len(q)), outBound: make([]float64, len(q)), lse: make([]float64, n*a.Heads),
		dq: make([]float64, len(q)), dk: make([]float64, len(k)), dv: make([]float64, len(v)),
		dqBound: make([]float64, len(q)), dkBound: make([]float64, len(k)), dvBound: make([]float64, len(v)),
		dqMag: make([]float64, len(q)), dkMag: make([]float64, len(k)), dvMag: make([]float64, len(v)),
	}
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
			r.lse[i*a.Heads+h] = mx + math.Log(sum)
			for j := range p {
				p[j] /= sum
				for d := 0; d < hd; d++ {
					r.out[qo+d] += p[j] * v[j*kw+kv+d]
					r.outBound[qo+d] += bf16Unit * p[j] * math.Abs(v[j*kw+kv+d])
				}
			}
			if dout == nil {
				continue
			}
			var delta, e float64
			dp := make([]float64, keys)
			for j := range p {
				dp[j] = dotf(dout[qo:qo+hd], v[j*kw+kv:j*kw+kv+hd])
				delta += p[j] * dp[j]
			}
			for d := 0; d < hd; d++ {
				e += math.Abs(dout[qo+d]) * r.outBound[qo+d]
			}
			for j := range p {
				ds := p[j] * (dp[j] - delta)
				errS := p[j]*e + bf16Unit*math.Abs(ds)
				magS := p[j] * (math.Abs(dp[j]) + math.Abs(delta))
				for x := 0; x < hd; x++ {
					kj, qi, do := k[j*kw+kv+x], q[qo+x], dout[qo+x]
					r.dq[qo+x] += scale * ds * kj
					r.dqBound[qo+x] += scale * errS * math.Abs(kj)
					r.dqMag[qo+x] += scale * magS * math.Abs(kj)
					r.dk[j*kw+kv+x] += scale * ds * qi
					r.dkBound[j*kw+kv+x] += scale * errS * math.Abs(qi)
					r.dkMag[j*kw+kv+x] += scale * magS * math.Abs(qi)
					r.dv[j*kw+kv+x] += p[j] * do
					r.dvBound[j*kw+kv+x] += bf16Unit * p[j] * math.Abs(do)
					r.dvMag[j*kw+kv+x] += p[j] * math.Abs(do)
				}
			}
		}
	}
	return r
}

// roundedBF16 returns x rounded to bf16 (kernels.ToBF16), in float64.
func roundedBF16(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(kernels.FromBF16(kernels.ToBF16(v)))
	}
	return y
}

// within fails t unless every |got-want| <= allow[i] (NaN fails): near with
// a tolerance per element.
func within(t T, what string, got []float32, want, allow []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	bad := 0
	worst, worstD, worstTol := -1.0, 0.0, 0.0
	for i := range got {
		d := math.Abs(float64(got[i]) - want[i])
		if r := ratio(d, allow[i]); r > worst || math.IsNaN(d) && !math.IsNaN(worstD) {
			worst, worstD, worstTol = r, d, allow[i]
		}
		if !(d <= allow[i]) {
			if bad < 5 {
				t.Errorf("%s[%d] = %g, want %g (diff %.3g, allowed %.3g)", what, i, got[i], want[i], d, allow[i])
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

// bf16Allow is the tolerance of a bf16 attention output: twice the bound of
// what the extra bf16 roundings may move it (refAttentionBF16) plus
// float32's share: 1e-5 of the terms' magnitudes (mag, nil for none) and
// of the value, and 1e-6.
func bf16Allow(want, bound, mag []float64) []float64 {
	allow := make([]float64, len(want))
	for i := range allow {
		allow[i] = 2*bound[i] + 1e-5*math.Abs(want[i]) + 1e-6
		if mag != nil {
			allow[i] += 1e-5 * mag[i]
		}
	}
	return allow
}

// attentionBF16 checks Attn.BF16 against the float64 reference from the
// rounded inputs (refAttentionBF16; its bounds are the tolerance): head
// dimensions 64 and 128 (kernels/cuda's tensor-core kernels: several row
// blocks and key tiles, a query block that ends inside a tile, cached keys
// not a multiple of the tile, KV groups of 1, 2 and 4, one query against a
// cache) and 12 (no tensor-core kernel: the rounded float32 path), the
// log-sum-exp the forward writes, and the backward with and without the
// forward's output and log-sum-exp. The queries are scaled up so the
// softmax is peaked and its running maximum moves from key tile to key
// tile, which the online rescaling must follow.
func (s *suite) attentionBF16(t T) {
	for _, c := range []struct {
		a     kernels.Attn
		n     int
		saved bool // pass the forward's out and lse to the backward
	}{
		{kernels.Attn{Heads: 4, KVHeads: 2, HeadDim: 64}, 130, true},
		{kernels.Attn{Heads: 2, KVHeads: 1, HeadDim: 128, Past: 70}, 33, false},
		{kernels.Attn{Heads: 8, KVHeads: 2, HeadDim: 64, Past: 100}, 1, true},
		{kernels.Attn{Heads: 2, KVHeads: 2, HeadDim: 128}, 5, true},
		{kernels.Attn{Heads: 4, KVHeads: 2, HeadDim: 12, Past: 3}, 9, true},
	} {
		a, n := c.a, c.n
		a.Scale = float32(1 / math.Sqrt(float64(a.HeadDim)))
		a.BF16 = true
		qw, kw, keys := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim, a.Past+n
		q, k, v := s.randn(n*qw), s.randn(keys*kw), s.randn(keys*kw)
		for i := range q {
			q[i] *= 3
		}
		dout, dk0, dv0 := s.randn(n*qw), s.randn(keys*kw), s.randn(keys*kw)
		ref := refAttentionBF16(roundedBF16(q), roundedBF16(k), roundedBF16(v), roundedBF16(dout), a)
		what := name("attention bf16 heads %d/%d dim %d past %d n=%d", a.Heads, a.KVHeads, a.HeadDim, a.Past, n)

		qt, kt, vt := s.up(q, n, qw), s.up(k, keys, kw), s.up(v, keys, kw)
		out, lse := s.poisoned(n, qw), s.poisoned(n, a.Heads)
		fa := a
		fa.LSE = lse
		s.be.Attention(out, qt, kt, vt, fa)
		within(t, what, s.down(out), ref.out, bf16Allow(ref.out, ref.outBound, nil))
		near(t, what+" lse", s.down(lse), ref.lse, 1e-5, 1e-5)
		// Without LSE the same output.
		out2 := s.poisoned(n, qw)
		s.be.Attention(out2, qt, kt, vt, a)
		within(t, what+" (no lse)", s.down(out2), ref.out, bf16Allow(ref.out, ref.outBound, nil))

		ba := a
		if c.saved {
			ba.LSE, ba.Out = lse, out
		}
		dq, dk, dv := s.poisoned(n, qw), s.up(dk0, keys, kw), s.up(dv0, keys, kw)
		s.be.AttentionBackward(dq, dk, dv, s.up(dout, n, qw), qt, kt, vt, ba)
		wantK, wantV := addInto(dk0, ref.dk), addInto(dv0, ref.dv)
		within(t, what+" dq", s.down(dq), ref.dq, bf16Allow(ref.dq, ref.dqBound, ref.dqMag))
		within(t, what+" dk", s.down(dk), wantK, bf16Allow(wantK, ref.dkBound, ref.dkMag))
		within(t, what+" dv", s.down(dv), wantV, bf16Allow(wantV, ref.dvBound, ref.dvMag))
	}
	a := kernels.Attn{Heads: 4, KVHeads: 2, HeadDim: 64, Scale: 0.125}
	q, kv := s.up(s.randn(3*256), 3, 256), s.up(s.randn(3*128), 3, 128)
	out := s.poisoned(3, 256)
	panics(t, "attention lse without bf16", func() {
		s.be.Attention(out, q, kv, kv, kernels.Attn{Heads: 4, KVHeads: 2, HeadDim: 64, LSE: s.poisoned(3, 4)})
	})
	a.BF16 = true
	panics(t, "attention lse of the wrong length", func() {
		b := a
		b.LSE = s.poisoned(3, 2)
		s.be.Attention(out, q, kv, kv, b)
	})
	panics(t, "attention saved out without lse", func() {
		b := a
		b.Out = out
		s.be.AttentionBackward(s.poisoned(3, 256), kv, kv, out, q, kv, kv, b)
	})
}
