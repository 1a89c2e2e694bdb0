package conformance

import (
	"math"

	"github.com/hone-rl/hone/kernels"
)

func refLogProbs(logits []float64, targets []int32, vocab int) []float64 {
	out := make([]float64, len(targets))
	for t, tg := range targets {
		row := logits[t*vocab : (t+1)*vocab]
		mx := math.Inf(-1)
		for _, v := range row {
			mx = math.Max(mx, v)
		}
		var s float64
		for _, v := range row {
			s += math.Exp(v - mx)
		}
		out[t] = row[tg] - mx - math.Log(s)
	}
	return out
}

func (s *suite) logprobs(t T) {
	const n, vocab = 5, 37
	logits, dlogp := s.randn(n*vocab), s.randn(n)
	for i := range logits {
		logits[i] *= 3
	}
	targets := s.ids(n, vocab)
	ti := s.ix(targets)
	lt := s.up(logits, n, vocab)
	out := s.poisoned(n)
	s.be.LogProbs(out, lt, ti)
	want := refLogProbs(f64(logits), targets, vocab)
	near(t, "logprobs", s.down(out), want, 1e-5, 1e-5)

	out = s.poisoned(n)
	s.be.CrossEntropy(out, lt, ti)
	for i := range want {
		want[i] = -want[i]
	}
	near(t, "cross entropy", s.down(out), want, 1e-5, 1e-5)

	dl := s.poisoned(n, vocab)
	s.be.LogProbsBackward(dl, lt, ti, s.up(dlogp, n))
	df := f64(dlogp)
	near(t, "logprobs backward", s.down(dl), numGrad(func(x []float64) float64 {
		return dotf(df, refLogProbs(x, targets, vocab))
	}, f64(logits)), 1e-5, 1e-4)

	bad := s.ix([]int32{0, 1, 2, vocab, 4})
	panics(t, "logprobs target = vocab", func() { s.be.LogProbs(s.be.New(n), lt, bad) })
	panics(t, "cross entropy target = vocab", func() { s.be.CrossEntropy(s.be.New(n), lt, bad) })
	panics(t, "logprobs backward target = vocab", func() { s.be.LogProbsBackward(s.be.New(n, vocab), lt, bad, s.up(dlogp, n)) })
	panics(t, "logprobs targets for other rows", func() { s.be.LogProbs(s.be.New(n-1), s.up(logits[:(n-1)*vocab], n-1, vocab), ti) })
}

// tokenLogits is h*w^T in float64.
func tokenLogits(h, w []float64, n, hid, vocab int) []float64 {
	out := make([]float64, n*vocab)
	for i := 0; i < n; i++ {
		for v := 0; v < vocab; v++ {
			out[i*vocab+v] = dotf(h[i*hid:(i+1)*hid], w[v*hid:(v+1)*hid])
		}
	}
	return out
}

