// Command gpu measures a LoRA training step (forward, backward, AdamW over
// a rank-16 LoRA on q, k, v, o, gate, up and down; base frozen) on a GPU,
// for Qwen3-0.6B's and Qwen3-8B's shapes with random weights made on the
// device (model.NewOnDevice: nothing is downloaded, and the host makes no
// per-weight random numbers), and prints tokens/s, MFU and where the step's
// time goes per op class (attention forward and backward, GEMMs, norms, LM
// head and log-prob, optimizer, other ops, memory), timed by kernels/profile
// (CUDA events on a GPU, the wall clock on the host).
//
//	go run ./bench/gpu [-backend auto|cuda|emulated|cpu] [-tiny] [-tokens 2048] [-steps 3] [-peak-tflops F]
//	                   [-config hone.yaml] [-weight-dtype auto|float32|bfloat16] [-autocast auto|on|off]
//	                   [-checkpointing auto|on|selective|off] [-compare] [-profile=false] [-shapes qwen3-0.6b,qwen3-8b]
//	                   [-lora-autocast on|off|both] [-model DIR]
//	make bench-gpu ARGS='...'
//
// It measures what hone serve --train runs: the base weights' dtype,
// autocast and activation checkpointing come from the trainer's options
// (trainer.weight_dtype, trainer.autocast, trainer.activation_checkpointing;
// -config FILE and the trainer keys' HONE_ variables as hone serve reads them,
// flags last), each "auto" by default, resolved for the backend as
// trainer.LoadPolicy resolves them: on a GPU (and on the emulated CUDA
// backend) bf16 weights, autocast and checkpointing; on the CPU float32
// without either. -compare runs every shape twice, float32 weights and bf16
// weights, side by side. Under autocast the LoRA GEMMs run in bf16
// (model.SetAutocastLoRA); -lora-autocast off keeps them float32, and both
// runs each autocast setting both ways.
//
// The GPU backend needs a binary built with -tags cuda: make bench-gpu does
// that (scripts/cuda/build.sh) where nvidia-smi exists, and the GPU bundle
// (make gpu-bundle) ships one. Without a GPU it prints "not measured: no
// GPU" and exits 0. -backend emulated -tiny (or cpu -tiny) runs the same
// code end to end on a small shape, to check the program itself; its
// numbers say nothing about a GPU.
//
// Memory is estimated first (weights in their dtype, activations as
// checkpointing keeps them); when a shape does not fit in the GPU's free
// memory it runs with fewer layers and says so. MFU counts the model's FLOPs
// (frozen base: forward and input gradients, 4 FLOPs per weight and token;
// LoRA: 6 per LoRA weight and token; causal attention: forward once,
// backward twice; checkpointing's recomputed forward is not counted: it is
// overhead) against the GPU's dense FP32 peak and its dense BF16
// tensor-core peak.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hone-rl/hone/config"
	"github.com/hone-rl/hone/kernels"
	"github.com/hone-rl/hone/kernels/backends"
	"github.com/hone-rl/hone/kernels/profile"
	"github.com/hone-rl/hone/model"
	"github.com/hone-rl/hone/trainer"
	"github.com/hone-rl/hone/trainer/gpu"
	"github.com/hone-rl/hone/trainer/memplan"
)

// startCPUProfile starts the -cpuprofile profile unless it is unset or
// taken (one run profiles the first shape's timed steps); the function it
// returns stops it.
func startCPUProfile(o options) (func(), error) {
	if o.cpuProfile == "" || cpuProfiled {
		return func() {}, nil
	}
	cpuProfiled = true
	f, err := os.Create(o.cpuProfile)
	if err != nil {
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// cpuProfiled is set once -cpuprofile has started.
var cpuProfiled bool

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench/gpu:", err)
		os.Exit(1)
	}
}

// shape is one benchmarked model.
type shape struct {
	name string
	cfg  *model.Config
	dir  string // -model: loaded from this folder instead of made
}

func qwen3Shape8B() *model.Config {
	return &model.Config{Architecture: model.ArchQwen3, VocabSize: 151936, HiddenSize: 4096, IntermediateSize: 12288,
		NumLayers: 36, NumHeads: 32, NumKVHeads: 8, HeadDim: 128, MaxPositions: 40960, RMSNormEps: 1e-6,
		RopeTheta: 1e6, QKNorm: true}
}

