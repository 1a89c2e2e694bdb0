package selftest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/hone-rl/hone/kernels"
	"github.com/hone-rl/hone/kernels/cpu"
	"github.com/hone-rl/hone/model"
)

// Step is one LoRA training step of a small transformer on a backend: the
// masked mean log-probability, the adapter gradients, and the adapter after
// one AdamW step, all downloaded, keyed by the adapter tensor's name.
type Step struct {
	Loss   float64
	Grads  map[string][]float32
	Params map[string][]float32
}

// Archs are the architectures the LoRA-step parity runs: Qwen3 (tied
// embeddings, q/k norm) and Llama (attention biases).
var Archs = []string{model.ArchQwen3, model.ArchLlama}

// LoRAStep runs one LoRA step (forward, backward, AdamW) of a 2-layer
// transformer of arch on be. Weights and adapter come from one host
// generator, so every backend starts from the same numbers. A panic of the
// backend (a shape check) or a device error is returned as an error.
func LoRAStep(ctx context.Context, be kernels.Backend, arch string) (Step, error) {
	return LoRAStepT(ctx, be, arch, kernels.F32)
}

// LoRAStepT is LoRAStep with the base matrices stored as base
// (model.SetWeightDType; the same rounded weights on every backend).
func LoRAStepT(ctx context.Context, be kernels.Backend, arch string, base kernels.DType) (Step, error) {
	return LoRAStepMode(ctx, be, arch, Mode{Base: base})
}

// Mode is how a LoRA step stores and multiplies the base matrices.
type Mode struct {
	// Base is their storage type (model.SetWeightDType).
	Base kernels.DType
	// Autocast rounds the activation operand of the GEMMs against bf16
	// base matrices to bf16 (model.SetAutocast); nothing with Base F32.
	Autocast bool
	// LoRABF16 runs, under Autocast, the LoRA GEMMs bf16 x bf16 too
	// (model.SetAutocastLoRA, the trainer's default). Modes leave it off:
	// the autocast rows' tolerances were set on an H100 with float32 LoRA
	// GEMMs, and bf16 ones run the bf16 GEMM those rows and the
	// conformance suite's bf16 group already check on the device, while
	// their roundings make a small tensor's worst element flip by 2^-8
	// between backends (kernels/cuda's emulated tests hold them).
	LoRABF16 bool
}

// LoRAStepMode is LoRAStep with the base matrices stored and multiplied
// as mode says.
func LoRAStepMode(ctx context.Context, be kernels.Backend, arch string, mode Mode) (out Step, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("lora step %s on %s: panic: %v", arch, be.Name(), r)
		}
	}()
	cfg := &model.Config{Architecture: arch, VocabSize: 61, HiddenSize: 32, IntermediateSize: 48, NumLayers: 2,
		NumHeads: 4, NumKVHeads: 2, HeadDim: 12, MaxPositions: 128, RMSNormEps: 1e-6, RopeTheta: 10000,
		TieWordEmbeddings: arch == model.ArchQwen3, QKNorm: arch == model.ArchQwen3, AttentionBias: arch != model.ArchQwen3}
	m, err := model.New(cfg, be, 7)
	if err != nil {
		return Step{}, fmt.Errorf("lora step %s: new model: %w", arch, err)
	}
	// Larger than the init so every layer matters.
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
	if err := m.SetWeightDType(mode.Base); err != nil {
		return Step{}, fmt.Errorf("lora step %s: %w", arch, err)
	}
	m.SetAutocast(mode.Autocast)
	m.SetAutocastLoRA(mode.LoRABF16)
	a, err := model.NewAdapter(m, "a", model.AdapterConfig{Rank: 4, Alpha: 8}, 1)
	if err != nil {
		return Step{}, fmt.Errorf("lora step %s: new adapter: %w", arch, err)
	}
	for _, p := range a.Params() {
		perturb(p, false, 0.3)
	}
	if err := be.Err(); err != nil {
		return Step{}, fmt.Errorf("lora step %s: setting up: %w", arch, err)
	}
	seqs := [][]int32{{5, 6, 7, 8, 9, 10, 11, 12, 40, 41, 3}, {17, 2, 33, 60, 0}}
	mask := [][]float32{{0, 0, 1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 0, 1}}
	act, err := m.ForwardTrain(ctx, seqs, a)
	if err != nil {
		return Step{}, fmt.Errorf("lora step %s: forward: %w", arch, err)
	}
	loss, dlogp, err := model.MaskedMean(act.LogProbs(), mask)
	if err != nil {
		return Step{}, fmt.Errorf("lora step %s: loss: %w", arch, err)
	}
	g := m.NewGrads(a, false)
	if err := m.Backward(ctx, act, dlogp, g); err != nil {
		return Step{}, fmt.Errorf("lora step %s: backward: %w", arch, err)
	}
	act.Free()
	out = Step{Loss: loss, Grads: map[string][]float32{}, Params: map[string][]float32{}}
	for i, p := range a.Params() {
		gr := g.Adapter()[i]
		d := make([]float32, gr.Tensor.Len())
		be.Download(d, gr.Tensor)
		out.Grads[gr.Name] = d
		mt, vt := be.New(p.Tensor.Shape()...), be.New(p.Tensor.Shape()...)
		be.AdamWStep(p.Tensor, gr.Tensor, mt, vt, kernels.AdamW{LR: 1e-2, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01, Step: 1})
		d = make([]float32, p.Tensor.Len())
		be.Download(d, p.Tensor)
		out.Params[p.Name] = d
	}
	if err := be.Err(); err != nil {
		return Step{}, fmt.Errorf("lora step %s: adamw: %w", arch, err)
	}
	return out, nil
}

