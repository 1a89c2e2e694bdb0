package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/hone-rl/hone/config"
	"github.com/hone-rl/hone/kernels"
	"github.com/hone-rl/hone/kernels/backends"
	"github.com/hone-rl/hone/kernels/selftest"
	"github.com/hone-rl/hone/model"
	"github.com/hone-rl/hone/trainer"
	"github.com/hone-rl/hone/trainer/gpu"
	"github.com/hone-rl/hone/trainer/memplan"
)

func init() {
	register("selftest", "check a compute backend (cuda on a GPU) against the CPU backend: conformance suite and LoRA-step parity",
		runSelftest)
}

// openBackend opens a compute backend by name; tests replace it (a
// deliberately broken backend).
var openBackend = backends.Open

func runSelftest(ctx context.Context, args []string) error {
	fs := newFlags("selftest", "selftest [--backend cpu|cuda|emulated|auto] [--variant V] [--json] [flags]",
		"Runs the kernels conformance suite (every op against a float64 reference) and the LoRA-step parity\n"+
			"(a forward, backward and AdamW step of a small Qwen3 and Llama against the CPU backend, 1e-5\n"+
			"relative) on a backend, and prints one row per op or check. Exit 1 when a check fails, 2 when the\n"+
			"backend is not available (cuda in a hone built without -tags cuda, or no GPU).\n"+
			"cuda: the first GPU; emulated: the CUDA kernels run on the CPU through kernels/cuda's shim (slow;\n"+
			"what a machine without a GPU can check); auto: cuda when built with it and a GPU answers, else cpu.\n"+
			"On a GPU it also prints the trainer's memory plan (trainer/memplan) for the GPU's memory and the\n"+
			"configured model.")
	backend := fs.String("backend", backends.Auto, "cpu, cuda, emulated or auto")
	variant := fs.String("variant", "", "kernel variant (cuda/emulated: readable or fast, default fast; cpu: generic, avx2, ...)")
	asJSON := fs.Bool("json", false, "print the table as JSON")
	cfgFile := fs.String("config", "", "YAML config file: the model (model:) and trainer.lora.rank for the memory plan")
	modelDir := fs.String("model", "", "model folder (config.json) for the memory plan (default: the configured model)")
	seqLen := fs.Int("seq-len", 8192, "longest training sequence, tokens (memory plan)")
	engineShare := fs.Float64("engine-utilization", 0.45, "the engine's gpu_memory_utilization on the same GPU (memory plan)")
	if err := fs.parse(args); err != nil {
		return err
	}
	o, err := openBackend(*backend, *variant)
	if err != nil {
		if errors.Is(err, backends.ErrUnavailable) {
			return usageError{err}
		}
		return usagef("%v", err)
	}
	defer o.Close()
	if o.Fallback != "" && !*asJSON {
		fmt.Fprintf(stdout, "auto: testing cpu (cuda unavailable: %s)\n", o.Fallback)
	}
	rep := selftest.Run(ctx, o.Backend)
	rep.Backend = o.Label()
	var plan *planOut
	if o.Name == backends.CUDA {
		p, err := gpuPlan(*cfgFile, *modelDir, *seqLen, *engineShare)
		if err != nil {
			plan = &planOut{Error: err.Error()}
		} else {
			plan = &p
		}
	}
	if *asJSON {
		if err := writeSelftestJSON(stdout, rep, o.Fallback, plan); err != nil {
			return err
		}
	} else {
		if err := rep.WriteTable(stdout); err != nil {
			return err
		}
		if plan != nil {
			plan.write(stdout)
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("interrupted: %w", ctx.Err())
	}
	return rep.Err()
}

func writeSelftestJSON(w io.Writer, rep selftest.Report, fallback string, plan *planOut) error {
	raw, err := json.Marshal(rep)
	if err != nil {
		return fmt.Errorf("selftest json: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("selftest json: %w", err)
	}
	if fallback != "" {
		m["fallback"] = fallback
	}
	if plan != nil {
		m["memory_plan"] = plan
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return fmt.Errorf("selftest json: %w", err)
	}
	return nil
}

// planOut is the memory plan hone selftest prints on a GPU.
type planOut struct {
	GPU     string          `json:"gpu,omitempty"`
	Model   string          `json:"model,omitempty"`
	Request memplan.Request `json:"request"`
	Plan    memplan.Plan    `json:"plan"`
	Error   string          `json:"error,omitempty"` // the plan could not be made, or one sequence does not fit
}

// gpuPlan reads the first GPU's memory through NVML and plans the
// configured model on it.
func gpuPlan(cfgFile, modelDir string, seqLen int, engineShare float64) (planOut, error) {
	mon := gpu.Open()
	defer mon.Close()
	if !mon.Available() {
		return planOut{}, fmt.Errorf("memory plan: %s", mon.Reason())
	}
	devs, err := mon.Devices()
	if err != nil || len(devs) == 0 {
		return planOut{}, fmt.Errorf("memory plan: GPU memory: %v (%d devices)", err, len(devs))
	}
	p, err := memoryPlan(cfgFile, modelDir, int64(devs[0].Total), seqLen, engineShare)
	p.GPU = devs[0].Name
	return p, err
}

// memoryPlan plans the model of cfgFile (or modelDir) on a GPU of gpuBytes.
// A plan whose one sequence does not fit is returned with its numbers and
// the refusal in Error.
func memoryPlan(cfgFile, modelDir string, gpuBytes int64, seqLen int, engineShare float64) (planOut, error) {
	c, err := config.Load(cfgFile, os.Environ())
	if err != nil {
		return planOut{}, fmt.Errorf("memory plan: %w", err)
	}
	if modelDir == "" {
		modelDir = c.Model
	}
	if modelDir == "" {
		modelDir = c.Embedded.ModelDir
	}
	if modelDir == "" {
		return planOut{}, errors.New("memory plan: no model configured (--model DIR, or model: in --config)")
	}
	mc, err := model.LoadConfig(filepath.Join(modelDir, "config.json"))
	if err != nil {
		return planOut{}, fmt.Errorf("memory plan: %w", err)
	}
	req := memplan.Request{
		Model: memplan.Shapes{Hidden: mc.HiddenSize, Layers: mc.NumLayers, Heads: mc.NumHeads, KVHeads: mc.NumKVHeads,
			HeadDim: mc.HeadDim, MLP: mc.IntermediateSize, Vocab: mc.VocabSize, TiedEmbeddings: mc.TieWordEmbeddings},
		Rank: c.Trainer.LoRA.Rank, SeqLen: seqLen, GPUBytes: gpuBytes, EngineUtilization: engineShare,
		WeightBytes: 4,
	}
	// As the trainer would run on this GPU (trainer.weight_dtype,
	// trainer.autocast).
	if c.Trainer.WeightDTypeOn(backends.CUDA) == kernels.BF16 {
		req.WeightBytes, req.Autocast = 2, c.Trainer.AutocastOn(backends.CUDA)
	}
	req.Selective = c.Trainer.CheckpointMode(backends.CUDA) == model.CheckpointSelective
	plan, req, err := makePlan(req, c.Trainer.ActivationCheckpointing == "auto", 1)
	out := planOut{Model: modelDir, Request: req, Plan: plan}
	if err != nil {
		out.Error = err.Error()
	}
	return out, nil
}

func (p *planOut) write(w io.Writer) {
	if p.Request.GPUBytes == 0 {
		fmt.Fprintf(w, "\nmemory plan: %s\n", p.Error)
		return
	}
	gb := func(b int64) string { return fmt.Sprintf("%.2f GB", float64(b)/1e9) }
	pl := p.Plan
	fmt.Fprintf(w, "\nmemory plan (trainer/memplan: arithmetic, not measured; assumes per-layer activation checkpointing, "+
		"trainer.activation_checkpointing on or auto)\n")
	fmt.Fprintf(w, "  %s, %s; model %s (%.2f B parameters), LoRA r=%d (%.1f M), %d-token sequences, engine at %.2f\n",
		p.GPU, gb(p.Request.GPUBytes), p.Model, float64(pl.Params)/1e9, p.Request.Rank, float64(pl.LoRAParams)/1e6,
		p.Request.SeqLen, p.Request.EngineUtilization)
	for _, row := range []struct {
		what string
		b    int64
	}{
		{"trainer budget (GPU x (1 - engine) - context)", pl.Budget},
		{fmt.Sprintf("base weights, %d bytes each", p.Request.WeightBytes), pl.BaseWeights},
		{"LoRA params + grads + AdamW m, v, fp32", pl.LoRAState},
		{"checkpointed layer inputs", pl.Checkpoints},
		{"one layer's activations", pl.LayerActs},
		{"backward scratch", pl.BackwardScratch},
		{"log-prob chunk", pl.LogProbChunk},
		{fmt.Sprintf("GEMM temporaries (autocast %v)", p.Request.Autocast), pl.CastScratch + pl.WidenedWeight + pl.GEMMWorkspace},
		{"total for one sequence", pl.Total},
	} {
		fmt.Fprintf(w, "  %-48s %s\n", row.what, gb(row.b))
	}
	if p.Error != "" {
		fmt.Fprintf(w, "  does not fit: %s\n", p.Error)
		return
	}
	fmt.Fprintf(w, "  micro-batch budget: %d tokens (%d whole sequences)\n", pl.MicroBatchTokens, pl.MicroBatchSequences)
}

// openTrainerBackend opens trainer.backend for hone serve --train and hone
// train (openChecked).
func openTrainerBackend(ctx context.Context, name string, log *slog.Logger) (backends.Opened, error) {
	return openChecked(ctx, backendUse{key: "trainer.backend", verb: "train", doing: "training"}, name, log)
}

// openEngineBackend opens engine_embedded.backend for the embedded engine
// (openChecked).
func openEngineBackend(ctx context.Context, name string, log *slog.Logger) (backends.Opened, error) {
	return openChecked(ctx, backendUse{key: "engine_embedded.backend", verb: "serve", doing: "serving"}, name, log)
}

// backendUse names what a backend is opened for, in messages.
type backendUse struct{ key, verb, doing string }

// openChecked opens a configured backend. cpu is the CPU backend, as
// always. cuda must be available (a hone built with -tags cuda, a GPU) and
// pass kernels/selftest first: otherwise it is refused, naming the failing
// ops. auto uses cuda when it is available and passes the selftest, and
// falls back to cpu with a log line when it is not.
func openChecked(ctx context.Context, u backendUse, name string, log *slog.Logger) (backends.Opened, error) {
	switch name {
	case "", trainer.BackendCPU:
		return openBackend(backends.CPU, "")
	case trainer.BackendCUDA, trainer.BackendAuto:
	default:
		return backends.Opened{}, fmt.Errorf("%s %q: want cpu, cuda or auto", u.key, name)
	}
	o, err := openBackend(name, "")
	if err != nil {
		if name == trainer.BackendCUDA {
			return backends.Opened{}, fmt.Errorf("%s cuda: refusing to %s: %w "+
				"(set %s to cpu or auto to %s on the CPU)", u.key, u.verb, err, u.key, u.verb)
		}
		return backends.Opened{}, fmt.Errorf("%s auto: %w", u.key, err)
	}
	if o.Fallback != "" {
		log.Info(u.key+" auto: "+u.doing+" on cpu", "cuda_unavailable", o.Fallback)
		return o, nil
	}
	if o.Name == backends.CPU {
		return o, nil
	}
	log.Info(u.key+": running hone selftest before "+u.doing, "backend", o.Label())
	rep := selftest.Run(ctx, o.Backend)
	rep.Backend = o.Label()
	if ctx.Err() != nil {
		o.Close()
		return backends.Opened{}, fmt.Errorf("%s %s: selftest interrupted: %w", u.key, name, ctx.Err())
	}
	if err := rep.Err(); err != nil {
		o.Close()
		if name == trainer.BackendAuto {
			// auto asks for the best backend that works.
			log.Warn(u.key+" auto: the GPU failed hone selftest, "+u.doing+" on cpu", "failed", rep.Failed(), "err", err)
			return openBackend(backends.CPU, "")
		}
		return backends.Opened{}, fmt.Errorf("%s %s: refusing to %s on %s: %w", u.key, name, u.verb, o.Label(), err)
	}
	log.Info(u.key+": selftest passed", "backend", o.Label(), "checks", len(rep.Results), "worst", worstRow(rep))
	return o, nil
}

// worstRow names the row closest to its tolerance, for the log.
func worstRow(rep selftest.Report) string {
	best, q := "", -1.0
	for _, r := range rep.Results {
		if r.Tol > 0 && r.MaxErr/r.Tol > q {
			best, q = r.Name, r.MaxErr/r.Tol
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("%s at %.2g of its tolerance", strings.TrimSpace(best), q)
}