// options are the command line.
type options struct {
	backend, variant string
	tiny             bool
	tokens, steps    int
	rank             int
	peakTFLOPS       float64
	freeBytes        int64 // memory the run may use (tests; 0: NVML's free memory)
	configFile       string
	// The trainer's settings ("" = the configured one, "auto" by default).
	weightDType, autocast, checkpointing string
	compare                              bool
	loraAutocast                         string // on, off or both
	profile                              bool
	modelDir                             string
	shapes                               string   // comma-separated names ("" = all)
	cpuProfile                           string   // -cpuprofile: the host's CPU profile of the first shape's timed steps
	env                                  []string // HONE_* variables (os.Environ(); tests set their own)
}

func run(ctx context.Context, args []string, w io.Writer) error {
	o := options{env: os.Environ()}
	fs := flag.NewFlagSet("bench/gpu", flag.ContinueOnError)
	fs.StringVar(&o.backend, "backend", backends.Auto, "auto (cuda if built and a GPU answers), cuda, emulated or cpu (the last two with -tiny)")
	fs.StringVar(&o.variant, "variant", "", "kernel variant (cuda: readable or fast, default fast)")
	fs.BoolVar(&o.tiny, "tiny", false, "the tiny preset instead of the Qwen3 shapes (checks the program end to end)")
	fs.IntVar(&o.tokens, "tokens", 0, "tokens per step, one sequence (default 2048; 128 with -tiny)")
	fs.IntVar(&o.steps, "steps", 3, "timed steps per shape (after one warm-up step)")
	fs.IntVar(&o.rank, "rank", 0, "LoRA rank (default: trainer.lora.rank, 16)")
	fs.Float64Var(&o.peakTFLOPS, "peak-tflops", 0, "the GPU's dense FP32 peak in TFLOP/s (default: from the GPU's name when known)")
	fs.StringVar(&o.configFile, "config", "", "hone's YAML config: its trainer: section (weight_dtype, autocast, activation_checkpointing, lora.rank) as hone serve --train reads it, with the HONE_* variables")
	fs.StringVar(&o.weightDType, "weight-dtype", "", "base weights: auto, float32 or bfloat16 (default: trainer.weight_dtype, auto: bfloat16 on a GPU)")
	fs.StringVar(&o.autocast, "autocast", "", "auto, on or off (default: trainer.autocast, auto: on with bf16 weights on a GPU)")
	fs.StringVar(&o.checkpointing, "checkpointing", "", "activation checkpointing: auto, on, selective or off (default: trainer.activation_checkpointing, auto: selective on a GPU)")
	fs.BoolVar(&o.compare, "compare", false, "run every shape twice: float32 weights, then bf16 weights (autocast as set)")
	fs.StringVar(&o.loraAutocast, "lora-autocast", "on", "under autocast, the LoRA GEMMs in bf16 (on), float32 (off), or each autocast setting both ways (both)")
	fs.BoolVar(&o.profile, "profile", true, "after the timed steps, one more step timed per op class (CUDA events on a GPU)")
	fs.StringVar(&o.shapes, "shapes", "", "comma-separated shapes to run: qwen3-0.6b, qwen3-8b (default: both)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write the host's CPU profile (pprof) of the first shape's timed steps to this file: where the host's time per op goes")
	fs.StringVar(&o.modelDir, "model", "", "a model folder (config.json + safetensors) to load, in the weights' dtype, instead of the shapes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.tokens == 0 {
		o.tokens = 2048
		if o.tiny {
			o.tokens = 128
		}
	}
	switch o.loraAutocast {
	case "on", "off", "both":
	default:
		return fmt.Errorf("-lora-autocast %q: want on, off or both", o.loraAutocast)
	}
	if o.tokens < 2 || o.steps < 1 || o.rank < 0 {
		return fmt.Errorf("-tokens %d, -steps %d, -rank %d: want >= 2, >= 1, >= 1", o.tokens, o.steps, o.rank)
	}
	topts, err := trainerOptions(o)
	if err != nil {
		return err
	}
	be, err := backends.Open(o.backend, o.variant)
	switch {
	case errors.Is(err, backends.ErrUnavailable):
		fmt.Fprintf(w, "not measured: no GPU (%v)\n", err)
		return nil
	case err != nil:
		return err
	}
	defer be.Close()
	if be.Fallback != "" {
		fmt.Fprintf(w, "not measured: no GPU (%s)\n", be.Fallback)
		return nil
	}
	if be.Name != backends.CUDA && !o.tiny && o.modelDir == "" {
		return fmt.Errorf("-backend %s runs the Qwen3 shapes at CPU speed (hours): use it with -tiny, or run on a GPU", be.Name)
	}
	return bench(ctx, w, be, o, topts)
}

