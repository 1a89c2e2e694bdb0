package model

import (
	"context"
	"errors"
	"fmt"

	"github.com/hone-rl/hone/kernels"
)

// Activations is a training forward pass kept for Backward: the inputs of
// every layer and the per-token log-probabilities.
type Activations struct {
	m       *Model
	adapter *Adapter
	b       *batch
	targets []int32
	dtarget kernels.Index // targets on the device
	layers  []layerActs
	xOut    kernels.Tensor // residual stream after the last layer
	hOut    kernels.Tensor // final norm of xOut (bf16 when autocast applies to the LM head)
	lse     kernels.Tensor // log-sum-exp per row
	logp    []float32      // per row; the last row of each sequence has no target
	owned   []kernels.Tensor
	// ckpt is what the pass kept of each layer (Checkpointing); Backward
	// recomputes the rest of a layer just before its backward.
	ckpt Checkpointing
}

// layerActs are one layer's saved tensors (row-major over all tokens).
type layerActs struct {
	xIn, h1      kernels.Tensor // layer input, attention norm
	q, k, v      kernels.Tensor // projections (before q/k norm)
	qr, kr       kernels.Tensor // q and k after norm and RoPE
	att, xMid    kernels.Tensor // attention output, residual after attention
	lse          kernels.Tensor // attention's log-sum-exp per (token, head), with bf16 attention (else nil)
	h2           kernels.Tensor // MLP norm
	gate, up, ac kernels.Tensor // MLP activations
}

// Grads holds gradient tensors shaped like the parameters they belong to.
// Backward accumulates into them; Zero resets them between steps.
type Grads struct {
	be      kernels.Backend
	adapter *Adapter // same structure as the trained adapter, holding dA/dB
	base    *Model   // same structure as the model, holding weight gradients
}

// NewGrads allocates zeroed gradients for adapter a (nil for none) and, when
// base is true, for every model weight (full fine-tuning of small models).
func (m *Model) NewGrads(a *Adapter, base bool) *Grads {
	g := &Grads{be: m.be}
	if a != nil {
		g.adapter = &Adapter{Name: a.Name, Rank: a.Rank, Alpha: a.Alpha, Scale: a.Scale, Targets: a.Targets,
			Layers: make([][NumModules]*LoRA, len(a.Layers)), m: m}
		for l := range a.Layers {
			for mod, w := range a.Layers[l] {
				if w != nil {
					g.adapter.Layers[l][mod] = &LoRA{A: m.be.New(w.A.Shape()...), B: m.be.New(w.B.Shape()...)}
				}
			}
		}
	}
	if base {
		g.base = &Model{cfg: m.cfg, be: m.be, layers: make([]layer, m.cfg.NumLayers)}
		for _, s := range specs(m.cfg) {
			*s.slot(g.base) = m.be.New(s.shape...)
		}
		g.base.finish()
	}
	return g
}

// Adapter returns the adapter gradients in the order and with the names of
// Adapter.Params (nil without an adapter).
func (g *Grads) Adapter() []Param {
	if g.adapter == nil {
		return nil
	}
	return g.adapter.Params()
}

// Base returns the weight gradients in the order and with the names of
// Model.Params (nil unless requested). With tied embeddings the embedding
// gradient includes the lm_head contribution.
func (g *Grads) Base() []Param {
	if g.base == nil {
		return nil
	}
	return g.base.Params()
}

// Zero clears every gradient.
func (g *Grads) Zero() {
	for _, p := range append(g.Adapter(), g.Base()...) {
		g.be.Fill(p.Tensor, 0)
	}
}

// Free releases the gradient tensors.
func (g *Grads) Free() {
	for _, p := range append(g.Adapter(), g.Base()...) {
		g.be.Free(p.Tensor)
	}
	g.adapter, g.base = nil, nil
}

