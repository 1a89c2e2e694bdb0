// Package memplan computes how much GPU memory a co-located LoRA trainer needs
// beside an inference engine, and how many tokens one micro-batch may hold.
//
// It is arithmetic from the model's shapes (the plan in kernels/cuda/DESIGN.md),
// not a measurement. It assumes activation checkpointing, full (the layer
// inputs are kept, one layer's activations are recomputed for its backward)
// or selective (Request.Selective), and tiled attention (no seq x seq
// scores).
package memplan

import "fmt"

// Shapes are the transformer dimensions the plan depends on.
type Shapes struct {
	Hidden, Layers, Heads, KVHeads, HeadDim, MLP, Vocab int
	TiedEmbeddings                                      bool
}

// Request is what is planned: a model beside an engine on one GPU.
type Request struct {
	Model Shapes
	// Rank is the LoRA rank; LoRA sits on q, k, v, o, gate, up and down.
	Rank int
	// SeqLen is the longest training sequence in tokens.
	SeqLen int
	// GPUBytes is the device's total memory (from go-nvml, or given).
	GPUBytes int64
	// EngineUtilization is the engine's gpu_memory_utilization (its share of GPUBytes).
	EngineUtilization float64
	// ContextBytes is the CUDA context of the trainer's process; 0 means 1 GB.
	ContextBytes int64
	// LogitChunk is how many logits the chunked log-prob holds at once; 0 means 2^24.
	LogitChunk int64
	// WeightBytes is the storage of one base weight: 2 (bf16, the plan's
	// default when 0) or 4 (fp32, what kernels.Backend stores today).
	WeightBytes int64
	// Autocast is model.SetAutocast with bf16 weights: the base GEMMs
	// round their activation operand to a temporary bf16 copy. Without it
	// a GEMM against a bf16 weight widens the weight to a temporary fp32
	// copy instead (kernels/cuda's exact mode). Neither applies to fp32
	// weights.
	Autocast bool
	// Selective is model.CheckpointSelective: every layer keeps its GEMMs'
	// and attention's outputs (KeptFloatsPerToken) and recomputes the rest
	// (CheapFloatsPerToken) one layer at a time; false plans full
	// checkpointing (each layer's input kept).
	Selective bool
}

// Plan is the trainer's memory budget and what it spends it on, in bytes.
type Plan struct {
	Params          int64 // base model parameters
	LoRAParams      int64
	Budget          int64 // GPU less the engine's share less the CUDA context
	BaseWeights     int64 // WeightBytes per parameter (bf16 by default)
	LoRAState       int64 // fp32 params + grads + AdamW m, v
	Checkpoints     int64 // what every layer keeps for SeqLen tokens, fp32 (its input, or selective's kept tensors)
	LayerActs       int64 // one layer's recomputed activations for SeqLen tokens
	BackwardScratch int64 // bounded by LayerActs
	LogProbChunk    int64
	// WidenedWeight is exact mode's temporary: the largest projection
	// widened to fp32 (bf16 weights without autocast; 0 otherwise). The LM
	// head is widened chunk by chunk inside the log-prob chunk.
	WidenedWeight int64
	// GEMMWorkspace is cuBLASLt's workspace (32 MiB per context), which
	// the bf16 x bf16 GEMMs of autocast use.
	GEMMWorkspace int64
	// CastScratch is autocast's temporary for SeqLen tokens: the
	// activation operands rounded to bf16 at once (Shapes.CastWidth; 0
	// without autocast).
	CastScratch            int64
	Total                  int64 // for one SeqLen sequence
	PerToken               int64 // bytes each micro-batch token costs
	MicroBatchTokens       int64 // token budget of one micro-batch
	MicroBatchSequences    int64 // whole SeqLen sequences per micro-batch
	ActFloatsPerTokenLayer int64
}

// Params counts the base model's parameters (norm weights included).
func (s Shapes) Params() int64 {
	h, q, kv := int64(s.Hidden), int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim)
	layer := h*q + 2*h*kv + q*h + 3*h*int64(s.MLP) + 2*h + 2*int64(s.HeadDim)
	emb := int64(s.Vocab) * h
	if !s.TiedEmbeddings {
		emb *= 2
	}
	return int64(s.Layers)*layer + emb + h
}

// LoRAParams counts LoRA parameters at rank r on q, k, v, o, gate, up and down.
func (s Shapes) LoRAParams(r int) int64 {
	h, q, kv, m := int64(s.Hidden), int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim), int64(s.MLP)
	per := (h + q) + 2*(h+kv) + (q + h) + 2*(h+m) + (m + h)
	return int64(s.Layers) * int64(r) * per
}

// ActFloatsPerToken is one layer's kept activations per token, the fields of
// model/'s layerActs: four hidden-sized (xIn, h1, xMid, h2), three query-sized
// (q, qr, att), three KV-sized (k, v, kr) and three MLP-sized (gate, up, ac);
// 68,608 for Qwen3-8B, the figure in kernels/cuda/DESIGN.md.
func (s Shapes) ActFloatsPerToken() int64 {
	return 4*int64(s.Hidden) + 3*int64(s.Heads*s.HeadDim) + 3*int64(s.KVHeads*s.HeadDim) + 3*int64(s.MLP)
}