// trainerOptions are the trainer's options as hone serve --train reads
// them (defaults < -config < HONE_* variables), then the flags.
func trainerOptions(o options) (trainer.Options, error) {
	c, err := config.Load(o.configFile, o.env)
	if err != nil {
		return trainer.Options{}, err
	}
	t := c.Trainer
	for _, f := range []struct {
		flag string
		dst  *string
	}{{o.weightDType, &t.WeightDType}, {o.autocast, &t.Autocast}, {o.checkpointing, &t.ActivationCheckpointing}} {
		if f.flag != "" {
			*f.dst = f.flag
		}
	}
	if o.rank > 0 {
		t.LoRA.Rank = o.rank
	}
	t.Mode = trainer.ModeLoRA
	if err := t.Validate(); err != nil {
		return t, fmt.Errorf("trainer options: %w", err)
	}
	return t, nil
}

// setting is how one run stores and computes: the trainer's resolution of
// weight_dtype, autocast and activation_checkpointing on the backend.
type setting struct {
	weights    kernels.DType
	autocast   bool
	checkpoint model.Checkpointing
	loraF32    bool // under autocast, the LoRA GEMMs in float32 (-lora-autocast off)
}

func (s setting) String() string {
	b := s.weights.String()
	if s.autocast {
		b += "+autocast"
		if s.loraF32 {
			b += " (LoRA fp32)"
		}
	}
	switch s.checkpoint {
	case model.CheckpointFull:
		b += ", ckpt"
	case model.CheckpointSelective:
		b += ", sel. ckpt"
	}
	return b
}

// settings resolves the options for the backend named be (what
// trainer.LoadPolicy does), or both dtypes with -compare; lora is
// -lora-autocast.
func settings(t trainer.Options, be string, compare bool, lora string) []setting {
	ckpt := t.CheckpointMode(be)
	sets := []setting{{t.WeightDTypeOn(be), t.AutocastOn(be), ckpt, false}}
	if compare {
		sets = []setting{
			{kernels.F32, false, ckpt, false},
			{kernels.BF16, model.AutocastFor(t.Autocast, be != "cpu", kernels.BF16), ckpt, false},
		}
	}
	var out []setting
	for _, st := range sets {
		if !st.autocast {
			out = append(out, st)
			continue
		}
		if lora != "off" {
			out = append(out, st)
		}
		if lora != "on" {
			st.loraF32 = true
			out = append(out, st)
		}
	}
	return out
}

// device is what the run knows of the GPU.
type device struct {
	name               string
	total, free        int64
	fp32Peak, bf16Peak float64 // TFLOP/s, 0 when unknown
	mon                *gpu.Monitor
}

func probe(be backends.Opened, o options) device {
	d := device{name: "the host (no GPU: no peak)"}
	if be.Name == backends.CUDA {
		d.mon = gpu.Open()
		if devs, err := d.mon.Devices(); err == nil && len(devs) > 0 {
			d.name, d.total, d.free = devs[0].Name, int64(devs[0].Total), int64(devs[0].Free)
			d.fp32Peak, d.bf16Peak = peaks(d.name)
		} else {
			d.name = "GPU 0 (NVML: " + d.mon.Reason() + ")"
		}
	}
	if o.freeBytes > 0 {
		d.free = o.freeBytes
	}
	if o.peakTFLOPS > 0 {
		d.fp32Peak = o.peakTFLOPS
	}
	return d
}

// used is the GPU's used memory by NVML (0 when unknown).
func (d device) used() int64 {
	if d.mon == nil {
		return 0
	}
	devs, err := d.mon.Devices()
	if err != nil || len(devs) == 0 {
		return 0
	}
	return int64(devs[0].Total) - int64(devs[0].Free)
}

