package memplan

import (
	"math"
	"strings"
	"testing"
)

var qwen3_8B = Shapes{Hidden: 4096, Layers: 36, Heads: 32, KVHeads: 8, HeadDim: 128, MLP: 12288, Vocab: 151936}

// TestQwen3_8BPlan reproduces the table in kernels/cuda/DESIGN.md and the
// README (bf16 weights with autocast, the GPU default).
func TestQwen3_8BPlan(t *testing.T) {
	p, err := Make(Request{Model: qwen3_8B, Rank: 16, SeqLen: 8192, GPUBytes: 80e9, EngineUtilization: 0.45, Autocast: true})
	if err != nil {
		t.Fatal(err)
	}
	near := func(name string, got int64, wantGB, tol float64) {
		if math.Abs(gb(got)-wantGB) > tol {
			t.Errorf("%s = %.3f GB, want %.2f", name, gb(got), wantGB)
		}
	}
	near("base weights", p.BaseWeights, 16.4, 0.05)
	near("LoRA state", p.LoRAState, 0.7, 0.01)
	near("checkpoints", p.Checkpoints, 4.8, 0.05)
	near("layer acts", p.LayerActs, 2.25, 0.01)
	near("backward scratch", p.BackwardScratch, 2.3, 0.06)
	near("log-prob chunk", p.LogProbChunk, 0.1, 0.05)
	near("autocast scratch", p.CastScratch, 0.27, 0.01)
	near("total", p.Total, 26.7, 0.1)
	if p.WidenedWeight != 0 {
		t.Errorf("widened weight %d with autocast, want 0", p.WidenedWeight)
	}
	near("budget", p.Budget, 43, 0.01)
	if p.ActFloatsPerTokenLayer != 68608 {
		t.Errorf("layer acts per token %d, want 68608", p.ActFloatsPerTokenLayer)
	}
	if p.LoRAParams/36 != 1212416 {
		t.Errorf("LoRA params per layer %d, want 1212416", p.LoRAParams/36)
	}
	if p.MicroBatchSequences != 2 || p.MicroBatchTokens < 16384 {
		t.Errorf("micro-batch %d tokens, %d sequences; want >= 16384 tokens, 2 sequences", p.MicroBatchTokens, p.MicroBatchSequences)
	}
}

func TestRefusesWithNumbers(t *testing.T) {
	tests := []struct {
		name string
		req  Request
		want string
	}{
		{"24GB beside engine", Request{Model: qwen3_8B, Rank: 16, SeqLen: 8192, GPUBytes: 24e9, EngineUtilization: 0.45, Autocast: true}, "needs 26.8 GB, the trainer has 12.2 GB"},
		{"bad share", Request{Model: qwen3_8B, Rank: 16, SeqLen: 8192, GPUBytes: 80e9, EngineUtilization: 1}, "invalid request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Make(tc.req)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestGEMMTemporaries: what each way of multiplying bf16 weights keeps
// beside them: autocast bf16 copies of the activation operands that one
// module's LoRA backward rounds together per token (the MLP's 12288 and the
// hidden 4096 on Qwen3-8B), exact mode the largest projection
// widened to fp32 (12288 x 4096), fp32 weights neither.
func TestGEMMTemporaries(t *testing.T) {
	base := Request{Model: qwen3_8B, Rank: 16, SeqLen: 8192, GPUBytes: 80e9, EngineUtilization: 0.45}
	tests := []struct {
		name                  string
		weightBytes           int64
		autocast              bool
		wantCast, wantWidened int64
		wantPerTokenOverPlain int64
	}{
		{"bf16 autocast", 2, true, 2 * (4096 + 12288) * 8192, 0, 2 * (4096 + 12288)},
		{"bf16 exact", 2, false, 0, 4 * 12288 * 4096, 0},
		{"fp32 weights", 4, false, 0, 0, 0},
		{"fp32 weights, autocast does nothing", 4, true, 0, 0, 0},
	}
	plain := int64(4*4096*36 + 2*4*68608) // checkpoints + layer acts + backward scratch
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := base
			r.WeightBytes, r.Autocast = tc.weightBytes, tc.autocast
			p, err := Make(r)
			if err != nil {
				t.Fatal(err)
			}
			if p.CastScratch != tc.wantCast || p.WidenedWeight != tc.wantWidened || p.PerToken-plain != tc.wantPerTokenOverPlain {
				t.Errorf("cast scratch %d, widened weight %d, per token +%d; want %d, %d, +%d",
					p.CastScratch, p.WidenedWeight, p.PerToken-plain, tc.wantCast, tc.wantWidened, tc.wantPerTokenOverPlain)
			}
			fixed := p.BaseWeights + p.LoRAState + p.LogProbChunk + p.WidenedWeight + p.GEMMWorkspace
			if (p.GEMMWorkspace != 0) != (tc.wantCast != 0) {
				t.Errorf("cuBLASLt workspace %d with autocast %v", p.GEMMWorkspace, tc.wantCast != 0)
			}
			if p.Total != fixed+p.PerToken*8192 {
				t.Errorf("total %d, want fixed %d + per token %d x 8192", p.Total, fixed, p.PerToken)
			}
		})
	}
}

// TestSelectivePlan: selective checkpointing keeps 43,040 floats per token
// and layer of Qwen3-8B (xIn, xMid, q, att, k, v, gate, up and the
// attention's log-sum-exp) for every layer, and recomputes 25,600 (h1, h2,
// qr, kr, SwiGLU's output) for one layer at a time: a 2048-token step fits
// 40 GB, an 8192-token one does not fit beside an engine at 0.45 of 80 GB.
func TestSelectivePlan(t *testing.T) {
	if k, c := qwen3_8B.KeptFloatsPerToken(), qwen3_8B.CheapFloatsPerToken(); k != 43040 || c != 25600 {
		t.Fatalf("kept %d, cheap %d floats per token and layer", k, c)
	}
	p, err := Make(Request{Model: qwen3_8B, Rank: 16, SeqLen: 2048, GPUBytes: 40e9, Autocast: true, Selective: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(4 * 43040 * 36 * 2048); p.Checkpoints != want || p.LayerActs != 4*25600*2048 {
		t.Errorf("checkpoints %d (want %d), layer acts %d", p.Checkpoints, want, p.LayerActs)
	}
	if gb(p.Total) > 32 || gb(p.Total) < 28 {
		t.Errorf("total %.1f GB, want 28..32", gb(p.Total))
	}
	if _, err := Make(Request{Model: qwen3_8B, Rank: 16, SeqLen: 8192, GPUBytes: 80e9, EngineUtilization: 0.45, Autocast: true,
		Selective: true}); err == nil {
		t.Error("an 8192-token selective step fit beside an engine at 0.45 of 80 GB")
	}
}