// RelErr is |got-want| / |want| in the Euclidean norm (NaN when got holds a
// NaN, +Inf when the lengths differ).
func RelErr(got, want []float32) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	var num, den float64
	for i := range want {
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num) / math.Max(math.Sqrt(den), 1e-30)
}

// ParityTol is the relative tolerance of the LoRA-step parity: 1e-5 (the
// issue's bound), or 3 times the disagreement of the CPU backend's own
// kernel variants on that tensor when that is larger.
const ParityTol = 1e-5

// Reference is the CPU backend's LoRA step for one architecture (its plain
// generic variant) and the float32 noise floor of the problem: per key
// ("grad NAME", "param NAME") the largest relative error of the
// CPU's other variants against it. On the Llama problem the CPU's AVX2 and
// generic kernels already differ by up to ~2e-5 on layer 0's attention LoRA
// gradients (sums in other orders, amplified through two layers), so no
// float32 implementation can be held to 1e-5 there.
type Reference struct {
	Arch  string
	Want  Step
	Floor map[string]float64
	// MinTol raises the gradient and AdamW tolerance floor above ParityTol
	// (BF16ParityTol for bf16 base weights, AutocastParityTol with
	// autocast); zero keeps ParityTol.
	MinTol float64
	// Base is the base matrices' storage type of the step.
	Base kernels.DType
	// Autocast is whether the step ran with autocast (Mode.Autocast).
	Autocast bool
}

// prefix is the rows' name prefix: "lora-step", "lora-step-bf16" for
// bf16 base weights, "lora-step-autocast" for bf16 base weights with
// autocast.
func (r Reference) prefix() string {
	switch {
	case r.Base == kernels.BF16 && r.Autocast:
		return "lora-step-autocast"
	case r.Base == kernels.BF16:
		return "lora-step-bf16"
	}
	return "lora-step"
}

// BF16ParityTol is the relative tolerance of the gradients and adapter
// tensors of a LoRA step with bf16 base weights (CPUReferenceT sets it as
// MinTol): 1e-4, ten times ParityTol. Both backends compute in float32 from
// the same rounded weights, but the rounded problem is worse conditioned
// for AdamW's first step on the Llama problem (a near-zero gradient's
// direction decides an update of lr): the emulated readable kernels land
// at 3.3x the CPU variants' own disagreement there. The storage rounding
// itself moves the gradients by 2e-2 to 1e-1 relative, 200x more.
const BF16ParityTol = 1e-4

