// Command gpu measures a LoRA training step (forward, backward, AdamW over
// a rank-16 LoRA on q, k, v, o, gate, up and down; base frozen) on a GPU,
// for Qwen3-0.6B's and Qwen3-8B's shapes with random weights made in-process
// (nothing is downloaded), and prints tokens/s and MFU.
//
//	go run ./bench/gpu [-backend auto|cuda|emulated|cpu] [-tiny] [-tokens 2048] [-steps 3] [-peak-tflops F]
//	make bench-gpu ARGS='...'
//
// The GPU backend needs a binary built with -tags cuda: make bench-gpu does
// that (scripts/cuda/build.sh) where nvidia-smi exists. Without a GPU it prints "not measured: no GPU"
// and exits 0: no GPU has run it yet, so every GPU figure of bench/RESULTS.md
// reads "not measured". -backend emulated -tiny (or cpu -tiny) runs the same
// code end to end on a small shape, to check the program itself; its
// numbers say nothing about a GPU.
//
// The model runs in float32 (kernels.Backend has no bf16 storage yet) and
// model/ keeps every layer's activations (no activation checkpointing yet),
// so memory is estimated first; when the 8B shape does not fit in the GPU's
// free memory it runs with fewer layers and says so. MFU counts the model's
// FLOPs (frozen base: forward and input gradients, 4 FLOPs per weight and
// token; LoRA: 6 per LoRA weight and token; causal attention: forward once,
// backward twice) against the GPU's dense FP32 peak (what hone's SGEMM and
// kernels can reach) and, for comparison, its dense BF16 tensor-core peak.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hone-rl/hone/kernels"
	"github.com/hone-rl/hone/kernels/backends"
	"github.com/hone-rl/hone/model"
	"github.com/hone-rl/hone/trainer/gpu"
	"github.com/hone-rl/hone/trainer/memplan"
)

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
}

func run(ctx context.Context, args []string, w io.Writer) error {
	var o options
	fs := flag.NewFlagSet("bench/gpu", flag.ContinueOnError)
	fs.StringVar(&o.backend, "backend", backends.Auto, "auto (cuda if built and a GPU answers), cuda, emulated or cpu (the last two with -tiny)")
	fs.StringVar(&o.variant, "variant", "", "kernel variant (cuda: readable or fast, default fast)")
	fs.BoolVar(&o.tiny, "tiny", false, "the tiny preset instead of the Qwen3 shapes (checks the program end to end)")
	fs.IntVar(&o.tokens, "tokens", 0, "tokens per step, one sequence (default 2048; 128 with -tiny)")
	fs.IntVar(&o.steps, "steps", 3, "timed steps per shape (after one warm-up step)")
	fs.IntVar(&o.rank, "rank", 16, "LoRA rank")
	fs.Float64Var(&o.peakTFLOPS, "peak-tflops", 0, "the GPU's dense FP32 peak in TFLOP/s (default: from the GPU's name when known)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.tokens == 0 {
		o.tokens = 2048
		if o.tiny {
			o.tokens = 128
		}
	}
	if o.tokens < 2 || o.steps < 1 || o.rank < 1 {
		return fmt.Errorf("-tokens %d, -steps %d, -rank %d: want >= 2, >= 1, >= 1", o.tokens, o.steps, o.rank)
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
	if be.Name != backends.CUDA && !o.tiny {
		return fmt.Errorf("-backend %s runs the Qwen3 shapes at CPU speed (hours): use it with -tiny, or run on a GPU", be.Name)
	}
	return bench(ctx, w, be, o)
}

// device is what the run knows of the GPU.
type device struct {
	name               string
	total, free        int64
	fp32Peak, bf16Peak float64 // TFLOP/s, 0 when unknown
}

func probe(be backends.Opened, o options) device {
	d := device{name: "the host (no GPU: no peak)"}
	if be.Name == backends.CUDA {
		mon := gpu.Open()
		defer mon.Close()
		if devs, err := mon.Devices(); err == nil && len(devs) > 0 {
			d.name, d.total, d.free = devs[0].Name, int64(devs[0].Total), int64(devs[0].Free)
			d.fp32Peak, d.bf16Peak = peaks(d.name)
		} else {
			d.name = "GPU 0 (NVML: " + mon.Reason() + ")"
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
	if o.tiny {
		c, err := model.Preset("tiny")
		if err != nil {
			return nil, err
		}
		return []shape{{"tiny", c}}, nil
	}
	c06, err := model.Preset("qwen3-0.6b-shape")
	if err != nil {
		return nil, err
	}
	return []shape{{"qwen3-0.6b", c06}, {"qwen3-8b", qwen3Shape8B()}}, nil
}

func shapesOf(c *model.Config) memplan.Shapes {
	return memplan.Shapes{Hidden: c.HiddenSize, Layers: c.NumLayers, Heads: c.NumHeads, KVHeads: c.NumKVHeads,
		HeadDim: c.HeadDim, MLP: c.IntermediateSize, Vocab: c.VocabSize, TiedEmbeddings: c.TieWordEmbeddings}
}

// memory estimates the bytes a LoRA step of s needs on the device as model/
// runs it today: float32 weights, every layer's activations kept for the
// backward, one layer's backward temporaries, the LoRA state, and the
// chunked log-prob's workspace (the backend's default chunk, 2^24 logits).
// It is an estimate (the caching allocator's rounding and cuBLAS's
// workspace come on top: 10% is kept free).
func memory(s memplan.Shapes, tokens, rank int) (fixed, perLayer int64) {
	h, q, kv, m := int64(s.Hidden), int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim), int64(s.MLP)
	layerWeights := 4 * (h*q + 2*h*kv + q*h + 3*h*m + 2*h + 2*int64(s.HeadDim))
	acts := 4 * s.ActFloatsPerToken() * int64(tokens)
	lora := 16 * s.LoRAParams(rank) / int64(s.Layers)
	emb := 4 * int64(s.Vocab) * h
	if !s.TiedEmbeddings {
		emb *= 2
	}
	fixed = emb + 4*h + acts /* one layer's backward temporaries */ + 4*(1<<24)
	perLayer = layerWeights + acts + lora
	return fixed, perLayer
}

// fitLayers is how many layers of s fit in free bytes (keeping 10% free).
func fitLayers(s memplan.Shapes, tokens, rank int, free int64) (layers int, need int64) {
	fixed, per := memory(s, tokens, rank)
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
	layers, of    int
	need          int64
	stepSeconds   float64
	tokens        int
	flopsPerStep  float64
	note          string
	skipped       string
	measuredSteps int
}

func bench(ctx context.Context, w io.Writer, be backends.Opened, o options) error {
	d := probe(be, o)
	sh, err := shapes(o)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "bench/gpu: LoRA step (forward, backward, AdamW; r=%d on q,k,v,o,gate,up,down; base frozen; float32), "+
		"one %d-token sequence per step, mean of %d timed step(s) after one warm-up\n", o.rank, o.tokens, o.steps)
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
		cfg := *s.cfg
		cfg.MaxPositions = max(cfg.MaxPositions, o.tokens)
		ms := shapesOf(&cfg)
		r := result{name: s.name, of: cfg.NumLayers, tokens: o.tokens}
		r.layers, r.need = fitLayers(ms, o.tokens, o.rank, d.free)
		if r.layers == 0 {
			r.skipped = fmt.Sprintf("not measured: not even one layer fits (%.1f GB estimated for all %d layers, %.1f GB free)",
				float64(r.need)/1e9, cfg.NumLayers, float64(d.free)/1e9)
			rows = append(rows, r)
			continue
		}
		if r.layers < cfg.NumLayers {
			r.note = fmt.Sprintf("%d of %d layers: all %d need ~%.0f GB in float32 without activation checkpointing, %.0f GB free",
				r.layers, cfg.NumLayers, cfg.NumLayers, float64(r.need)/1e9, float64(d.free)/1e9)
			cfg.NumLayers = r.layers
		}
		ms.Layers = cfg.NumLayers
		r.flopsPerStep = flops(ms, o.tokens, o.rank)
		secs, err := timeSteps(ctx, be.Backend, &cfg, o)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		r.stepSeconds, r.measuredSteps = secs, o.steps
		rows = append(rows, r)
	}
	return writeRows(w, rows, d)
}

