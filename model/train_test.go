package model

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hone-rl/hone/kernels"
)

// maskedLoss runs ForwardTrain and returns the masked mean log-probability.
func maskedLoss(t *testing.T, m *Model, seqs [][]int32, mask [][]float32, a *Adapter) (float64, *Activations, [][]float32) {
	t.Helper()
	act, err := m.ForwardTrain(context.Background(), seqs, a)
	if err != nil {
		t.Fatal(err)
	}
	loss, dlogp, err := MaskedMean(act.LogProbs(), mask)
	if err != nil {
		t.Fatal(err)
	}
	return loss, act, dlogp
}

// TestBackwardFiniteDifferences checks every gradient tensor (adapter A/B and
// all base weights) against a central finite difference of the loss along a
// random direction.
func TestBackwardFiniteDifferences(t *testing.T) {
	for _, arch := range []string{ArchQwen3, ArchQwen2, ArchLlama} {
		t.Run(arch, func(t *testing.T) {
			m := newTestModel(t, arch)
			a, err := NewAdapter(m, "a", AdapterConfig{Rank: 3, Alpha: 6}, 1)
			if err != nil {
				t.Fatal(err)
			}
			randomizeB(t, m, a)
			rng := rand.New(rand.NewPCG(8, 8))
			seqs := [][]int32{randTokens(rng, 7, 61), randTokens(rng, 4, 61)}
			mask := [][]float32{{0, 0, 1, 1, 1, 0}, {1, 1, 1}}
			_, act, dlogp := maskedLoss(t, m, seqs, mask, a)
			g := m.NewGrads(a, true)
			if err := m.Backward(context.Background(), act, dlogp, g); err != nil {
				t.Fatal(err)
			}
			act.Free()
			params := append(a.Params(), m.Params()...)
			grads := append(g.Adapter(), g.Base()...)
			if len(params) != len(grads) {
				t.Fatalf("%d params, %d grads", len(params), len(grads))
			}
			for i, p := range params {
				if grads[i].Name != p.Name {
					t.Fatalf("grad %d named %s, param %s", i, grads[i].Name, p.Name)
				}
				checkDirection(t, m, p, grads[i].Tensor, func() float64 {
					l, act, _ := maskedLoss(t, m, seqs, mask, a)
					act.Free()
					return l
				}, rng)
			}
		})
	}
}

// checkDirection compares (L(p+hd) - L(p-hd)) / 2h with <grad, d> for a
// random unit direction d.
func checkDirection(t *testing.T, m *Model, p Param, grad kernels.Tensor, loss func() float64, rng *rand.Rand) {
	t.Helper()
	be := m.be
	n := p.Tensor.Len()
	orig, g, d := make([]float32, n), make([]float32, n), make([]float32, n)
	be.Download(orig, p.Tensor)
	be.Download(g, grad)
	var want, norm float64
	for i := range d {
		d[i] = float32(rng.NormFloat64())
		norm += float64(d[i]) * float64(d[i])
	}
	for i := range d {
		d[i] /= float32(math.Sqrt(norm)) // a unit direction
		want += float64(g[i]) * float64(d[i])
	}
	const h = 1e-2
	set := func(sign float64) {
		x := make([]float32, n)
		for i := range x {
			x[i] = orig[i] + float32(sign*h)*d[i]
		}
		be.Copy(p.Tensor, be.Upload(x, p.Tensor.Shape()...))
	}
	set(1)
	lp := loss()
	set(-1)
	lm := loss()
	be.Copy(p.Tensor, be.Upload(orig, p.Tensor.Shape()...))
	got := (lp - lm) / (2 * h)
	if math.Abs(got-want) > 1e-4+0.01*math.Abs(want) {
		t.Errorf("%s: finite difference %.6g, backward %.6g", p.Name, got, want)
	}
}

func TestTrainingRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	m := newTestModel(t, ArchQwen3)
	for name, seqs := range map[string][][]int32{"none": nil, "short": {{1}}, "token": {{1, 99}}} {
		if _, err := m.ForwardTrain(ctx, seqs, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	act, err := m.ForwardTrain(ctx, [][]int32{{1, 2, 3}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := NewAdapter(m, "a", AdapterConfig{Rank: 2, Alpha: 2}, 1)
	if err := m.Backward(ctx, act, [][]float32{{1, 1}}, m.NewGrads(a, false)); err == nil {
		t.Error("adapter grads without adapter forward accepted")
	}
	if err := m.Backward(ctx, act, [][]float32{{1}}, m.NewGrads(nil, true)); err == nil {
		t.Error("short dlogp accepted")
	}
	if _, _, err := MaskedMean([][]float32{{1}}, [][]float32{{0}}); err == nil {
		t.Error("empty mask accepted")
	}
}

// TestTrainingLowersLoss takes a few AdamW steps on the LoRA and checks the
// masked log-likelihood goes up (loss = -mean logp goes down).
func TestTrainingLowersLoss(t *testing.T) {
	ctx := context.Background()
	m := newTestModel(t, ArchQwen3)
	a, _ := NewAdapter(m, "a", AdapterConfig{Rank: 4, Alpha: 8}, 1)
	seqs := [][]int32{{5, 6, 7, 8, 9, 10, 11, 12}}
	mask := [][]float32{{1, 1, 1, 1, 1, 1, 1}}
	g := m.NewGrads(a, false)
	var moments [][2]kernels.Tensor
	for _, p := range a.Params() {
		moments = append(moments, [2]kernels.Tensor{m.be.New(p.Tensor.Shape()...), m.be.New(p.Tensor.Shape()...)})
	}
	first := 0.0
	var last float64
	for step := 1; step <= 20; step++ {
		loss, act, dlogp := maskedLoss(t, m, seqs, mask, a)
		if step == 1 {
			first = loss
		}
		last = loss
		// Maximise the log-likelihood: descend on -loss.
		for i := range dlogp[0] {
			dlogp[0][i] = -dlogp[0][i]
		}
		g.Zero()
		if err := m.Backward(ctx, act, dlogp, g); err != nil {
			t.Fatal(err)
		}
		act.Free()
		for i, p := range a.Params() {
			m.be.AdamWStep(p.Tensor, g.Adapter()[i].Tensor, moments[i][0], moments[i][1],
				kernels.AdamW{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: step})
		}
	}
	if !(last > first+0.5) {
		t.Fatalf("mean logp went from %g to %g", first, last)
	}
}

// TestCheckpointingSameGradients: with full or selective activation
// checkpointing the loss, the log-probabilities and every gradient (adapter
// and base) equal those of the plain pass exactly (the recomputed tensors
// come from the same kernels on the same inputs); full keeps only the
// layers' inputs, selective keeps the GEMMs' and attention's outputs and
// drops the norms', RoPE's and SwiGLU's.
func TestCheckpointingSameGradients(t *testing.T) {
	for _, arch := range []string{ArchQwen3, ArchLlama} {
		t.Run(arch, func(t *testing.T) {
			m := newTestModel(t, arch)
			a, err := NewAdapter(m, "a", AdapterConfig{Rank: 3, Alpha: 6}, 1)
			if err != nil {
				t.Fatal(err)
			}
			randomizeB(t, m, a)
			rng := rand.New(rand.NewPCG(5, 6))
			seqs := [][]int32{randTokens(rng, 9, 61), randTokens(rng, 5, 61)}
			mask := [][]float32{{0, 1, 1, 1, 1, 0, 1, 1}, {1, 1, 1, 1}}
			var losses []float64
			var grads [][][]float32
			modes := []Checkpointing{CheckpointOff, CheckpointFull, CheckpointSelective}
			for _, ck := range modes {
				m.SetCheckpointMode(ck)
				loss, act, dlogp := maskedLoss(t, m, seqs, mask, a)
				for l, s := range act.layers {
					switch {
					case ck == CheckpointFull && (s.xIn == nil || s.h1 != nil || s.ac != nil || s.xMid != nil):
						t.Fatalf("layer %d keeps more than its input", l)
					case ck == CheckpointSelective && (s.h1 != nil || s.qr != nil || s.kr != nil || s.h2 != nil || s.ac != nil ||
						s.xIn == nil || s.q == nil || s.k == nil || s.v == nil || s.att == nil || s.xMid == nil || s.gate == nil || s.up == nil):
						t.Fatalf("layer %d: selective keeps xIn %v q %v att %v gate %v, drops h1 %v ac %v", l,
							s.xIn != nil, s.q != nil, s.att != nil, s.gate != nil, s.h1 == nil, s.ac == nil)
					}
				}
				g := m.NewGrads(a, true)
				if err := m.Backward(context.Background(), act, dlogp, g); err != nil {
					t.Fatal(err)
				}
				act.Free()
				var gs [][]float32
				for _, p := range append(g.Adapter(), g.Base()...) {
					h := make([]float32, p.Tensor.Len())
					m.be.Download(h, p.Tensor)
					gs = append(gs, h)
				}
				g.Free()
				losses, grads = append(losses, loss), append(grads, gs)
			}
			m.SetCheckpointMode(CheckpointOff)
			for k := 1; k < len(modes); k++ {
				if losses[0] != losses[k] {
					t.Errorf("loss %v plain, %v with checkpointing mode %d", losses[0], losses[k], modes[k])
				}
				for i := range grads[0] {
					for j := range grads[0][i] {
						if grads[0][i][j] != grads[k][i][j] {
							t.Fatalf("mode %d: gradient %d element %d: %v plain, %v checkpointed", modes[k], i, j, grads[0][i][j], grads[k][i][j])
						}
					}
				}
			}
		})
	}
}
