/*
Package model is documented in api.go; this file describes the API as a
whole.

# Loading and inference

	be := cpu.New(0)
	m, err := model.Load(dir, be)           // config.json + model.safetensors (F32/BF16/F16, mmapped)
	c := m.NewCache()                       // one per sequence
	logits, err := m.Forward(ctx, []model.Step{{Tokens: prompt, Cache: c, Adapter: a}})
	logits, err = m.Forward(ctx, []model.Step{{Tokens: []int32{next}, Cache: c}})

Forward batches any mix of prefill and decode steps: all rows share the weight
matmuls, attention runs per sequence against its cache, and LoRA deltas are
applied per run of consecutive steps sharing an adapter (order steps by
adapter for the best batching). A failed or cancelled Forward leaves every
cache's length unchanged. Model weights are read-only during Forward, so
concurrent calls on distinct caches are safe.

# Adapters

LoadAdapter reads a PEFT folder (adapter_config.json with r, lora_alpha,
target_modules, use_rslora; adapter_model.safetensors with tensors named
base_model.model.model.layers.{i}.{self_attn|mlp}.{q,k,v,o,gate,up,down}_proj.lora_{A,B}.weight,
A [r,in], B [out,r]); the delta is Scale*B*A with Scale = lora_alpha/r. Any
number of adapters may be resident. NewAdapter initialises one for training
(A uniform, B zero); Adapter.Params exposes its tensors by PEFT name and
Adapter.Save writes a PEFT folder that vLLM and PEFT load.

# Training

ForwardTrain runs whole sequences (no KV cache) with one adapter (or none)
and keeps every activation Backward needs; Activations.LogProbs gives, per
sequence, log p(seq[t+1] | seq[:t+1]) for t = 0..len-2. The trainer computes
any loss from those log-probabilities on the host (PPO-clip ratios against
behaviour logprobs, KL, SFT's masked mean) and passes d loss / d logp, shaped
like LogProbs, to Backward:

	g := m.NewGrads(adapter, false)            // true also gives every base weight a gradient
	act, err := m.ForwardTrain(ctx, seqs, adapter)
	loss, dlogp, err := model.MaskedMean(act.LogProbs(), mask) // or any loss
	err = m.Backward(ctx, act, dlogp, g)       // accumulates; g.Zero() between steps
	act.Free()
	for i, p := range adapter.Params() {       // g.Adapter()[i] is p's gradient
		be.AdamWStep(p.Tensor, g.Adapter()[i].Tensor, m1[i], m2[i], opts)
	}

Backward goes through the final norm, the vocabulary-chunked log-softmax
(logits over the vocabulary are never materialised), every layer's MLP,
attention (probabilities recomputed), RoPE, q/k norms and RMSNorms, and
accumulates LoRA A/B gradients (scale alpha/r included) and, when asked,
gradients of every weight (tied embeddings receive both the lm_head and the
embedding contributions). Gradients are checked against finite differences
and against autograd through transformers + PEFT (model/parity_test.go,
scripts/peers/hf_model.py).

# Presets

Preset("tiny"|"small"|"qwen3-0.6b-shape") returns a Qwen3 shape; New builds
random weights and Save writes the folder ("hone model init" wraps this).
*/
package model