// peaks returns the dense FP32 (no tensor cores) and dense BF16 tensor-core
// peaks in TFLOP/s of a GPU by NVML name, from NVIDIA's data sheets
// (boost clock, no sparsity); 0, 0 when the name is not known.
func peaks(name string) (fp32, bf16 float64) {
	n := strings.ToUpper(name)
	for _, g := range []struct {
		has        []string
		fp32, bf16 float64
	}{
		{[]string{"H100", "PCIE"}, 51.2, 756},
		{[]string{"H100"}, 66.9, 989},
		{[]string{"H200"}, 66.9, 989},
		{[]string{"A100"}, 19.5, 312},
		{[]string{"L40S"}, 91.6, 362},
		{[]string{"L4"}, 30.3, 121},
		{[]string{"A10"}, 31.2, 125},
		{[]string{"4090"}, 82.6, 165},
	} {
		all := true
		for _, h := range g.has {
			all = all && strings.Contains(n, h)
		}
		if all {
			return g.fp32, g.bf16
		}
	}
	return 0, 0
}

func shapes(o options) ([]shape, error) {
	if o.modelDir != "" {
		c, err := model.LoadConfig(filepath.Join(o.modelDir, "config.json"))
		if err != nil {
			return nil, err
		}
		return []shape{{filepath.Base(filepath.Clean(o.modelDir)), c, o.modelDir}}, nil
	}
	if o.tiny {
		c, err := model.Preset("tiny")
		if err != nil {
			return nil, err
		}
		return []shape{{name: "tiny", cfg: c}}, nil
	}
	c06, err := model.Preset("qwen3-0.6b-shape")
	if err != nil {
		return nil, err
	}
	all := []shape{{name: "qwen3-0.6b", cfg: c06}, {name: "qwen3-8b", cfg: qwen3Shape8B()}}
	if o.shapes == "" {
		return all, nil
	}
	var out []shape
	for _, n := range strings.Split(o.shapes, ",") {
		found := false
		for _, s := range all {
			if s.name == strings.TrimSpace(n) {
				out, found = append(out, s), true
			}
		}
		if !found {
			return nil, fmt.Errorf("-shapes: unknown shape %q (have qwen3-0.6b, qwen3-8b)", n)
		}
	}
	return out, nil
}

func shapesOf(c *model.Config) memplan.Shapes {
	return memplan.Shapes{Hidden: c.HiddenSize, Layers: c.NumLayers, Heads: c.NumHeads, KVHeads: c.NumKVHeads,
		HeadDim: c.HeadDim, MLP: c.IntermediateSize, Vocab: c.VocabSize, TiedEmbeddings: c.TieWordEmbeddings}
}

// memory estimates the bytes a LoRA step of s needs on the device as model/
// runs it with st: the base weights in their dtype (norms float32), every
// layer's activations kept for the backward or, with full checkpointing,
// every layer's input plus one layer's recomputed activations (selective:
// every layer's GEMM and attention outputs plus one layer's norms, RoPE and
// SwiGLU outputs), one layer's
// backward temporaries, the LoRA state (fp32 weights, gradients, AdamW
// moments), the chunked log-prob's workspace (the backend's default chunk,
// 2^24 logits), and autocast's bf16 copy of the widest GEMM operand plus
// cuBLASLt's workspace (or, bf16 without autocast, the widest projection
// widened to float32). It is an estimate (the caching allocator's rounding
// and cuBLAS's workspace come on top: 10% is kept free).
func memory(s memplan.Shapes, tokens, rank int, st setting) (fixed, perLayer int64) {
	h, q, kv, m := int64(s.Hidden), int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim), int64(s.MLP)
	wb, t := int64(st.weights.Size()), int64(tokens)
	layerWeights := wb*(h*q+2*h*kv+q*h+3*h*m) + 4*(2*h+2*int64(s.HeadDim))
	acts := 4 * s.ActFloatsPerToken() * t
	lora := 16 * s.LoRAParams(rank) / int64(s.Layers)
	emb := wb * int64(s.Vocab) * h
	if !s.TiedEmbeddings {
		emb *= 2
	}
	fixed = emb + 4*h + acts /* one layer's backward temporaries */ + 4*(1<<24)
	perLayer = layerWeights + lora + acts
	switch st.checkpoint {
	case model.CheckpointFull:
		fixed += acts // the recomputed layer's activations
		perLayer = layerWeights + lora + 4*h*t
	case model.CheckpointSelective:
		fixed += 4 * s.CheapFloatsPerToken() * t
		perLayer = layerWeights + lora + 4*s.KeptFloatsPerToken()*t
	}
	switch {
	case st.weights == kernels.BF16 && st.autocast:
		fixed += 2*s.CastWidth(rank > 0)*t + 32<<20
	case st.weights == kernels.BF16:
		fixed += 4 * s.MaxProjection()
	}
	return fixed, perLayer
}

