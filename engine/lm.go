package engine

import (
	"context"

	"github.com/hone-rl/hone/kernels"
)

// lm is the language model the scheduler drives. The production
// implementation wraps model.Model (modelLM); tests may use their own.
type lm interface {
	// VocabSize is the number of logits per step.
	VocabSize() int
	// NewCache starts an empty per-sequence KV cache.
	NewCache() lmCache
	// Forward appends each step's tokens to its cache and returns the logits
	// of each step's last token, in step order.
	Forward(ctx context.Context, steps []lmStep) ([][]float32, error)
	// KVBytesPerToken is the KV cache memory of one sequence position.
	KVBytesPerToken() int
	// LoadAdapter loads a PEFT LoRA adapter folder.
	LoadAdapter(dir string) (lmAdapter, error)
}

// deviceSampler is an lm whose backend can draw tokens next to the logits
// (kernels.Sampler on a device), so a decode step brings back a few numbers
// per row instead of the logits.
type deviceSampler interface {
	DeviceSampling() bool
	// ForwardSample is Forward with each step's next token drawn with its
	// params (one per step), with the topN best raw log-probabilities.
	ForwardSample(ctx context.Context, steps []lmStep, params []kernels.Sampling, topN int) (kernels.SampleOut, error)
}

// lmCache is one sequence's KV cache.
type lmCache interface {
	Len() int
	// Truncate keeps the first n positions.
	Truncate(n int)
	Free()
}

// lmAdapter is a resident LoRA adapter.
type lmAdapter interface {
	Free()
}

// lmStep is one sequence's new tokens in a batched forward.
type lmStep struct {
	Tokens  []int32
	Cache   lmCache
	Adapter lmAdapter // nil for the base model
}
