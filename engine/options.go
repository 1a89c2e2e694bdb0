package engine

import (
	"fmt"

	"github.com/hone-rl/hone/kernels"
)

// Options configure the embedded engine. The yaml tags let hone's config embed
// them (under engine_embedded:).
type Options struct {
	// ModelDir is the model folder (config.json, model.safetensors,
	// tokenizer.json, tokenizer_config.json).
	ModelDir string `yaml:"model_dir"`
	// ServedModelName is the name clients send as "model"; empty means
	// ModelDir, as vLLM uses its --model argument.
	ServedModelName string `yaml:"served_model_name"`
	// MaxNumSeqs bounds the sequences decoded together (vLLM --max-num-seqs).
	MaxNumSeqs int `yaml:"max_num_seqs"`
	// MaxNumBatchedTokens bounds the tokens of one forward step: every
	// decoding sequence adds one, prompts fill the rest in chunks (chunked
	// prefill), so a long prompt does not stall the others.
	MaxNumBatchedTokens int `yaml:"max_num_batched_tokens"`
	// MaxModelLen caps prompt+completion tokens; 0 means the model's
	// max_position_embeddings.
	MaxModelLen int `yaml:"max_model_len"`
	// KVCacheMiB bounds the KV cache memory of running sequences (0: the
	// default, negative: unbounded). Sequences wait to start while it is
	// full; when decoding outgrows it, the latest started sequence is
	// preempted and later recomputed (vLLM's recompute preemption).
	KVCacheMiB int `yaml:"kv_cache_mib"`
	// PrefixCacheMiB enables prefix caching with this much memory for
	// finished sequences' KV caches (0: off, the default). A reused prefix
	// runs the prompt's tail through other kernel paths than a full prefill,
	// so logprobs can differ in the last bits from an uncached run; off, a
	// request's logprobs do not depend on earlier requests.
	PrefixCacheMiB int `yaml:"prefix_cache_mib"`
	// MaxLogprobs caps top_logprobs/logprobs (vLLM --max-logprobs).
	MaxLogprobs int `yaml:"max_logprobs"`
	// ReasoningParser "qwen3" (the default) splits <think>...</think> out of
	// the content as vLLM --reasoning-parser qwen3 does (only output that
	// opens with <think>, or follows a prompt that leaves <think> open, has
	// reasoning); "none" leaves it in the content.
	ReasoningParser string `yaml:"reasoning_parser"`
	// ReasoningField names the message field that carries reasoning:
	// "reasoning" (current vLLM), "reasoning_content" (vLLM < 0.11, SGLang),
	// or "both".
	ReasoningField string `yaml:"reasoning_field"`
	// ToolCallParser "hermes" (the default when empty) parses <tool_call>
	// blocks into tool_calls when a request has tools; "none" disables it.
	ToolCallParser string `yaml:"tool_call_parser"`
	// DisableRuntimeLoRA removes /v1/load_lora_adapter and
	// /v1/unload_lora_adapter (served by default, as vLLM with
	// VLLM_ALLOW_RUNTIME_LORA_UPDATING=true).
	DisableRuntimeLoRA bool `yaml:"disable_runtime_lora"`
	// DisableSleepMode removes the dev-mode endpoints /sleep, /wake_up,
	// /is_sleeping, /collective_rpc and /reset_prefix_cache (served by
	// default, as vLLM with --enable-sleep-mode and VLLM_SERVER_DEV_MODE).
	DisableSleepMode bool `yaml:"disable_sleep_mode"`
	// APIKey, when set, is required as "Authorization: Bearer KEY" on every
	// route but /health and /ping (vLLM's --api-key). hone serve sets a
	// random one for its embedded engine, so nothing else on the host can
	// call its inference or administration routes.
	APIKey string `yaml:"-"`
	// Threads is the CPU backend's worker count; 0 means all cores.
	Threads int `yaml:"threads"`
	// Backend names the compute backend hone serve opens for the engine:
	// cpu (the default), cuda or auto (cmd/hone opens it, runs hone
	// selftest on a GPU first, and passes it as Device).
	Backend string `yaml:"backend"`
	// WeightDType stores the base weights as bfloat16, float32, or auto
	// (bfloat16 on a Device, float32 on the CPU backend, where a bf16 GEMM
	// widens the weights to a float32 copy first).
	WeightDType string `yaml:"weight_dtype"`
	// Autocast rounds the activation operand of the GEMMs against bf16 base
	// weights to bf16 (model.SetAutocast): on, off (exact), or auto (on
	// when the base weights are bf16 on a Device).
	Autocast string `yaml:"autocast"`
	// Device is the opened backend the model loads onto; nil means the CPU
	// backend with Threads workers. The engine does not close it.
	Device kernels.Backend `yaml:"-"`
	// Version is reported by /version.
	Version string `yaml:"-"`
}

// DefaultOptions returns the settings hone uses for its embedded engine.
func DefaultOptions() Options {
	return Options{
		Backend:             "cpu",
		WeightDType:         "auto",
		Autocast:            "auto",
		MaxNumSeqs:          32,
		MaxNumBatchedTokens: 512,
		MaxLogprobs:         20,
		KVCacheMiB:          4096,
		ReasoningParser:     "qwen3",
		ReasoningField:      "reasoning",
		ToolCallParser:      "hermes",
		Version:             "hone",
	}
}

// withDefaults fills zero values from DefaultOptions, so Options{ModelDir:
// dir} is a working configuration.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.MaxNumSeqs <= 0 {
		o.MaxNumSeqs = d.MaxNumSeqs
	}
	if o.MaxNumBatchedTokens <= 0 {
		o.MaxNumBatchedTokens = d.MaxNumBatchedTokens
	}
	if o.KVCacheMiB == 0 {
		o.KVCacheMiB = d.KVCacheMiB
	}
	if o.MaxLogprobs <= 0 {
		o.MaxLogprobs = d.MaxLogprobs
	}
	if o.ReasoningField == "" {
		o.ReasoningField = d.ReasoningField
	}
	if o.ReasoningParser == "" {
		o.ReasoningParser = d.ReasoningParser
	}
	if o.ToolCallParser == "" {
		o.ToolCallParser = d.ToolCallParser
	}
	if o.Version == "" {
		o.Version = d.Version
	}
	if o.ServedModelName == "" {
		o.ServedModelName = o.ModelDir
	}
	return o
}

// check rejects unknown parser and field names.
func (o Options) check() error {
	switch {
	case o.ReasoningParser != "qwen3" && o.ReasoningParser != "none":
		return fmt.Errorf("unknown reasoning parser %q (have qwen3, none)", o.ReasoningParser)
	case o.ToolCallParser != "hermes" && o.ToolCallParser != "none":
		return fmt.Errorf("unknown tool call parser %q (have hermes, none)", o.ToolCallParser)
	case o.ReasoningField != "reasoning" && o.ReasoningField != "reasoning_content" && o.ReasoningField != "both":
		return fmt.Errorf("unknown reasoning field %q (have reasoning, reasoning_content, both)", o.ReasoningField)
	case o.ModelDir == "":
		return fmt.Errorf("no model folder given")
	}
	return nil
}