func (s *suite) tokenLogProbs(t T) {
	// The second shape has enough rows that a backend chunking the
	// vocabulary by a memory budget splits it.
	for _, sh := range [][3]int{{3, 8, 20}, {1100, 8, 1500}} {
		n, hid, vocab := sh[0], sh[1], sh[2]
		h, w, dlogp, dw0 := s.randn(n*hid), s.randn(vocab*hid), s.randn(n), s.randn(vocab*hid)
		targets := s.ids(n, vocab)
		ti := s.ix(targets)
		ht, wt := s.up(h, n, hid), s.up(w, vocab, hid)
		lp, lse := s.poisoned(n), s.poisoned(n)
		s.be.TokenLogProbs(lp, lse, ht, wt, ti)
		hf, wf := f64(h), f64(w)
		logits := tokenLogits(hf, wf, n, hid, vocab)
		what := name("token logprobs n%d h%d v%d", n, hid, vocab)
		near(t, what, s.down(lp), refLogProbs(logits, targets, vocab), 1e-4, 1e-4)
		zero := make([]int32, n)
		wantLSE := refLogProbs(logits, zero, vocab)
		for i := range wantLSE {
			wantLSE[i] = logits[i*vocab] - wantLSE[i]
		}
		near(t, what+" lse", s.down(lse), wantLSE, 1e-4, 1e-4)

		dh, dw := s.poisoned(n, hid), s.up(dw0, vocab, hid)
		s.be.TokenLogProbsBackward(dh, dw, ht, wt, lse, ti, s.up(dlogp, n))
		wantDH, wantDW := refTokenGrads(logits, hf, wf, targets, f64(dlogp), hid, vocab)
		if n*vocab < 1000 {
			df := f64(dlogp)
			loss := func(hv, wv []float64) float64 {
				return dotf(df, refLogProbs(tokenLogits(hv, wv, n, hid, vocab), targets, vocab))
			}
			wantDH = numGrad(func(x []float64) float64 { return loss(x, wf) }, hf)
			wantDW = numGrad(func(x []float64) float64 { return loss(hf, x) }, wf)
		}
		near(t, what+" dh", s.down(dh), wantDH, 1e-4, 1e-4)
		near(t, what+" dw", s.down(dw), addInto(dw0, wantDW), 1e-4, 1e-4)
		if n < 10 {
			bad := append([]int32{int32(vocab)}, targets[1:]...)
			panics(t, what+" target = vocab", func() { s.be.TokenLogProbs(lp, lse, ht, wt, s.ix(bad)) })
			panics(t, what+" backward target = vocab", func() {
				s.be.TokenLogProbsBackward(dh, dw, ht, wt, lse, s.ix(bad), s.up(dlogp, n))
			})
		}
	}
}

// refTokenGrads is the analytic gradient of sum(dlogp*logp) for logits h*w^T:
// G = dlogp*(onehot - softmax), dh = G*w, dw = G^T*h.
func refTokenGrads(logits, h, w []float64, targets []int32, dlogp []float64, hid, vocab int) (dh, dw []float64) {
	n := len(targets)
	dh, dw = make([]float64, n*hid), make([]float64, vocab*hid)
	lp := refLogProbs(logits, targets, vocab)
	for i, tg := range targets {
		lse := logits[i*vocab+int(tg)] - lp[i]
		for v := 0; v < vocab; v++ {
			g := -dlogp[i] * math.Exp(logits[i*vocab+v]-lse)
			if v == int(tg) {
				g += dlogp[i]
			}
			for d := 0; d < hid; d++ {
				dh[i*hid+d] += g * w[v*hid+d]
				dw[v*hid+d] += g * h[i*hid+d]
			}
		}
	}
	return dh, dw
}

func (s *suite) adamw(t T) {
	const n = 200
	p, m, v := s.randn(n), make([]float32, n), make([]float32, n)
	pt, mt, vt := s.up(p, n), s.up(m, n), s.up(v, n)
	pf, mf, vf := f64(p), make([]float64, n), make([]float64, n)
	o := kernels.AdamW{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.1}
	for step := 1; step <= 3; step++ {
		g := s.randn(n)
		o.Step = step
		s.be.AdamWStep(pt, s.up(g, n), mt, vt, o)
		b1, b2, lr := float64(o.Beta1), float64(o.Beta2), float64(o.LR)
		for i := range pf {
			gi := float64(g[i])
			pf[i] *= 1 - lr*float64(o.WeightDecay)
			mf[i] = b1*mf[i] + (1-b1)*gi
			vf[i] = b2*vf[i] + (1-b2)*gi*gi
			mh := mf[i] / (1 - math.Pow(b1, float64(step)))
			vh := vf[i] / (1 - math.Pow(b2, float64(step)))
			pf[i] -= lr * mh / (math.Sqrt(vh) + float64(o.Eps))
		}
	}
	near(t, "adamw param", s.down(pt), pf, 1e-5, 1e-4)
	near(t, "adamw m", s.down(mt), mf, 1e-6, 1e-4)
	near(t, "adamw v", s.down(vt), vf, 1e-6, 1e-4)
}
