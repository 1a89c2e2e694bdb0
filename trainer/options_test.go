package trainer

import (
	"strings"
	"testing"
	"time"

	"github.com/hone-rl/hone/kernels"
	"github.com/hone-rl/hone/model"
	"gopkg.in/yaml.v3"
)

func TestOptionsYAML(t *testing.T) {
	doc := `
trainer:
  name: agent
  batch_sessions: 8
  poll_interval: 500ms
  max_policy_lag: 2
  stale_policy: downweight
  stale_decay: 0.25
  advantage: {algorithm: step_wise_grpo, step_norm: true}
  loss: {kind: ppo, dual_clip: 3, kl_coef: 0.01, aggregation: seq-mean}
  schedule: {kind: cosine, lr: 2e-5, warmup_steps: 10, total_steps: 500}
  lora: {rank: 8, alpha: 16, targets: [q_proj, v_proj]}
`
	cfg := struct {
		Trainer Options `yaml:"trainer"`
	}{Trainer: DefaultOptions()}
	if err := yaml.Unmarshal([]byte(doc), &cfg); err != nil {
		t.Fatal(err)
	}
	o := cfg.Trainer
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.PollInterval != 500*time.Millisecond || o.Staleness.MaxPolicyLag != 2 || o.Staleness.Policy != StaleDownweight ||
		o.Advantage.Algorithm != AlgStepWiseGRPO || !o.Advantage.StepNorm || o.Loss.ClipHigh != 0.28 || o.Loss.DualClip != 3 ||
		o.Schedule.Kind != SchedCosine || o.LoRA.Rank != 8 || len(o.LoRA.Targets) != 2 || o.MicroBatchTokens != 8192 {
		t.Fatalf("parsed %+v", o)
	}
}

func TestDefaultOptionsValidate(t *testing.T) {
	if err := DefaultOptions().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"hone", "agent-v2.prod", "Qwen3-8B_agent", "日本"} {
		o := DefaultOptions()
		o.Name = name
		if err := o.Validate(); err != nil {
			t.Errorf("name %q: %v", name, err)
		}
	}
	for i, mut := range []func(*Options){
		func(o *Options) { o.Name = "" },
		func(o *Options) { o.Name = "../../../tmp/evil" },
		func(o *Options) { o.Name = ".." },
		func(o *Options) { o.Name = "org/agent" },
		func(o *Options) { o.Name = `a\b` },
		func(o *Options) { o.Name = "a\x00b" },
		func(o *Options) { o.Name = strings.Repeat("n", 129) },
		func(o *Options) { o.BatchSessions = 0 },
		func(o *Options) { o.Mode = "qlora" },
		func(o *Options) { o.Advantage.Algorithm = "gae" },
		func(o *Options) { o.Staleness.Policy = "ignore" },
		func(o *Options) { o.AdamW.Beta2 = 1 },
		func(o *Options) { o.Backend = "gpu" },
		func(o *Options) { o.Backend = "" },
		func(o *Options) { o.ActivationCheckpointing = "true" },
		func(o *Options) { o.WeightDType = "bf16" },
		func(o *Options) { o.WeightDType, o.Mode = "bfloat16", ModeFull },
		func(o *Options) { o.Autocast = "true" },
		func(o *Options) { o.Autocast = "" },
	} {
		o := DefaultOptions()
		mut(&o)
		if o.Validate() == nil {
			t.Errorf("case %d validated", i)
		}
	}
}

// TestCheckpointingChoice: auto checkpoints selectively on a GPU backend
// only; on, selective and off decide alone.
func TestCheckpointingChoice(t *testing.T) {
	for _, c := range []struct {
		opt, be string
		want    model.Checkpointing
	}{{"auto", "cpu", model.CheckpointOff}, {"auto", "cuda", model.CheckpointSelective}, {"on", "cpu", model.CheckpointFull},
		{"off", "cuda", model.CheckpointOff}, {"selective", "cpu", model.CheckpointSelective}} {
		if got := (Options{ActivationCheckpointing: c.opt}).CheckpointMode(c.be); got != c.want {
			t.Errorf("%s on %s: %v", c.opt, c.be, got)
		}
	}
}

// TestWeightDTypeChoice: auto stores the frozen base weights as bf16 for
// LoRA on a GPU backend only; float32 and bfloat16 decide alone.
func TestWeightDTypeChoice(t *testing.T) {
	for _, c := range []struct {
		opt, mode, be string
		want          kernels.DType
	}{
		{"auto", ModeLoRA, "cpu", kernels.F32}, {"auto", ModeLoRA, "cuda", kernels.BF16}, {"auto", ModeFull, "cuda", kernels.F32},
		{"float32", ModeLoRA, "cuda", kernels.F32}, {"bfloat16", ModeLoRA, "cpu", kernels.BF16},
	} {
		if got := (Options{WeightDType: c.opt, Mode: c.mode}).WeightDTypeOn(c.be); got != c.want {
			t.Errorf("%s, %s on %s: %v", c.opt, c.mode, c.be, got)
		}
	}
}

// TestAutocastChoice: auto autocasts with bf16 base weights on a GPU
// backend only; on and off decide alone.
func TestAutocastChoice(t *testing.T) {
	for _, c := range []struct {
		autocast, dtype, mode, be string
		want                      bool
	}{
		{"auto", "auto", ModeLoRA, "cuda", true},
		{"auto", "auto", ModeLoRA, "cpu", false},
		{"auto", "bfloat16", ModeLoRA, "cpu", false},
		{"auto", "float32", ModeLoRA, "cuda", false},
		{"auto", "auto", ModeFull, "cuda", false},
		{"on", "bfloat16", ModeLoRA, "cpu", true},
		{"off", "auto", ModeLoRA, "cuda", false},
	} {
		o := Options{Autocast: c.autocast, WeightDType: c.dtype, Mode: c.mode}
		if got := o.AutocastOn(c.be); got != c.want {
			t.Errorf("autocast %s, weights %s, %s on %s: %v, want %v", c.autocast, c.dtype, c.mode, c.be, got, c.want)
		}
	}
}