// KeptFloatsPerToken is what selective checkpointing keeps of one layer per
// token: two hidden-sized (xIn, xMid), two query-sized (q, att), two
// KV-sized (k, v), two MLP-sized (gate, up) and the attention's
// log-sum-exp (one per head); 43,040 for Qwen3-8B.
func (s Shapes) KeptFloatsPerToken() int64 {
	return 2*int64(s.Hidden) + 2*int64(s.Heads*s.HeadDim) + 2*int64(s.KVHeads*s.HeadDim) + 2*int64(s.MLP) + int64(s.Heads)
}

// CheapFloatsPerToken is what selective checkpointing recomputes of one
// layer per token: h1, h2, qr, kr and SwiGLU's output.
func (s Shapes) CheapFloatsPerToken() int64 {
	return 2*int64(s.Hidden) + int64(s.Heads*s.HeadDim) + int64(s.KVHeads*s.HeadDim) + int64(s.MLP)
}

// MaxGEMMWidth is the widest activation operand of a GEMM against a base
// weight, per token: the input of a projection (hidden, the attention
// output, the MLP activation) in the forward, or the output gradient in
// the backward's dX = dY W (query, key/value, MLP or hidden sized).
func (s Shapes) MaxGEMMWidth() int64 {
	return int64(max(s.Hidden, s.Heads*s.HeadDim, s.KVHeads*s.HeadDim, s.MLP))
}

// CastWidth is how many activation elements per token autocast holds
// rounded to bf16 at once: a GEMM's widest operand (MaxGEMMWidth) for the
// base GEMMs alone; with a LoRA, whose backward rounds a module's input
// and output gradient together (model.SetAutocastLoRA), the widest
// module's input plus output.
func (s Shapes) CastWidth(lora bool) int64 {
	if !lora {
		return s.MaxGEMMWidth()
	}
	return int64(s.Hidden + max(s.Heads*s.HeadDim, s.MLP))
}

// MaxProjection is the largest projection's element count (the LM head is
// not one: it is read chunk by chunk).
func (s Shapes) MaxProjection() int64 {
	h := int64(s.Hidden)
	return h * int64(max(s.Heads*s.HeadDim, s.KVHeads*s.HeadDim, s.MLP))
}

// Make computes the plan, or an error with the numbers when one SeqLen sequence
// does not fit in the trainer's budget.
func Make(r Request) (Plan, error) {
	if r.Rank <= 0 || r.SeqLen <= 0 || r.GPUBytes <= 0 || r.EngineUtilization < 0 || r.EngineUtilization >= 1 {
		return Plan{}, fmt.Errorf("memplan: invalid request (rank %d, seq %d, gpu %d B, engine share %g)",
			r.Rank, r.SeqLen, r.GPUBytes, r.EngineUtilization)
	}
	ctx, chunk := r.ContextBytes, r.LogitChunk
	if ctx == 0 {
		ctx = 1e9
	}
	if chunk == 0 {
		chunk = 1 << 24
	}
	s, seq := r.Model, int64(r.SeqLen)
	p := Plan{Params: s.Params(), LoRAParams: s.LoRAParams(r.Rank), ActFloatsPerTokenLayer: s.ActFloatsPerToken()}
	p.Budget = int64(float64(r.GPUBytes)*(1-r.EngineUtilization)) - ctx
	wb := r.WeightBytes
	if wb == 0 {
		wb = 2
	}
	p.BaseWeights = wb * p.Params
	p.LoRAState = 16 * p.LoRAParams
	p.LogProbChunk = 4 * chunk
	ckpt := 4 * int64(s.Hidden) * int64(s.Layers)
	acts := 4 * p.ActFloatsPerTokenLayer
	if r.Selective {
		ckpt = 4 * s.KeptFloatsPerToken() * int64(s.Layers)
		acts = 4 * s.CheapFloatsPerToken()
	}
	var cast int64
	switch {
	case wb == 2 && r.Autocast:
		cast = 2 * s.CastWidth(r.Rank > 0)
		p.GEMMWorkspace = 32 << 20
	case wb == 2:
		p.WidenedWeight = 4 * s.MaxProjection()
	}
	p.PerToken = ckpt + 2*acts + cast
	p.Checkpoints, p.LayerActs, p.BackwardScratch, p.CastScratch = ckpt*seq, acts*seq, acts*seq, cast*seq
	fixed := p.BaseWeights + p.LoRAState + p.LogProbChunk + p.WidenedWeight + p.GEMMWorkspace
	p.Total = fixed + p.PerToken*seq
	if p.Total > p.Budget {
		return p, fmt.Errorf("memplan: one %d-token sequence needs %.1f GB, the trainer has %.1f GB (%.0f GB GPU, engine %.2f, context %.1f GB)",
			seq, gb(p.Total), gb(p.Budget), gb(r.GPUBytes), r.EngineUtilization, gb(ctx))
	}
	p.MicroBatchTokens = (p.Budget - fixed) / p.PerToken
	p.MicroBatchSequences = p.MicroBatchTokens / seq
	return p, nil
}

func gb(b int64) float64 { return float64(b) / 1e9 }
