package main

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/hone-rl/hone/kernels"
	"github.com/hone-rl/hone/kernels/backends"
	"github.com/hone-rl/hone/model"
	"github.com/hone-rl/hone/trainer"
	"github.com/hone-rl/hone/trainer/gpu"
	"github.com/hone-rl/hone/trainer/memplan"
)

// gpuMemory is the first GPU's memory in bytes, from NVML (a variable for
// tests).
var gpuMemory = func() (int64, error) {
	mon := gpu.Open()
	defer mon.Close()
	if !mon.Available() {
		return 0, fmt.Errorf("GPU memory: %s", mon.Reason())
	}
	devs, err := mon.Devices()
	if err != nil || len(devs) == 0 {
		return 0, fmt.Errorf("GPU memory: %v (%d devices)", err, len(devs))
	}
	return int64(devs[0].Total), nil
}

// makePlan is memplan.Make, and with auto checkpointing (trainer
// activation_checkpointing auto, which is selective on a GPU) the plan of
// full checkpointing instead when selective's does not fit wantTokens per
// micro-batch and full's holds more; the request returned is the one
// planned.
func makePlan(req memplan.Request, auto bool, wantTokens int64) (memplan.Plan, memplan.Request, error) {
	p, err := memplan.Make(req)
	if !auto || !req.Selective || (err == nil && p.MicroBatchTokens >= wantTokens) {
		return p, req, err
	}
	full := req
	full.Selective = false
	if fp, ferr := memplan.Make(full); ferr == nil && (err != nil || fp.MicroBatchTokens > p.MicroBatchTokens) {
		return fp, full, nil
	}
	return p, req, err
}

// fitMicroBatches sizes the trainer's micro-batches to the memory plan when
// it trains on a GPU: trainer/memplan for the model in modelDir, LoRA rank,
// the GPU's memory and the engines' share of it (trainer.engine_gpu_share).
// Memory grows linearly with a micro-batch's tokens (activation
// checkpointing), so the plan gives how many tokens fit: fewer than
// trainer.micro_batch_tokens lowers it, with a log line (a sequence longer
// than the budget still trains alone and may not fit); none refuses, with
// the numbers. The CPU backend is left alone.
func fitMicroBatches(opts *trainer.Options, be backends.Opened, modelDir string, log *slog.Logger) error {
	if be.Name == backends.CPU || be.Fallback != "" {
		return nil
	}
	gpuBytes, err := gpuMemory()
	if err != nil {
		return fmt.Errorf("trainer memory plan: %w", err)
	}
	mc, err := model.LoadConfig(filepath.Join(modelDir, "config.json"))
	if err != nil {
		return fmt.Errorf("trainer memory plan: %w", err)
	}
	req := memplan.Request{
		Model: memplan.Shapes{Hidden: mc.HiddenSize, Layers: mc.NumLayers, Heads: mc.NumHeads, KVHeads: mc.NumKVHeads,
			HeadDim: mc.HeadDim, MLP: mc.IntermediateSize, Vocab: mc.VocabSize, TiedEmbeddings: mc.TieWordEmbeddings},
		Rank: opts.LoRA.Rank, SeqLen: 1, GPUBytes: gpuBytes, EngineUtilization: opts.EngineGPUShare,
		WeightBytes: 4,
	}
	if opts.WeightDTypeOn(be.Name) == kernels.BF16 {
		req.WeightBytes = 2
		req.Autocast = opts.AutocastOn(be.Name)
	}
	selective := opts.CheckpointMode(be.Name) == model.CheckpointSelective
	req.Selective = selective
	p, req, err := makePlan(req, opts.ActivationCheckpointing == "auto", int64(opts.MicroBatchTokens))
	if selective && !req.Selective {
		log.Info("trainer memory plan: full activation checkpointing (selective would lower micro-batches)")
		opts.ActivationCheckpointing = "on"
	}
	if err != nil || p.MicroBatchTokens < 1 {
		return fmt.Errorf("trainer memory plan: refusing to train: the base weights (%d bytes each) and LoRA state need %.1f GB "+
			"before any token, the trainer has %.1f GB of the GPU's %.1f GB (engines at %.2f; lower "+
			"trainer.engine_gpu_share, or use a larger GPU)", req.WeightBytes, float64(p.BaseWeights+p.LoRAState+p.LogProbChunk+p.WidenedWeight+p.GEMMWorkspace)/1e9,
			float64(p.Budget)/1e9, float64(gpuBytes)/1e9, opts.EngineGPUShare)
	}
	if p.MicroBatchTokens < int64(opts.MicroBatchTokens) {
		log.Warn("trainer memory plan: micro-batches lowered to fit the GPU", "micro_batch_tokens", p.MicroBatchTokens,
			"configured", opts.MicroBatchTokens)
		opts.MicroBatchTokens = int(p.MicroBatchTokens)
	}
	log.Info("trainer memory plan", "gpu_bytes", gpuBytes, "budget", p.Budget, "micro_batch_tokens", opts.MicroBatchTokens,
		"plan_tokens", p.MicroBatchTokens, "autocast", req.Autocast, "selective_checkpointing", req.Selective)
	return nil
}
