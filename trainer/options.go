package trainer

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hone-rl/hone/kernels"
	"github.com/hone-rl/hone/model"
)

// Options configures the trainer; the config file embeds it under
// `trainer:`.
type Options struct {
	Enabled bool `yaml:"enabled"` // run the loop inside hone serve
	// Name is the policy alias agents send as their model name; versions
	// are written to <CheckpointDir>/<Name>/v<N>/.
	Name          string `yaml:"name"`
	CheckpointDir string `yaml:"checkpoint_dir"` // "" = <data dir>/checkpoints
	Resume        bool   `yaml:"resume"`         // continue from the latest checkpoint
	// BatchSessions is how many ready sessions a step waits for.
	BatchSessions int           `yaml:"batch_sessions"`
	PollInterval  time.Duration `yaml:"poll_interval"` // how often sources are polled
	FetchLimit    int           `yaml:"fetch_limit"`   // experiences per fetch

	// Mode is "lora" (train an adapter, default) or "full" (train every
	// weight: small models only; published through the engines' full-weight
	// reload, which needs ServedModel and kl_coef 0).
	Mode        string `yaml:"mode"`
	ServedModel string `yaml:"served_model"` // the engines' base model name (full mode)

	LoRA      LoRAOptions      `yaml:"lora"`
	Advantage AdvantageOptions `yaml:"advantage"`
	Loss      LossOptions      `yaml:"loss"`
	Schedule  ScheduleOptions  `yaml:"schedule"`
	AdamW     AdamWOptions     `yaml:"adamw"`
	Staleness StalenessOptions `yaml:",inline"`
	// MaxGradNorm clips the global gradient norm (0 = off).
	MaxGradNorm float64 `yaml:"max_grad_norm"`
	// MicroBatchTokens is the token budget of one forward/backward; the
	// gradients of a step's micro-batches accumulate before AdamW.
	MicroBatchTokens int `yaml:"micro_batch_tokens"`
	// SFTMinReward keeps, for the sft loss, only experiences rewarded at
	// least this much (rejection-sampling fine-tuning).
	SFTMinReward float64 `yaml:"sft_min_reward"`

	MetricsLog string `yaml:"metrics_log"` // JSONL step log ("" = none)
	// KeepVersions prunes checkpoints to the newest N versions (0 = keep
	// all; full mode needs 2: a failed reload restores the previous one).
	KeepVersions int `yaml:"keep_versions"`
	// SleepEngines puts the engines to sleep during a step (one GPU shared).
	SleepEngines bool `yaml:"sleep_engines"`
	// MinFreeGPUBytes refuses a step while a GPU has less free memory.
	MinFreeGPUBytes uint64 `yaml:"min_free_gpu_bytes"`
	// Backend is the compute backend of hone serve --train: cpu (default),
	// cuda (the first GPU; hone built with -tags cuda; kernels/selftest runs
	// first and training is refused if it fails) or auto (cuda when built
	// with it and a GPU answers, else cpu).
	Backend string `yaml:"backend"`
	// ActivationCheckpointing is what a forward pass keeps for the
	// backward (model.Checkpointing): on keeps only each layer's input and
	// recomputes the layer before its backward (one extra forward per step,
	// activations of one layer instead of all); selective keeps what the
	// GEMMs and attention produce and recomputes only norms, RoPE and
	// SwiGLU (no GEMM runs twice; about 60% of the activations); off keeps
	// everything; auto (the default) is selective on a GPU backend, or on
	// where the memory plan finds that a micro-batch would not fit with
	// selective, and off on the CPU, where memory is rarely what limits a
	// step.
	ActivationCheckpointing string `yaml:"activation_checkpointing"`
	// EngineGPUShare is the gpu_memory_utilization of the engines on the
	// trainer's GPU (0: none), which the memory plan of a GPU backend
	// leaves to them.
	EngineGPUShare float64 `yaml:"engine_gpu_share"`
	// WeightDType is how the frozen base weights are stored: bfloat16,
	// float32, or auto (the default: bfloat16 for LoRA on a GPU backend,
	// float32 on the CPU and in full mode, which updates them).
	WeightDType string `yaml:"weight_dtype"`
	// Autocast rounds the activation operand of the GEMMs against bf16 base
	// weights to bf16 and runs them bf16 x bf16 with float32 accumulation
	// (model.SetAutocast, PyTorch's autocast): on, off (exact: float32
	// activations times the stored bf16 values), or auto (the default: on
	// when the base weights are bf16 on a GPU backend).
	Autocast string `yaml:"autocast"`
}

// WeightDTypeOn is the base weights' dtype on the backend named be.
func (o Options) WeightDTypeOn(be string) kernels.DType {
	switch {
	case o.WeightDType == "bfloat16", o.WeightDType == "auto" && o.Mode == ModeLoRA && be != "cpu":
		return kernels.BF16
	}
	return kernels.F32
}

// AutocastOn reports whether passes on the backend named be autocast
// (Options.Autocast; nothing changes unless the weights are bf16).
func (o Options) AutocastOn(be string) bool {
	return model.AutocastFor(o.Autocast, be != "cpu", o.WeightDTypeOn(be))
}

// CheckpointMode is what passes on the backend named be keep
// (Options.ActivationCheckpointing), as LoadPolicy sets it.
func (o Options) CheckpointMode(be string) model.Checkpointing {
	switch o.ActivationCheckpointing {
	case "on":
		return model.CheckpointFull
	case "off":
		return model.CheckpointOff
	case "selective":
		return model.CheckpointSelective
	}
	if be == "cpu" {
		return model.CheckpointOff
	}
	return model.CheckpointSelective
}

// Compute backends accepted by Options.Backend.
const (
	BackendCPU  = "cpu"
	BackendCUDA = "cuda"
	BackendAuto = "auto"
)

