//go:build cgo

package cuda

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hone-rl/hone/kernels"
	"github.com/hone-rl/hone/model"
)

// loraStep is one LoRA training step of a small transformer on be: the
// masked mean log-probability, the adapter gradients, and the adapter after
// one AdamW step, all downloaded.
type loraStep struct {
	loss   float64
	grads  map[string][]float32
	params map[string][]float32
}

func runLoRAStep(t *testing.T, be kernels.Backend, arch string) loraStep {
	t.Helper()
	ctx := context.Background()
	cfg := &model.Config{Architecture: arch, VocabSize: 61, HiddenSize: 32, IntermediateSize: 48, NumLayers: 2,
		NumHeads: 4, NumKVHeads: 2, HeadDim: 12, MaxPositions: 128, RMSNormEps: 1e-6, RopeTheta: 10000,
		TieWordEmbeddings: arch == model.ArchQwen3, QKNorm: arch == model.ArchQwen3, AttentionBias: arch != model.ArchQwen3}
	m, err := model.New(cfg, be, 7)
	if err != nil {
		t.Fatal(err)
	}
	// Weights and adapter from one host generator, so both backends start
	// from the same numbers; larger than the init so every layer matters.
	rng := rand.New(rand.NewPCG(9, 9))
	perturb := func(p model.Param, add bool, scale float64) {
		d := make([]float32, p.Tensor.Len())
		if add {
			be.Download(d, p.Tensor)
		}
		for i := range d {
			d[i] += float32(scale * rng.NormFloat64())
		}
		u := be.Upload(d, p.Tensor.Shape()...)
		be.Copy(p.Tensor, u)
		be.Free(u)
	}
	for _, p := range m.Params() {
		perturb(p, true, 0.2)
	}
	a, err := model.NewAdapter(m, "a", model.AdapterConfig{Rank: 4, Alpha: 8}, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range a.Params() {
		perturb(p, false, 0.3)
	}
	seqs := [][]int32{{5, 6, 7, 8, 9, 10, 11, 12, 40, 41, 3}, {17, 2, 33, 60, 0}}
	mask := [][]float32{{0, 0, 1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 0, 1}}
	act, err := m.ForwardTrain(ctx, seqs, a)
	if err != nil {
		t.Fatal(err)
	}
	loss, dlogp, err := model.MaskedMean(act.LogProbs(), mask)
	if err != nil {
		t.Fatal(err)
	}
	g := m.NewGrads(a, false)
	if err := m.Backward(ctx, act, dlogp, g); err != nil {
		t.Fatal(err)
	}
	act.Free()
	out := loraStep{loss: loss, grads: map[string][]float32{}, params: map[string][]float32{}}
	for i, p := range a.Params() {
		gr := g.Adapter()[i]
		d := make([]float32, gr.Tensor.Len())
		be.Download(d, gr.Tensor)
		out.grads[gr.Name] = d
		mt, vt := be.New(p.Tensor.Shape()...), be.New(p.Tensor.Shape()...)
		be.AdamWStep(p.Tensor, gr.Tensor, mt, vt, kernels.AdamW{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 1})
		d = make([]float32, p.Tensor.Len())
		be.Download(d, p.Tensor)
		out.params[p.Name] = d
	}
	return out
}

// relErr is |got-want| / |want| in the Euclidean norm.
func relErr(got, want []float32) float64 {
	var num, den float64
	for i := range want {
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num) / math.Max(math.Sqrt(den), 1e-30)
}