// AutocastParityTol is the relative tolerance of the gradients of a LoRA
// step with bf16 base weights and autocast (model.SetAutocast;
// CPUReferenceMode sets it as MinTol): 4e-3. Autocast rounds activations to
// bf16 (the GEMMs' inputs, and attention's q, k, v and output gradient:
// Attn.BF16), so a float32 difference of one ulp between two backends (a
// sum in another order) that lands on a rounding boundary flips that
// element by a whole bf16 step, 2^-8 relative, and the flip travels
// through the rest of the step: the CPU's own kernel variants differ by up
// to 9.7e-4 on Qwen3's gradients, the emulated CUDA backend's readable
// kernels by 1.4e-3, and an H100 (cuBLASLt's tensor-core GEMMs sum in
// their own order) by 1.4e-3 too. 4e-3 is about three times that, and
// still a tenth of what autocast itself moves the gradients from exact mode
// (4e-2 on Qwen3, 1.2e-1 on Llama), so a backend that skipped the rounding
// fails it.
const AutocastParityTol = 4e-3

// AutocastLossTol is the relative tolerance of the loss with autocast:
// 2e-4. The CPU's variants and the emulated CUDA backend agree within 2e-7,
// but an H100 moved the loss by 3.1e-5 (2026-11-27), the flips above summed
// over every token. Autocast itself moves the loss by 1.2e-3 (Qwen3) and
// 7.8e-4 (Llama) from exact mode, four to six times this tolerance.
const AutocastLossTol = 2e-4

// AutocastAdamWTol is the relative tolerance of the adapter tensors after
// AdamW with autocast: 2e-2. AdamW's first step moves each element by about
// lr times the sign of its gradient, so an element whose gradient is near
// zero turns a flip's small change into a whole step of lr: the H100 landed
// at 7e-3 on Qwen3's k_proj LoRA B where its gradients agreed within 1.4e-3.
// The AdamW kernel itself is held to 1e-5 by the float32 rows.
const AutocastAdamWTol = 2e-2

// Tol is the tolerance of key: max(1e-5 or MinTol, 3 x Floor[key]), and
// AutocastAdamWTol for an adapter tensor ("param ...") with autocast.
func (r Reference) Tol(key string) float64 {
	if r.Autocast && strings.HasPrefix(key, "param ") {
		return math.Max(AutocastAdamWTol, 3*r.Floor[key])
	}
	return math.Max(math.Max(ParityTol, r.MinTol), 3*r.Floor[key])
}

// LossTol is the loss's tolerance: ParityTol, or AutocastLossTol with
// autocast.
func (r Reference) LossTol() float64 {
	if r.Autocast {
		return AutocastLossTol
	}
	return ParityTol
}

// CPUReference runs the LoRA step of arch on every CPU kernel variant.
func CPUReference(ctx context.Context, arch string) (Reference, error) {
	return CPUReferenceT(ctx, arch, kernels.F32)
}

// CPUReferenceT is CPUReference with the base matrices stored as base.
func CPUReferenceT(ctx context.Context, arch string, base kernels.DType) (Reference, error) {
	return CPUReferenceMode(ctx, arch, Mode{Base: base})
}

// CPUReferenceMode is CPUReference with the base matrices stored and
// multiplied as mode says.
func CPUReferenceMode(ctx context.Context, arch string, mode Mode) (Reference, error) {
	ref, err := cpu.NewVariant(1, cpu.VariantGeneric)
	if err != nil {
		return Reference{}, fmt.Errorf("cpu reference: %w", err)
	}
	want, err := LoRAStepMode(ctx, ref, arch, mode)
	if err != nil {
		return Reference{}, fmt.Errorf("cpu reference: %w", err)
	}
	r := Reference{Arch: arch, Want: want, Floor: map[string]float64{}, Base: mode.Base}
	if mode.Base == kernels.BF16 {
		r.MinTol = BF16ParityTol
		if mode.Autocast {
			r.Autocast, r.MinTol = true, AutocastParityTol
		}
	}
	for _, v := range cpu.Variants() {
		be, err := cpu.NewVariant(1, v)
		if err != nil {
			return Reference{}, fmt.Errorf("cpu variant %s: %w", v, err)
		}
		other, err := LoRAStepMode(ctx, be, arch, mode)
		if err != nil {
			return Reference{}, fmt.Errorf("cpu variant %s: %w", v, err)
		}
		for name, w := range want.Grads {
			r.Floor["grad "+name] = math.Max(r.Floor["grad "+name], RelErr(other.Grads[name], w))
			r.Floor["param "+name] = math.Max(r.Floor["param "+name], RelErr(other.Params[name], want.Params[name]))
		}
	}
	return r, nil
}

