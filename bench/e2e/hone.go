package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/hone-rl/hone/bench/internal/machine"
	"github.com/hone-rl/hone/kernels"
	"github.com/hone-rl/hone/kernels/cpu"
	"github.com/hone-rl/hone/model"
)

// measurement is one phase's throughput: tokens per wall second and per
// CPU-second of this process (all threads).
type measurement struct {
	Phase   string  `json:"phase"`
	Tokens  float64 `json:"tokens_per_s"`
	CPUToks float64 `json:"tokens_per_cpu_s"`
}

// workload is what every phase runs, the same for hone and PyTorch.
type workload struct {
	Prompt    int // prefill prompt tokens (batch 1), and the KV length decode steps attend to
	TrainSeqs int // sequences per LoRA training step
	TrainLen  int // tokens per training sequence
	Rank      int // LoRA rank (all seven projections of every layer)
}

// timed runs fn until seconds have passed (at least twice after a warm-up
// call, unless the warm-up alone took that long) and returns tokens per
// wall second and per CPU-second.
func timed(seconds float64, tokens int, fn func() error) (float64, float64, error) {
	t0, c0 := time.Now(), machine.CPUSeconds()
	if err := fn(); err != nil {
		return 0, 0, err
	}
	first, cfirst := time.Since(t0).Seconds(), machine.CPUSeconds()-c0
	if first >= seconds {
		return float64(tokens) / first, float64(tokens) / cfirst, nil
	}
	n := 0
	t0, c0 = time.Now(), machine.CPUSeconds()
	for n < 2 || time.Since(t0).Seconds() < seconds {
		if err := fn(); err != nil {
			return 0, 0, err
		}
		n++
	}
	el, cel := time.Since(t0).Seconds(), machine.CPUSeconds()-c0
	return float64(tokens*n) / el, float64(tokens*n) / cel, nil
}

func randTokens(r *rand.Rand, n, vocab int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(r.IntN(vocab))
	}
	return out
}

// benchHone measures the embedded engine's model code (model/ over
// kernels/cpu, what the engine's scheduler calls each step) and the
// trainer's LoRA step on a random model of the preset.
func benchHone(ctx context.Context, preset string, w workload, threads int, seconds float64) ([]measurement, error) {
	cfg, err := model.Preset(preset)
	if err != nil {
		return nil, err
	}
	be := cpu.New(threads)
	m, err := model.New(cfg, be, 1)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", preset, err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	var out []measurement
	add := func(phase string, tokens int, fn func() error) error {
		t, c, err := timed(seconds, tokens, fn)
		if err != nil {
			return fmt.Errorf("%s %s: %w", preset, phase, err)
		}
		out = append(out, measurement{Phase: phase, Tokens: t, CPUToks: c})
		return nil
	}

	prompt := randTokens(r, w.Prompt, cfg.VocabSize)
	cache := m.NewCache()
	defer cache.Free()
	if err := add("prefill b1", w.Prompt, func() error {
		cache.Truncate(0)
		_, err := m.Forward(ctx, []model.Step{{Tokens: prompt, Cache: cache}})
		return err
	}); err != nil {
		return nil, err
	}
	for _, batch := range []int{1, 16} {
		steps := make([]model.Step, batch)
		for i := range steps {
			steps[i] = model.Step{Tokens: randTokens(r, w.Prompt, cfg.VocabSize), Cache: m.NewCache()}
		}
		if _, err := m.Forward(ctx, steps); err != nil {
			return nil, err
		}
		for i := range steps {
			steps[i].Tokens = steps[i].Tokens[:1]
		}
		err := add(fmt.Sprintf("decode b%d", batch), batch, func() error {
			for _, s := range steps {
				s.Cache.Truncate(w.Prompt)
			}
			_, err := m.Forward(ctx, steps)
			return err
		})
		for _, s := range steps {
			s.Cache.Free()
		}
		if err != nil {
			return nil, err
		}
	}

	a, err := model.NewAdapter(m, "bench", model.AdapterConfig{Rank: w.Rank, Alpha: float64(2 * w.Rank)}, 1)
	if err != nil {
		return nil, err
	}
	defer a.Free()
	seqs := make([][]int32, w.TrainSeqs)
	mask := make([][]float32, w.TrainSeqs)
	for i := range seqs {
		seqs[i] = randTokens(r, w.TrainLen, cfg.VocabSize)
		mask[i] = make([]float32, w.TrainLen-1)
		for j := range mask[i] {
			mask[i][j] = 1
		}
	}
	g := m.NewGrads(a, false)
	defer g.Free()
	params, grads := a.Params(), g.Adapter()
	m1, m2 := make([]kernels.Tensor, len(params)), make([]kernels.Tensor, len(params))
	for i, p := range params {
		m1[i], m2[i] = be.New(p.Tensor.Shape()...), be.New(p.Tensor.Shape()...)
	}
	step := 0
	if err := add("LoRA train", w.TrainSeqs*w.TrainLen, func() error {
		g.Zero()
		act, err := m.ForwardTrain(ctx, seqs, a)
		if err != nil {
			return err
		}
		defer act.Free()
		_, dlogp, err := model.MaskedMean(act.LogProbs(), mask)
		if err != nil {
			return err
		}
		if err := m.Backward(ctx, act, dlogp, g); err != nil {
			return err
		}
		step++
		opt := kernels.AdamW{LR: 1e-5, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: step}
		for i, p := range params {
			be.AdamWStep(p.Tensor, grads[i].Tensor, m1[i], m2[i], opt)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return out, nil
}
