package conformance

import (
	"math"

	"github.com/hone-rl/hone/kernels"
)

// roundBF16 rounds x to bfloat16 in float64 arithmetic, independently of
// kernels.ToBF16: 8 significant bits, ties to even (a fixed quantum of
// 2^-133 below the smallest normal), overflow to infinity.
func roundBF16(x float32) float32 {
	v := float64(x)
	if math.IsNaN(v) || math.IsInf(v, 0) || v == 0 {
		return x
	}
	if math.Abs(v) < 0x1p-126 {
		return float32(math.RoundToEven(v/0x1p-133) * 0x1p-133)
	}
	frac, exp := math.Frexp(v) // |frac| in [0.5, 1)
	r := math.Ldexp(math.RoundToEven(frac*256)/256, exp)
	if math.Abs(r) >= 0x1p128 {
		return float32(math.Inf(int(math.Copysign(1, r))))
	}
	return float32(r)
}

// exact fails t unless got equals want element for element (infinities
// included), counting as a check of error 0.
func exact(t T, what string, got, want []float32) {
	t.Helper()
	bad := 0
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			if bad < 5 && i < len(got) {
				t.Errorf("%s[%d] = %g, want %g", what, i, got[i], want[i])
			}
			bad++
		}
	}
	if len(got) != len(want) || bad > 0 {
		t.Errorf("%s: %d of %d values differ (%d values, want %d)", what, bad, len(want), len(got), len(want))
		return
	}
	if m, ok := t.(Meter); ok && len(got) > 0 {
		m.Measure(what, 0, 0)
	}
}

func roundAll(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = roundBF16(v)
	}
	return out
}