// fitLayers is how many layers of s fit in free bytes (keeping 10% free).
func fitLayers(s memplan.Shapes, tokens, rank int, st setting, free int64) (layers int, need int64) {
	fixed, per := memory(s, tokens, rank, st)
	need = fixed + per*int64(s.Layers)
	if free <= 0 || need <= free*9/10 {
		return s.Layers, need
	}
	n := (free*9/10 - fixed) / per
	return int(max(0, n)), need
}

// flops counts the model FLOPs of one step of one tokens-long sequence.
func flops(s memplan.Shapes, tokens, rank int) float64 {
	h, q, kv, m := float64(s.Hidden), float64(s.Heads*s.HeadDim), float64(s.KVHeads*s.HeadDim), float64(s.MLP)
	t, l := float64(tokens), float64(s.Layers)
	linear := l*(h*q+2*h*kv+q*h+3*h*m) + float64(s.Vocab)*h // the LM head too
	attnFwd := l * 4 * float64(s.Heads*s.HeadDim) * t * (t + 1) / 2
	return 4*linear*t + 6*float64(s.LoRAParams(rank))*t + 3*attnFwd
}

type result struct {
	name          string
	set           setting
	layers, of    int
	need          int64
	stepSeconds   float64
	initSeconds   float64
	usedBytes     int64 // NVML's used memory after the steps less before the model (0: unknown)
	peakBytes     int64 // the allocator's most live bytes at once: weights, adapter state, a step's tensors (0: unknown)
	planBytes     int64 // trainer/memplan's prediction of that peak (0: none for the setting)
	tokens        int
	flopsPerStep  float64
	note          string
	skipped       string
	measuredSteps int
	prof          *profile.Profile
	profWall      float64
}

func bench(ctx context.Context, w io.Writer, be backends.Opened, o options, topts trainer.Options) error {
	d := probe(be, o)
	if d.mon != nil {
		defer d.mon.Close()
	}
	sh, err := shapes(o)
	if err != nil {
		return err
	}
	rank := topts.LoRA.Rank
	sets := settings(topts, be.Backend.Name(), o.compare, o.loraAutocast)
	fmt.Fprintf(w, "bench/gpu: LoRA step (forward, backward, AdamW; r=%d on q,k,v,o,gate,up,down; base frozen), "+
		"one %d-token sequence per step, mean of %d timed step(s) after one warm-up\n", rank, o.tokens, o.steps)
	fmt.Fprintf(w, "trainer settings: weight_dtype %s, autocast %s, activation_checkpointing %s -> on %s: %v\n",
		topts.WeightDType, topts.Autocast, topts.ActivationCheckpointing, be.Backend.Name(),
		settings(topts, be.Backend.Name(), false, "on")[0])
	fmt.Fprintf(w, "backend %s on %s", be.Label(), d.name)
	switch {
	case d.total > 0:
		fmt.Fprintf(w, " (%.1f GB, %.1f GB free)", float64(d.total)/1e9, float64(d.free)/1e9)
	case d.free > 0:
		fmt.Fprintf(w, " (memory limited to %.3g GB)", float64(d.free)/1e9)
	}
	fmt.Fprintln(w)
	var rows []result
	for _, s := range sh {
		for _, st := range sets {
			r, err := benchOne(ctx, be.Backend, d, s, st, rank, o)
			if err != nil {
				return fmt.Errorf("%s (%v): %w", s.name, st, err)
			}
			rows = append(rows, r)
		}
	}
	if err := writeRows(w, rows, d); err != nil {
		return err
	}
	for _, r := range rows {
		if r.prof == nil {
			continue
		}
		fmt.Fprintf(w, "\nper op class, %s (%v), %d layers: one profiled step, %.3f s wall (%s)\n", r.name, r.set,
			r.layers, r.profWall, r.prof.Clock)
		if err := r.prof.WriteTable(w, r.profWall); err != nil {
			return err
		}
	}
	return nil
}