// ValidateBackend checks Options.Backend.
func (o Options) ValidateBackend() error {
	switch o.Backend {
	case BackendCPU, BackendCUDA, BackendAuto:
		return nil
	}
	return fmt.Errorf("trainer backend %q: want cpu, cuda or auto", o.Backend)
}

// Training modes accepted by Options.Mode.
const (
	ModeLoRA = "lora"
	ModeFull = "full"
)

// LoRAOptions shapes a new adapter.
type LoRAOptions struct {
	Rank    int      `yaml:"rank"`
	Alpha   float64  `yaml:"alpha"`
	Targets []string `yaml:"targets"` // q_proj, ..., down_proj; empty = all seven
	Seed    int64    `yaml:"seed"`
}

// DefaultOptions returns the defaults: GRPO with PPO-clip (clip-higher
// 0.28), token-mean, AdamW lr 1e-5 with warmup then constant, LoRA r 16.
func DefaultOptions() Options {
	return Options{
		Name: "hone", Mode: ModeLoRA, BatchSessions: 16, PollInterval: 2 * time.Second, FetchLimit: 256,
		LoRA:      LoRAOptions{Rank: 16, Alpha: 32, Seed: 1},
		Advantage: AdvantageOptions{Algorithm: AlgGRPO, Epsilon: 1e-6, StdLevel: "group", EMADecay: 0.9},
		Loss: LossOptions{Kind: LossPPO, ClipLow: 0.2, ClipHigh: 0.28, KLEstimator: KLk3,
			Aggregation: AggTokenMean},
		Schedule:    ScheduleOptions{Kind: SchedConstant, LR: 1e-5, WarmupSteps: 5, TotalSteps: 1000},
		AdamW:       AdamWOptions{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01},
		Staleness:   StalenessOptions{MaxPolicyLag: 4, Policy: StaleDrop, Decay: 0.5},
		MaxGradNorm: 1, MicroBatchTokens: 8192, Backend: BackendCPU, ActivationCheckpointing: "auto",
		EngineGPUShare: 0.45, WeightDType: "auto", Autocast: "auto",
	}
}

// Validate reports the first configuration error, naming the key under
// trainer: ("batch_sessions: -1, want > 0").
func (o Options) Validate() error {
	for _, f := range []struct {
		key string
		v   int
	}{{"batch_sessions", o.BatchSessions}, {"fetch_limit", o.FetchLimit}, {"micro_batch_tokens", o.MicroBatchTokens},
		{"lora.rank", o.LoRA.Rank}} {
		if f.v <= 0 {
			return fmt.Errorf("%s: %d, want > 0", f.key, f.v)
		}
	}
	switch {
	case o.Name == "":
		return fmt.Errorf("name: empty, want the policy alias agents call")
	case !pathElement(o.Name):
		return fmt.Errorf("name: %q names checkpoints/<name>/ and adapters <name>-vN: want one path element "+
			"of at most 128 bytes, without '/', '\\', control characters, '.' or '..'", o.Name)
	case o.Mode != ModeLoRA && o.Mode != ModeFull:
		return fmt.Errorf("mode: %q, want lora or full", o.Mode)
	case o.Mode == ModeFull && o.Loss.KLCoef > 0:
		return fmt.Errorf("loss.kl_coef: %g, want 0 with mode full (it keeps no frozen reference)", o.Loss.KLCoef)
	case o.KeepVersions < 0 || (o.Mode == ModeFull && o.KeepVersions == 1):
		return fmt.Errorf("keep_versions: %d, want 0 (all) or >= 1 (>= 2 in full mode)", o.KeepVersions)
	case o.LoRA.Alpha <= 0:
		return fmt.Errorf("lora.alpha: %v, want > 0", o.LoRA.Alpha)
	case o.AdamW.Beta1 < 0 || o.AdamW.Beta1 >= 1 || o.AdamW.Beta2 < 0 || o.AdamW.Beta2 >= 1 || o.AdamW.Eps <= 0:
		return fmt.Errorf("adamw: %+v, want betas in [0,1) and eps > 0", o.AdamW)
	case o.WeightDType != "auto" && o.WeightDType != "float32" && o.WeightDType != "bfloat16":
		return fmt.Errorf("weight_dtype: %q, want auto, float32 or bfloat16", o.WeightDType)
	case o.WeightDType == "bfloat16" && o.Mode == ModeFull:
		return fmt.Errorf("weight_dtype: bfloat16, want float32 or auto with mode full (it updates the base weights)")
	case o.Autocast != "auto" && o.Autocast != "on" && o.Autocast != "off":
		return fmt.Errorf("autocast: %q, want auto, on or off", o.Autocast)
	case o.EngineGPUShare < 0 || o.EngineGPUShare >= 1:
		return fmt.Errorf("engine_gpu_share: %g, want [0, 1)", o.EngineGPUShare)
	case o.ActivationCheckpointing != "auto" && o.ActivationCheckpointing != "on" && o.ActivationCheckpointing != "off" &&
		o.ActivationCheckpointing != "selective":
		return fmt.Errorf("activation_checkpointing: %q, want auto, on, selective or off", o.ActivationCheckpointing)
	}
	if err := o.ValidateBackend(); err != nil {
		return err
	}
	if _, err := NewAdvantager(o.Advantage); err != nil {
		return err
	}
	for _, v := range []interface{ Validate() error }{o.Loss, o.Schedule, o.Staleness} {
		if err := v.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// pathElement reports whether name can be one folder's name under the
// checkpoints folder, and nothing else: no separator, no . or .., no control
// characters.
func pathElement(name string) bool {
	if len(name) > 128 || name == "." || name == ".." || strings.ContainsAny(name, "/\\") {
		return false
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return utf8.ValidString(name)
}