func writeRows(w io.Writer, rows []result, d device) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "shape\tlayers\ttokens/step\ts/step\ttokens/s\tTFLOP/step\tTFLOP/s\tMFU (FP32 peak)\tMFU (BF16 peak)\tnote")
	for _, r := range rows {
		if r.skipped != "" {
			fmt.Fprintf(tw, "%s\t0/%d\t%d\t-\t-\t-\t-\t-\t-\t%s\n", r.name, r.of, r.tokens, r.skipped)
			continue
		}
		tflops := r.flopsPerStep / r.stepSeconds / 1e12
		mfu := func(peak float64) string {
			if peak == 0 {
				return "n/a"
			}
			return fmt.Sprintf("%.1f%%", 100*tflops/peak)
		}
		fmt.Fprintf(tw, "%s\t%d/%d\t%d\t%.3f\t%.0f\t%.3g\t%.3g\t%s\t%s\t%s\n", r.name, r.layers, r.of, r.tokens, r.stepSeconds,
			float64(r.tokens)/r.stepSeconds, r.flopsPerStep/1e12, tflops, mfu(d.fp32Peak), mfu(d.bf16Peak), r.note)
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

// timeSteps builds the model with random weights on be, runs one warm-up
// step and returns the mean wall time of o.steps more.
func timeSteps(ctx context.Context, be kernels.Backend, cfg *model.Config, o options) (float64, error) {
	m, err := model.New(cfg, be, 1)
	if err != nil {
		return 0, err
	}
	defer func() {
		for _, p := range m.Params() {
			be.Free(p.Tensor)
		}
	}()
	a, err := model.NewAdapter(m, "bench", model.AdapterConfig{Rank: o.rank, Alpha: float64(2 * o.rank)}, 1)
	if err != nil {
		return 0, err
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
	rng := rand.New(rand.NewPCG(1, 2))
	seq := make([]int32, o.tokens)
	for i := range seq {
		seq[i] = int32(rng.IntN(cfg.VocabSize))
	}
	mask := [][]float32{make([]float32, o.tokens-1)}
	for i := range mask[0] {
		mask[0][i] = 1
	}
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
		for i, p := range a.Params() {
			be.AdamWStep(p.Tensor, g.Adapter()[i].Tensor, moments[i][0], moments[i][1],
				kernels.AdamW{LR: 1e-5, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: n})
		}
		be.SumSquares(a.Params()[0].Tensor) // waits for the device
		if err := be.Err(); err != nil {
			return fmt.Errorf("step %d: %w", n, err)
		}
		return nil
	}
	if err := step(1); err != nil {
		return 0, err
	}
	start := time.Now()
	for i := 0; i < o.steps; i++ {
		if err := step(i + 2); err != nil {
			return 0, err
		}
	}
	return time.Since(start).Seconds() / float64(o.steps), nil
}