// ForwardTrain runs whole sequences (no cache) with adapter a (nil for the
// base model), keeping what Backward needs. Row t of a sequence predicts
// token t+1: LogProbs returns len(seq)-1 values per sequence.
func (m *Model) ForwardTrain(ctx context.Context, seqs [][]int32, a *Adapter) (*Activations, error) {
	act, err := m.forwardTrain(ctx, seqs, a)
	if err == nil {
		if err = m.be.Err(); err != nil { // a device error makes act undefined
			act.Free()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("forward train: %w", err)
	}
	return act, nil
}

func (m *Model) forwardTrain(ctx context.Context, seqs [][]int32, a *Adapter) (*Activations, error) {
	act, err := m.newTrainBatch(seqs, a)
	if err != nil {
		return nil, err
	}
	t := len(act.b.ids)
	cfg, be := m.cfg, m.be
	act.b.upload(be)
	act.dtarget = be.UploadIndex(act.targets)
	x := act.alloc(t, cfg.HiddenSize)
	be.Embedding(x, m.embed, act.b.dids)
	lora := m.loraScratch(t, a)
	defer freeIf(be, lora)
	act.layers = make([]layerActs, cfg.NumLayers)
	act.ckpt = m.checkpoint
	for l := range m.layers {
		if err := ctx.Err(); err != nil {
			act.Free()
			return nil, err
		}
		var sc layerScratch
		x = m.trainLayer(l, x, act, act.allocators(&sc), lora)
		sc.free(be)
		act.layers[l] = act.ckpt.keep(act.layers[l])
	}
	act.xOut = x
	act.hOut = m.headInput(act, x)
	act.lse = act.alloc(t)
	logp := act.alloc(t)
	be.TokenLogProbs(logp, act.lse, act.hOut, m.lmHead, act.dtarget)
	act.logp = make([]float32, t)
	be.Download(act.logp, logp)
	return act, nil
}

// newTrainBatch validates the sequences and lays them out as rows with
// next-token targets.
func (m *Model) newTrainBatch(seqs [][]int32, a *Adapter) (*Activations, error) {
	if len(seqs) == 0 {
		return nil, errors.New("no sequences")
	}
	if a != nil && a.m != m {
		return nil, errors.New("adapter belongs to another model")
	}
	act := &Activations{m: m, adapter: a, b: &batch{}}
	for i, s := range seqs {
		if len(s) < 2 {
			return nil, fmt.Errorf("sequence %d: need at least 2 tokens, got %d", i, len(s))
		}
		if len(s) > m.cfg.MaxPositions {
			return nil, fmt.Errorf("sequence %d: %d tokens exceed the context of %d", i, len(s), m.cfg.MaxPositions)
		}
		for _, id := range s {
			if id < 0 || int(id) >= m.cfg.VocabSize {
				return nil, fmt.Errorf("sequence %d: token %d outside vocabulary of %d", i, id, m.cfg.VocabSize)
			}
		}
		act.b.segs = append(act.b.segs, segment{off: len(act.b.ids), n: len(s), adapter: a})
		act.b.ids = append(act.b.ids, s...)
		act.targets = append(act.targets, s[1:]...)
		act.targets = append(act.targets, 0) // the last row predicts nothing
		for j := range s {
			act.b.pos = append(act.b.pos, int32(j))
		}
	}
	return act, nil
}

func (m *Model) loraScratch(t int, a *Adapter) kernels.Tensor {
	if a == nil {
		return nil
	}
	return m.be.Empty(kernels.F32, t*a.Rank)
}

func freeIf(be kernels.Backend, t kernels.Tensor) {
	if t != nil {
		be.Free(t)
	}
}

// alloc makes a saved activation: float32, its contents undefined
// (kernels.Backend.Empty) until the operation that produces it sets it.
func (act *Activations) alloc(shape ...int) kernels.Tensor {
	return act.allocT(kernels.F32, shape...)
}

func (act *Activations) allocT(dt kernels.DType, shape ...int) kernels.Tensor {
	t := act.m.be.Empty(dt, shape...)
	act.owned = append(act.owned, t)
	return t
}

// Checkpointing is what a training pass keeps of each layer for the
// backward. Gradients are the same in every mode.
type Checkpointing uint8

const (
	// CheckpointOff keeps every activation.
	CheckpointOff Checkpointing = iota
	// CheckpointFull keeps each layer's input only; Backward recomputes one
	// layer's forward at a time: one extra forward of every layer per step
	// (its GEMMs and attention too), for activations of one layer instead
	// of all of them.
	CheckpointFull
	// CheckpointSelective keeps what the GEMMs and attention produce (q, k,
	// v, the attention output and its log-sum-exp, the residual after
	// attention, gate and up) and recomputes what is cheap to make again
	// (the norms' outputs, q and k after their norm and RoPE, SwiGLU's
	// output): no GEMM or attention runs twice, and a layer keeps about 60%
	// of its activations (Qwen3-8B: 172 KB per token and layer of 275 KB).
	CheckpointSelective
)

// SetCheckpointMode sets what later ForwardTrain calls keep.
func (m *Model) SetCheckpointMode(c Checkpointing) { m.checkpoint = c }

// keep is what of a layer's activations the mode keeps after its forward.
func (c Checkpointing) keep(s layerActs) layerActs {
	switch c {
	case CheckpointFull:
		return layerActs{xIn: s.xIn}
	case CheckpointSelective:
		s.h1, s.qr, s.kr, s.h2, s.ac = nil, nil, nil, nil, nil
	}
	return s
}

// layerAlloc makes a layer's tensors: cheap ones (norms, RoPE, SwiGLU:
// recomputed under selective checkpointing), kept ones (GEMM and attention
// outputs: recomputed only under full checkpointing) and the layer output.
type layerAlloc struct {
	cheap, kept, out func(shape ...int) kernels.Tensor
}

// allocators are the pass's allocators for one layer: what the mode does
// not keep comes from sc, freed once the layer is done.
func (act *Activations) allocators(sc *layerScratch) layerAlloc {
	be := act.m.be
	switch act.ckpt {
	case CheckpointFull:
		return layerAlloc{cheap: sc.alloc(be), kept: sc.alloc(be), out: act.alloc}
	case CheckpointSelective:
		return layerAlloc{cheap: sc.alloc(be), kept: act.alloc, out: act.alloc}
	}
	return layerAlloc{cheap: act.alloc, kept: act.alloc, out: act.alloc}
}

// layerScratch holds one layer's recomputable activations.
type layerScratch []kernels.Tensor

func (sc *layerScratch) alloc(be kernels.Backend) func(shape ...int) kernels.Tensor {
	return func(shape ...int) kernels.Tensor {
		t := be.Empty(kernels.F32, shape...)
		*sc = append(*sc, t)
		return t
	}
}

func (sc *layerScratch) free(be kernels.Backend) {
	for _, t := range *sc {
		be.Free(t)
	}
	*sc = nil
}

// trainLayer runs layer l on x, saving its activations in act.layers[l]
// (allocated by al), and returns the layer output.
func (m *Model) trainLayer(l int, x kernels.Tensor, act *Activations, al layerAlloc, lora kernels.Tensor) kernels.Tensor {
	cfg, be, ly, b := m.cfg, m.be, &m.layers[l], act.b
	t, eps := len(b.ids), float32(cfg.RMSNormEps)
	qw, kw := cfg.NumHeads*cfg.HeadDim, cfg.NumKVHeads*cfg.HeadDim
	s := &act.layers[l]
	s.xIn = x
	s.h1 = al.cheap(t, cfg.HiddenSize)
	be.RMSNorm(s.h1, x, ly.attnNorm, eps)
	s.q, s.k, s.v = al.kept(t, qw), al.kept(t, kw), al.kept(t, kw)
	h1 := m.operand(s.h1)
	m.linear(s.q, &h1, l, ModQ, b.segs, lora)
	m.linear(s.k, &h1, l, ModK, b.segs, lora)
	m.linear(s.v, &h1, l, ModV, b.segs, lora)
	h1.free()
	m.qkRope(l, s, b, al.cheap)
	s.att = al.kept(t, qw)
	a := m.attn(0)
	if a.BF16 {
		// Kept for the backward, which then skips recomputing the
		// softmax's statistics (Heads floats per token).
		s.lse = al.kept(t, cfg.NumHeads)
	}
	for _, sg := range b.segs {
		if s.lse != nil {
			a.LSE = be.View(s.lse, sg.off*cfg.NumHeads, sg.n, cfg.NumHeads)
		}
		be.Attention(be.View(s.att, sg.off*qw, sg.n, qw), be.View(s.qr, sg.off*qw, sg.n, qw),
			be.View(s.kr, sg.off*kw, sg.n, kw), be.View(s.v, sg.off*kw, sg.n, kw), a)
	}
	s.xMid = al.kept(t, cfg.HiddenSize)
	att := m.operand(s.att)
	m.linear(s.xMid, &att, l, ModO, b.segs, lora)
	att.free()
	be.Add(s.xMid, s.xMid, x)
	s.h2 = al.cheap(t, cfg.HiddenSize)
	be.RMSNorm(s.h2, s.xMid, ly.mlpNorm, eps)
	s.gate, s.up = al.kept(t, cfg.IntermediateSize), al.kept(t, cfg.IntermediateSize)
	h2 := m.operand(s.h2)
	m.linear(s.gate, &h2, l, ModGate, b.segs, lora)
	m.linear(s.up, &h2, l, ModUp, b.segs, lora)
	h2.free()
	s.ac = al.cheap(t, cfg.IntermediateSize)
	be.SwiGLU(s.ac, s.gate, s.up)
	out := al.out(t, cfg.HiddenSize)
	ac := m.operand(s.ac)
	m.linear(out, &ac, l, ModDown, b.segs, lora)
	ac.free()
	be.Add(out, out, s.xMid)
	return out
}

// qkRope sets s.qr and s.kr (allocated by alloc): q and k after their
// norm (Qwen3) and RoPE.
func (m *Model) qkRope(l int, s *layerActs, b *batch, alloc func(shape ...int) kernels.Tensor) {
	cfg, be, ly := m.cfg, m.be, &m.layers[l]
	t, eps := len(b.ids), float32(cfg.RMSNormEps)
	s.qr, s.kr = alloc(t, cfg.NumHeads*cfg.HeadDim), alloc(t, cfg.NumKVHeads*cfg.HeadDim)
	if cfg.QKNorm {
		be.RMSNorm(be.View(s.qr, 0, t*cfg.NumHeads, cfg.HeadDim), be.View(s.q, 0, t*cfg.NumHeads, cfg.HeadDim), ly.qNorm, eps)
		be.RMSNorm(be.View(s.kr, 0, t*cfg.NumKVHeads, cfg.HeadDim), be.View(s.k, 0, t*cfg.NumKVHeads, cfg.HeadDim), ly.kNorm, eps)
	} else {
		be.Copy(s.qr, s.q)
		be.Copy(s.kr, s.k)
	}
	be.RoPE(s.qr, b.dpos, m.rope, false)
	be.RoPE(s.kr, b.dpos, m.rope, false)
}

// recomputeCheap remakes what selective checkpointing dropped of layer l
// (allocated by alloc) from what it kept, as trainLayer made them.
func (m *Model) recomputeCheap(l int, act *Activations, alloc func(shape ...int) kernels.Tensor) {
	cfg, be, ly, s := m.cfg, m.be, &m.layers[l], &act.layers[l]
	t, eps := len(act.b.ids), float32(cfg.RMSNormEps)
	s.h1 = alloc(t, cfg.HiddenSize)
	be.RMSNorm(s.h1, s.xIn, ly.attnNorm, eps)
	m.qkRope(l, s, act.b, alloc)
	s.h2 = alloc(t, cfg.HiddenSize)
	be.RMSNorm(s.h2, s.xMid, ly.mlpNorm, eps)
	s.ac = alloc(t, cfg.IntermediateSize)
	be.SwiGLU(s.ac, s.gate, s.up)
}

// LogProbs returns, per sequence, log p(seq[t+1] | seq[:t+1]) for each t.
func (act *Activations) LogProbs() [][]float32 {
	out := make([][]float32, len(act.b.segs))
	for i, s := range act.b.segs {
		out[i] = append([]float32(nil), act.logp[s.off:s.off+s.n-1]...)
	}
	return out
}

// Free releases the saved activations and the pass's device indices.
func (act *Activations) Free() {
	be := act.m.be
	for _, t := range act.owned {
		be.Free(t)
	}
	act.owned, act.layers = nil, nil
	act.b.free(be)
	if act.dtarget != nil {
		be.FreeIndex(act.dtarget)
		act.dtarget = nil
	}
}

// MaskedMean returns the masked mean of log-probabilities,
// sum(mask*logp)/sum(mask), and its gradient with respect to logp (the
// dlogp Backward takes). mask has the shape of logp.
func MaskedMean(logp, mask [][]float32) (float64, [][]float32, error) {
	if len(mask) != len(logp) {
		return 0, nil, fmt.Errorf("masked mean: %d masks for %d sequences", len(mask), len(logp))
	}
	var sum, n float64
	for i := range logp {
		if len(mask[i]) != len(logp[i]) {
			return 0, nil, fmt.Errorf("masked mean: sequence %d has %d mask values for %d tokens", i, len(mask[i]), len(logp[i]))
		}
		for t, v := range logp[i] {
			sum += float64(mask[i][t]) * float64(v)
			n += float64(mask[i][t])
		}
	}
	if n == 0 {
		return 0, nil, errors.New("masked mean: empty mask")
	}
	grad := make([][]float32, len(logp))
	for i := range logp {
		grad[i] = make([]float32, len(logp[i]))
		for t := range grad[i] {
			grad[i][t] = float32(float64(mask[i][t]) / n)
		}
	}
	return sum / n, grad, nil
}