// bf16 is the bf16 storage pass: uploads round to nearest even and
// downloads widen exactly; views and copies keep the type; MatMul with either
// or both operands bf16, Embedding from a bf16 table and TokenLogProbs(+
// Backward) with a bf16 w equal float64 references computed from the
// bf16-rounded inputs, within the float32 tolerances of their float32
// groups (the storage rounding, at most 2^-8 relative per element, is in
// the reference, so it needs no tolerance of its own); float32-only
// operations refuse bf16 operands.
func (s *suite) bf16(t T) {
	be := s.be
	one := float32(1)
	special := []float32{one, -2, 1 + 0x1p-8, 1 + 3*0x1p-8, 1 + 0x1p-8 + 0x1p-20, 3.14159265, -1e-3, 6e4,
		math.MaxFloat32, float32(math.Inf(-1)), 0x1p-130, 1e-40}
	x := append(special, s.randn(100)...)
	xt := be.UploadT(kernels.BF16, x, len(x))
	if xt.DType() != kernels.BF16 || xt.Len() != len(x) {
		t.Fatalf("bf16 upload: dtype %v len %d", xt.DType(), xt.Len())
	}
	rx := roundAll(x)
	want := f64(rx)
	exact(t, "bf16 upload/download (round to nearest even)", s.down(xt), rx)
	near(t, "bf16 view", s.down(be.View(xt, 12, 2, 5)), want[12:22], 0, 0)
	cp := be.NewT(kernels.BF16, len(x))
	near(t, "bf16 new is zero", s.down(cp), make([]float64, len(x)), 0, 0)
	be.Copy(cp, xt)
	exact(t, "bf16 copy", s.down(cp), rx)
	be.Free(cp)
	if f := be.UploadT(kernels.F32, x[:4], 4); f.DType() != kernels.F32 {
		t.Errorf("UploadT(F32) made a %v tensor", f.DType())
	}
	panics(t, "add of a bf16 tensor", func() { be.Add(be.New(len(x)), xt, be.New(len(x))) })
	panics(t, "copy between types", func() { be.Copy(be.New(len(x)), xt) })

	// MatMul: A bf16, B bf16 (B^T, as a weight), both, with either
	// transposed (A^T: autocast's LoRA gradients, dY^T X); and batched over
	// a shared bf16 B.
	for _, sh := range [][3]int{{1, 7, 5}, {5, 9, 13}, {16, 33, 17}, {70, 300, 37}} {
		m, k, n := sh[0], sh[1], sh[2]
		for _, dt := range [][2]kernels.DType{{kernels.BF16, kernels.F32}, {kernels.F32, kernels.BF16}, {kernels.BF16, kernels.BF16}} {
			for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
				ta, tb := tr[0], tr[1]
				a, b, c0 := s.randn(m*k), s.randn(k*n), s.randn(m*n)
				ar, br := a, b
				if dt[0] == kernels.BF16 {
					ar = roundAll(a)
				}
				if dt[1] == kernels.BF16 {
					br = roundAll(b)
				}
				ct := s.up(c0, m, n)
				at, bt := be.UploadT(dt[0], a, dims(m, k, ta)...), be.UploadT(dt[1], b, dims(k, n, tb)...)
				be.MatMul(ct, at, bt, ta, tb, 0.5, 1)
				near(t, name("matmul %v x %v m%d k%d n%d ta=%v tb=%v", dt[0], dt[1], m, k, n, ta, tb), s.down(ct),
					refMatMul(ar, br, c0, m, n, k, ta, tb, 0.5, 1), 1e-4*math.Sqrt(float64(k)), 1e-5)
				be.Free(at)
				be.Free(bt)
			}
		}
	}
	{
		const batch, m, k, n = 3, 4, 6, 5
		a, b := s.randn(batch*m*k), s.randn(n*k)
		c := s.poisoned(batch, m, n)
		be.MatMul(c, s.up(a, batch, m, k), be.UploadT(kernels.BF16, b, n, k), false, true, 1, 0)
		var want []float64
		br := roundAll(b)
		for i := 0; i < batch; i++ {
			want = append(want, refMatMul(a[i*m*k:(i+1)*m*k], br, nil, m, n, k, false, true, 1, 0)...)
		}
		near(t, "matmul batched, shared bf16 B", s.down(c), want, 1e-4, 1e-5)
	}

	// Embedding from a bf16 table: the rounded rows, exactly.
	const vocab, width = 11, 9
	table := s.randn(vocab * width)
	ids := []int32{3, 0, 10, 3, 7}
	out := s.poisoned(len(ids), width)
	be.Embedding(out, be.UploadT(kernels.BF16, table, vocab, width), s.ix(ids))
	tr := roundAll(table)
	var wantE []float64
	for _, id := range ids {
		wantE = append(wantE, f64(tr[int(id)*width:(int(id)+1)*width])...)
	}
	near(t, "embedding from a bf16 table", s.down(out), wantE, 0, 0)

	// TokenLogProbs with a bf16 w; the second shape splits the vocabulary
	// into chunks.
	for _, sh := range [][3]int{{3, 8, 20}, {1100, 8, 1500}} {
		n, hid, voc := sh[0], sh[1], sh[2]
		h, w, dlogp, dw0 := s.randn(n*hid), s.randn(voc*hid), s.randn(n), s.randn(voc*hid)
		targets := s.ids(n, voc)
		ti := s.ix(targets)
		ht, wt := s.up(h, n, hid), be.UploadT(kernels.BF16, w, voc, hid)
		lp, lse := s.poisoned(n), s.poisoned(n)
		be.TokenLogProbs(lp, lse, ht, wt, ti)
		hf, wf := f64(h), f64(roundAll(w))
		logits := tokenLogits(hf, wf, n, hid, voc)
		what := name("token logprobs bf16 w n%d h%d v%d", n, hid, voc)
		near(t, what, s.down(lp), refLogProbs(logits, targets, voc), 1e-4, 1e-4)
		dh, dw := s.poisoned(n, hid), s.up(dw0, voc, hid)
		be.TokenLogProbsBackward(dh, dw, ht, wt, lse, ti, s.up(dlogp, n))
		wantDH, wantDW := refTokenGrads(logits, hf, wf, targets, f64(dlogp), hid, voc)
		near(t, what+" dh", s.down(dh), wantDH, 1e-4, 1e-4)
		near(t, what+" dw", s.down(dw), addInto(dw0, wantDW), 1e-4, 1e-4)
		panics(t, what+" bf16 dw", func() {
			be.TokenLogProbsBackward(dh, be.NewT(kernels.BF16, voc, hid), ht, wt, lse, ti, s.up(dlogp, n))
		})
		s.tokenLogProbsAutocast(t, n, hid, voc)
	}
}