// benchOne measures one shape with one setting.
func benchOne(ctx context.Context, be kernels.Backend, d device, s shape, st setting, rank int, o options) (result, error) {
	cfg := *s.cfg
	cfg.MaxPositions = max(cfg.MaxPositions, o.tokens)
	ms := shapesOf(&cfg)
	r := result{name: s.name, set: st, of: cfg.NumLayers, tokens: o.tokens}
	r.layers, r.need = fitLayers(ms, o.tokens, rank, st, d.free)
	if s.dir != "" {
		r.layers = cfg.NumLayers // a loaded model runs whole
	}
	if r.layers == 0 {
		r.skipped = fmt.Sprintf("not measured: not even one layer fits (%.1f GB estimated for all %d layers, %.1f GB free)",
			float64(r.need)/1e9, cfg.NumLayers, float64(d.free)/1e9)
		return r, nil
	}
	if r.layers < cfg.NumLayers {
		r.note = fmt.Sprintf("%d of %d layers: all %d need ~%.0f GB (%v), %.0f GB free",
			r.layers, cfg.NumLayers, cfg.NumLayers, float64(r.need)/1e9, st, float64(d.free)/1e9)
		cfg.NumLayers = r.layers
	}
	ms.Layers = cfg.NumLayers
	r.flopsPerStep = flops(ms, o.tokens, rank)
	if t, ok := be.(interface{ Trim() }); ok {
		t.Trim() // the previous row's cached blocks back to the device, so NVML's used memory is this row's
	}
	before := d.used()
	pk, hasPeak := be.(peaker)
	if hasPeak {
		pk.ResetPeak()
	}
	var err error
	r.stepSeconds, r.initSeconds, r.prof, r.profWall, err = timeSteps(ctx, be, &cfg, s.dir, st, rank, o)
	if err != nil {
		return r, err
	}
	if after := d.used(); before > 0 && after > before {
		r.usedBytes = after - before
	}
	if hasPeak {
		r.peakBytes = pk.PeakLiveBytes()
	}
	r.planBytes = planned(ms, o.tokens, rank, st)
	r.measuredSteps = o.steps
	return r, nil
}

// peaker is a backend whose allocator reports its high-water mark of live
// bytes (kernels/cuda).
type peaker interface {
	ResetPeak()
	PeakLiveBytes() int64
}

// planned is trainer/memplan's prediction of a step's peak live bytes for
// one tokens-long sequence with st (0 where it plans none: float32 weights
// or no checkpointing).
func planned(s memplan.Shapes, tokens, rank int, st setting) int64 {
	if st.weights != kernels.BF16 || st.checkpoint == model.CheckpointOff {
		return 0
	}
	p, err := memplan.Make(memplan.Request{Model: s, Rank: rank, SeqLen: tokens, GPUBytes: 1 << 50, Autocast: st.autocast,
		Selective: st.checkpoint == model.CheckpointSelective})
	if err != nil {
		return 0
	}
	return p.Total
}