// Compare holds got against the reference and returns three rows: the
// loss (within LossTol relative, no noise-floor allowance), the worst LoRA
// gradient and the worst adapter tensor after AdamW (worst = largest
// error/tolerance ratio; the row names that tensor).
func (r Reference) Compare(got Step) []Result {
	short := archName(r.Arch)
	loss := Result{Name: r.prefix() + "/" + short + "/loss", Worst: "loss",
		MaxErr: math.Abs(got.Loss-r.Want.Loss) / math.Abs(r.Want.Loss), Tol: r.LossTol()}
	loss.Pass = loss.MaxErr <= loss.Tol
	if !loss.Pass {
		loss.Failure = fmt.Sprintf("loss %.8g, cpu %.8g (relative %.2g, tolerance %.2g)", got.Loss, r.Want.Loss, loss.MaxErr, loss.Tol)
	}
	rows := []Result{loss}
	for _, kind := range []struct {
		row, key string
		got      map[string][]float32
		want     map[string][]float32
	}{
		{"grads", "grad ", got.Grads, r.Want.Grads},
		{"adamw", "param ", got.Params, r.Want.Params},
	} {
		res := Result{Name: r.prefix() + "/" + short + "/" + kind.row, Pass: true}
		names := make([]string, 0, len(kind.want))
		for n := range kind.want {
			names = append(names, n)
		}
		sort.Strings(names)
		if len(kind.got) != len(kind.want) || len(names) == 0 {
			res.Pass = false
			res.MaxErr = math.Inf(1)
			res.Failure = fmt.Sprintf("%d %s tensors, cpu %d", len(kind.got), kind.row, len(kind.want))
		}
		worst := -1.0
		for _, n := range names {
			e, tol := RelErr(kind.got[n], kind.want[n]), r.Tol(kind.key+n)
			q := e / tol
			if math.IsNaN(e) {
				q = math.Inf(1)
			}
			if q > worst {
				worst, res.MaxErr, res.Tol, res.Worst = q, e, tol, n
			}
			if !(e <= tol) {
				if res.Pass {
					res.Failure = fmt.Sprintf("%s %s: relative error %.2g, tolerance %.2g (cpu variants among themselves: %.2g)",
						kind.row, n, e, tol, r.Floor[kind.key+n])
				}
				res.Pass = false
			}
		}
		rows = append(rows, res)
	}
	return rows
}

func archName(arch string) string {
	switch arch {
	case model.ArchQwen3:
		return "qwen3"
	case model.ArchLlama:
		return "llama"
	case model.ArchQwen2:
		return "qwen2"
	}
	return arch
}

// Modes are the LoRA-step parity's modes, in table order: float32 base
// weights, bf16 ones (exact: float32 activations), bf16 with autocast.
var Modes = []Mode{{Base: kernels.F32}, {Base: kernels.BF16}, {Base: kernels.BF16, Autocast: true}}

// LoRAParity runs the LoRA step of every architecture of Archs on be and on
// the CPU backend and compares them (Reference.Compare) in every mode of
// Modes: float32 base weights ("lora-step/..." rows, ParityTol), bf16 ones
// ("lora-step-bf16/...", BF16ParityTol) and bf16 with autocast
// ("lora-step-autocast/...", AutocastParityTol). A step that fails to run
// is three failed rows naming the architecture.
func LoRAParity(ctx context.Context, be kernels.Backend) []Result {
	var rows []Result
	for _, mode := range Modes {
		prefix := Reference{Base: mode.Base, Autocast: mode.Autocast}.prefix()
		for _, arch := range Archs {
			start := time.Now()
			// A step that does not run fails its three rows, so the table
			// keeps its shape.
			failed := func(err error, d time.Duration) {
				for _, what := range []string{"loss", "grads", "adamw"} {
					rows = append(rows, Result{Name: prefix + "/" + archName(arch) + "/" + what, MaxErr: math.NaN(),
						Tol: math.NaN(), Failure: err.Error(), Duration: d})
				}
			}
			ref, err := CPUReferenceMode(ctx, arch, mode)
			if err != nil {
				failed(err, time.Since(start))
				continue
			}
			start = time.Now()
			got, err := LoRAStepMode(ctx, be, arch, mode)
			d := time.Since(start)
			if err != nil {
				be.ClearErr()
				failed(err, d)
				continue
			}
			for _, r := range ref.Compare(got) {
				r.Duration = d // the step's time, on each of its rows
				rows = append(rows, r)
			}
		}
	}
	return rows
}