// tokenLogProbsAutocast: TokenLogProbs(+Backward) with h and w bf16
// (autocast's LM head) equal the references from the rounded h and w, the
// backward's with the logits' gradient rounded to bf16; an element of that
// gradient whose rounding may go either way (within 1e-5 relative of a
// midpoint, where float32 and float64 sums can disagree) adds a bf16 step of
// its product to the allowance. A float32 h with a bf16 w is exact mode
// (above); a bf16 h with a float32 w is refused.
func (s *suite) tokenLogProbsAutocast(t T, n, hid, voc int) {
	be := s.be
	h, w, dlogp, dw0 := s.randn(n*hid), s.randn(voc*hid), s.randn(n), s.randn(voc*hid)
	targets := s.ids(n, voc)
	ti := s.ix(targets)
	ht, wt := be.UploadT(kernels.BF16, h, n, hid), be.UploadT(kernels.BF16, w, voc, hid)
	lp, lse := s.poisoned(n), s.poisoned(n)
	be.TokenLogProbs(lp, lse, ht, wt, ti)
	hf, wf := f64(roundAll(h)), f64(roundAll(w))
	logits := tokenLogits(hf, wf, n, hid, voc)
	what := name("token logprobs bf16 h and w n%d h%d v%d", n, hid, voc)
	near(t, what, s.down(lp), refLogProbs(logits, targets, voc), 1e-4, 1e-4)
	dh, dw := s.poisoned(n, hid), s.up(dw0, voc, hid)
	be.TokenLogProbsBackward(dh, dw, ht, wt, lse, ti, s.up(dlogp, n))
	g, flip := roundedLogitGrads(logits, targets, f64(dlogp), voc)
	wantDH, wantDW := make([]float64, n*hid), addInto(dw0, make([]float64, voc*hid))
	slackDH, slackDW := make([]float64, n*hid), make([]float64, voc*hid)
	for i := 0; i < n; i++ {
		for v := 0; v < voc; v++ {
			e := i*voc + v
			for d := 0; d < hid; d++ {
				wantDH[i*hid+d] += g[e] * wf[v*hid+d]
				wantDW[v*hid+d] += g[e] * hf[i*hid+d]
				slackDH[i*hid+d] += flip[e] * math.Abs(wf[v*hid+d])
				slackDW[v*hid+d] += flip[e] * math.Abs(hf[i*hid+d])
			}
		}
	}
	nearSlack(t, what+" dh", s.down(dh), wantDH, slackDH, 1e-4, 1e-4)
	nearSlack(t, what+" dw", s.down(dw), wantDW, slackDW, 1e-4, 1e-4)
	panics(t, what+" with a float32 w", func() { be.TokenLogProbs(lp, lse, ht, s.up(w, voc, hid), ti) })
}

// roundedLogitGrads returns the logits' gradient dlogp*(onehot - softmax)
// rounded to bf16, and per element the size of the bf16 step its rounding
// may take the other way (0 where it cannot).
func roundedLogitGrads(logits []float64, targets []int32, dlogp []float64, voc int) (g, flip []float64) {
	lp := refLogProbs(logits, targets, voc)
	g, flip = make([]float64, len(logits)), make([]float64, len(logits))
	round := func(x float64) float64 { return float64(kernels.FromBF16(kernels.ToBF16(float32(x)))) }
	for i, tg := range targets {
		lse := logits[i*voc+int(tg)] - lp[i]
		for v := 0; v < voc; v++ {
			x := -dlogp[i] * math.Exp(logits[i*voc+v]-lse)
			if v == int(tg) {
				x += dlogp[i]
			}
			e := i*voc + v
			g[e] = round(x)
			if lo, hi := round(x*(1-1e-5)), round(x*(1+1e-5)); lo != hi {
				flip[e] = math.Abs(hi - lo)
			}
		}
	}
	return g, flip
}