func writeRows(w io.Writer, rows []result, d device) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "shape\tweights\tlayers\ttokens/step\ts/step\ttokens/s\tTFLOP/step\tTFLOP/s\tMFU (FP32 peak)\tMFU (BF16 peak)\tGB used\tpeak GB\tplan GB\tinit s\tnote")
	for _, r := range rows {
		if r.skipped != "" {
			fmt.Fprintf(tw, "%s\t%v\t0/%d\t%d\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t%s\n", r.name, r.set, r.of, r.tokens, r.skipped)
			continue
		}
		tflops := r.flopsPerStep / r.stepSeconds / 1e12
		mfu := func(peak float64) string {
			if peak == 0 {
				return "n/a"
			}
			return fmt.Sprintf("%.1f%%", 100*tflops/peak)
		}
		gbs := func(b int64) string {
			if b <= 0 {
				return "n/a"
			}
			return fmt.Sprintf("%.1f", float64(b)/1e9)
		}
		fmt.Fprintf(tw, "%s\t%v\t%d/%d\t%d\t%.3f\t%.0f\t%.3g\t%.3g\t%s\t%s\t%s\t%s\t%s\t%.2f\t%s\n", r.name, r.set, r.layers,
			r.of, r.tokens, r.stepSeconds, float64(r.tokens)/r.stepSeconds, r.flopsPerStep/1e12, tflops, mfu(d.fp32Peak),
			mfu(d.bf16Peak), gbs(r.usedBytes), gbs(r.peakBytes), gbs(r.planBytes), r.initSeconds, r.note)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if d.fp32Peak == 0 {
		_, err := fmt.Fprintln(w, "MFU n/a: no known peak for this device (-peak-tflops sets the FP32 one)")
		if err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
	return nil
}

// timeSteps builds the model (random weights made on the device, or
// loaded from dir) on a profiling wrapper of be, runs one warm-up step,
// returns the mean wall time of o.steps more (timing off) and, with
// o.profile, the per-class profile of one more step and its wall time.
func timeSteps(ctx context.Context, raw kernels.Backend, cfg *model.Config, dir string, st setting, rank int,
	o options) (stepSec, initSec float64, prof *profile.Profile, profWall float64, err error) {
	be, rec := profile.Wrap(raw)
	rec.SetOn(false)
	t0 := time.Now()
	var m *model.Model
	if dir != "" {
		m, err = model.LoadT(dir, be, st.weights)
	} else {
		m, err = model.NewOnDevice(cfg, be, st.weights, 1)
	}
	if err != nil {
		return 0, 0, nil, 0, err
	}
	defer m.Free()
	m.SetCheckpointMode(st.checkpoint)
	m.SetAutocast(st.autocast)
	m.SetAutocastLoRA(!st.loraF32)
	a, err := model.NewAdapter(m, "bench", model.AdapterConfig{Rank: rank, Alpha: float64(2 * rank)}, 1)
	if err != nil {
		return 0, 0, nil, 0, err
	}
	defer a.Free()
	g := m.NewGrads(a, false)
	defer g.Free()
	moments := make([][2]kernels.Tensor, len(a.Params()))
	for i, p := range a.Params() {
		moments[i] = [2]kernels.Tensor{be.New(p.Tensor.Shape()...), be.New(p.Tensor.Shape()...)}
	}
	defer func() {
		for _, mv := range moments {
			be.Free(mv[0])
			be.Free(mv[1])
		}
	}()
	be.SumSquares(a.Params()[0].Tensor) // waits for the device
	if err := be.Err(); err != nil {
		return 0, 0, nil, 0, fmt.Errorf("weights: %w", err)
	}
	initSec = time.Since(t0).Seconds()
	rng := rand.New(rand.NewPCG(1, 2))
	seq := make([]int32, o.tokens)
	for i := range seq {
		seq[i] = int32(rng.IntN(m.Config().VocabSize))
	}
	mask := [][]float32{make([]float32, o.tokens-1)}
	for i := range mask[0] {
		mask[0][i] = 1
	}
	// Listed once: each listing formats every tensor's name (the trainer
	// lists them once per step too).
	params, grads := a.Params(), g.Adapter()
	step := func(n int) error {
		act, err := m.ForwardTrain(ctx, [][]int32{seq}, a)
		if err != nil {
			return err
		}
		defer act.Free()
		_, dlogp, err := model.MaskedMean(act.LogProbs(), mask)
		if err != nil {
			return err
		}
		g.Zero()
		if err := m.Backward(ctx, act, dlogp, g); err != nil {
			return err
		}
		for i, gp := range grads {
			be.AdamWStep(params[i].Tensor, gp.Tensor, moments[i][0], moments[i][1],
				kernels.AdamW{LR: 1e-5, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: n})
		}
		be.SumSquares(params[0].Tensor) // waits for the device
		if err := be.Err(); err != nil {
			return fmt.Errorf("step %d: %w", n, err)
		}
		return nil
	}
	if err := step(1); err != nil {
		return 0, 0, nil, 0, err
	}
	stopProfile, err := startCPUProfile(o)
	if err != nil {
		return 0, 0, nil, 0, err
	}
	start := time.Now()
	for i := 0; i < o.steps; i++ {
		if err := step(i + 2); err != nil {
			stopProfile()
			return 0, 0, nil, 0, err
		}
	}
	stepSec = time.Since(start).Seconds() / float64(o.steps)
	stopProfile()
	if !o.profile {
		return stepSec, initSec, nil, 0, nil
	}
	rec.Reset()
	rec.SetOn(true)
	start = time.Now()
	err = step(o.steps + 2)
	profWall = time.Since(start).Seconds()
	rec.SetOn(false)
	p := rec.Snapshot()
	if err != nil {
		return 0, 0, nil, 0, err
	}
	return stepSec, initSec, &p, profWall, nil
}
