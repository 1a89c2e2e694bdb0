//go:build cgo && !cuda

package cuda

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/hone-rl/hone/kernels"
	"github.com/hone-rl/hone/kernels/cpu"
	"github.com/hone-rl/hone/model"
)

// flashStep is a LoRA step (forward, masked mean of the log-probs,
// backward) of a 2-layer Qwen3-shaped model with head dimension 64, bf16
// base weights and autocast, so its attention runs the tensor-core kernels
// (attention_flash.cu) on the fast variant: three packed sequences (70, 25
// and 9 tokens: several row blocks and key tiles, segments at offsets
// within the batch's tensors), in each activation checkpointing mode. Its
// LoRA GEMMs stay float32 (model.SetAutocastLoRA(false)): rounding their
// operands to bf16 would round the two backends' slightly different
// activations apart (their difference is near bf16's precision), which
// triples the gradients' distance and would hide an attention error of that
// size; TestLoRAStepAutocastMatchesCPU holds the bf16 LoRA GEMMs.
func flashStep(t *testing.T, be kernels.Backend, checkpoint model.Checkpointing) (float64, []float32) {
	t.Helper()
	cfg := &model.Config{Architecture: model.ArchQwen3, VocabSize: 61, HiddenSize: 128, IntermediateSize: 96,
		NumLayers: 2, NumHeads: 4, NumKVHeads: 2, HeadDim: 64, MaxPositions: 128, RMSNormEps: 1e-6,
		RopeTheta: 10000, TieWordEmbeddings: true, QKNorm: true}
	m, err := model.New(cfg, be, 7)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetWeightDType(kernels.BF16); err != nil {
		t.Fatal(err)
	}
	m.SetAutocast(true)
	m.SetAutocastLoRA(false)
	m.SetCheckpointMode(checkpoint)
	a, err := model.NewAdapter(m, "a", model.AdapterConfig{Rank: 4, Alpha: 8}, 1)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, p := range a.Params() {
		d := make([]float32, p.Tensor.Len())
		for i := range d {
			d[i] = float32(0.3 * rng.NormFloat64())
		}
		u := be.Upload(d, p.Tensor.Shape()...)
		be.Copy(p.Tensor, u)
		be.Free(u)
	}
	var seqs [][]int32
	var mask [][]float32
	for _, n := range []int{70, 25, 9} {
		s, mk := make([]int32, n), make([]float32, n-1)
		for i := range s {
			s[i] = int32(rng.IntN(cfg.VocabSize))
		}
		for i := range mk {
			mk[i] = 1
		}
		seqs, mask = append(seqs, s), append(mask, mk)
	}
	ctx := context.Background()
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
	var flat []float32
	for _, p := range g.Adapter() {
		d := make([]float32, p.Tensor.Len())
		be.Download(d, p.Tensor)
		flat = append(flat, d...)
	}
	if err := be.Err(); err != nil {
		t.Fatal(err)
	}
	return loss, flat
}

// relDiff is |got-want| / |want| in the Euclidean norm.
func relDiff(got, want []float32) float64 {
	var num, den float64
	for i := range want {
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num / den)
}

// TestFlashAttentionLoRAStep: the LoRA step of flashStep on the emulated
// fast variant (tensor-core attention, the forward's log-sum-exp kept for
// the backward) against the CPU backend (attention on the rounded inputs,
// float32 after them), with and without checkpointing: the loss within
// 1e-3 relative and the LoRA gradients within 1e-2 (Euclidean norm). The
// tensor-core kernels also round the probabilities and score gradients to
// bf16 (at most 2^-8 relative each), which moves the gradients by 6.3e-3
// here (deterministic: the shim and the generic CPU kernels);
// the readable variant (float32 kernels on the rounded inputs, the CPU's
// arithmetic) stays within the autocast parity tolerance of the CPU.
func TestFlashAttentionLoRAStep(t *testing.T) {
	ref, err := cpu.NewVariant(1, cpu.VariantGeneric)
	if err != nil {
		t.Fatal(err)
	}
	for _, checkpoint := range []model.Checkpointing{model.CheckpointOff, model.CheckpointFull, model.CheckpointSelective} {
		wantLoss, want := flashStep(t, ref, checkpoint)
		for _, v := range Variants() {
			be, err := NewEmulated(v)
			if err != nil {
				t.Fatal(err)
			}
			loss, got := flashStep(t, be, checkpoint)
			be.Close()
			el, eg := math.Abs(loss-wantLoss)/math.Abs(wantLoss), relDiff(got, want)
			t.Logf("%s, checkpointing mode %d: loss %.7g (cpu %.7g, relative %.2g), gradients relative %.2g", v, checkpoint,
				loss, wantLoss, el, eg)
			lossTol, gradTol := 1e-3, 1e-2
			if v == "readable" {
				lossTol, gradTol = 1e-5, 4e-3
			}
			if !(el <= lossTol) || !(eg <= gradTol) {
				t.Errorf("%s, checkpointing mode %d: loss relative %.2g (tolerance %g), gradients %.2g (tolerance %g)", v,
					checkpoint, el, lossTol, eg, gradTol)
			}
		}
	}
}
