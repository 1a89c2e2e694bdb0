package model

import (
	"context"
	"errors"
	"fmt"

	"github.com/hone-rl/hone/kernels"
)

// Backward propagates dlogp (per sequence, shaped like Activations.LogProbs:
// d loss / d log p of each predicted token) through the pass in act and
// accumulates gradients into g: the LoRA A/B of the adapter ForwardTrain
// used (when g has adapter gradients) and every weight (when g has base
// gradients). act stays valid; call act.Free when done.
func (m *Model) Backward(ctx context.Context, act *Activations, dlogp [][]float32, g *Grads) error {
	err := m.backward(ctx, act, dlogp, g)
	if err == nil {
		err = m.be.Err() // a device error makes the gradients undefined
	}
	if err != nil {
		return fmt.Errorf("backward: %w", err)
	}
	return nil
}

// bwd is the state of one backward pass.
type bwd struct {
	m    *Model
	act  *Activations
	g    *Grads
	tmp  []kernels.Tensor
	lora kernels.Tensor // [T, rank] input projection through A
	dt   kernels.Tensor // [T, rank] its gradient
}

func (m *Model) backward(ctx context.Context, act *Activations, dlogp [][]float32, g *Grads) error {
	host, err := m.checkBackward(act, dlogp, g)
	if err != nil {
		return err
	}
	t := len(host)
	cfg, be := m.cfg, m.be
	w := &bwd{m: m, act: act, g: g}
	defer w.free()
	if a := act.adapter; a != nil {
		w.lora, w.dt = w.alloc(t, a.Rank), w.alloc(t, a.Rank)
	}
	dh := w.alloc(t, cfg.HiddenSize)
	var dHead kernels.Tensor
	if g.base != nil {
		dHead = g.base.lmHead
	}
	dl := be.Upload(host, t)
	w.tmp = append(w.tmp, dl)
	be.TokenLogProbsBackward(dh, dHead, act.hOut, m.lmHead, act.lse, act.dtarget, dl)
	dx := w.alloc(t, cfg.HiddenSize)
	be.RMSNormBackward(dx, w.baseGrad(func(b *Model) kernels.Tensor { return b.norm }), dh, act.xOut, m.norm, float32(cfg.RMSNormEps))
	var recompute kernels.Tensor // LoRA scratch of a recomputed layer
	if act.ckpt == CheckpointFull {
		recompute = m.loraScratch(t, act.adapter)
		defer freeIf(be, recompute)
	}
	for l := len(m.layers) - 1; l >= 0; l-- {
		if err := ctx.Err(); err != nil {
			return err
		}
		var sc layerScratch
		switch act.ckpt {
		case CheckpointFull:
			al := sc.alloc(be)
			m.trainLayer(l, act.layers[l].xIn, act, layerAlloc{cheap: al, kept: al, out: al}, recompute)
		case CheckpointSelective:
			m.recomputeCheap(l, act, sc.alloc(be))
		}
		w.mlp(l, dx)
		w.attention(l, dx)
		sc.free(be)
		act.layers[l] = act.ckpt.keep(act.layers[l])
	}
	if g.base != nil {
		be.EmbeddingBackward(g.base.embed, dx, act.b.dids)
	}
	return nil
}

// checkBackward validates Backward's arguments and lays dlogp out per row.
func (m *Model) checkBackward(act *Activations, dlogp [][]float32, g *Grads) ([]float32, error) {
	if act == nil || act.m != m || act.layers == nil {
		return nil, errors.New("activations are missing, freed, or from another model")
	}
	if g == nil || (g.adapter == nil && g.base == nil) {
		return nil, errors.New("no gradients to accumulate")
	}
	if g.adapter != nil && (act.adapter == nil || len(g.adapter.Layers) != len(act.adapter.Layers)) {
		return nil, errors.New("adapter gradients need a forward pass with that adapter")
	}
	if len(dlogp) != len(act.b.segs) {
		return nil, fmt.Errorf("%d dlogp rows for %d sequences", len(dlogp), len(act.b.segs))
	}
	host := make([]float32, len(act.b.ids))
	for i, s := range act.b.segs {
		if len(dlogp[i]) != s.n-1 {
			return nil, fmt.Errorf("sequence %d: %d dlogp values for %d targets", i, len(dlogp[i]), s.n-1)
		}
		copy(host[s.off:], dlogp[i])
	}
	return host, nil
}

// alloc makes a gradient the next operation sets whole (its contents are
// undefined until then: kernels.Backend.Empty); zeros makes one that
// operations accumulate into.
func (w *bwd) alloc(shape ...int) kernels.Tensor {
	t := w.m.be.Empty(kernels.F32, shape...)
	w.tmp = append(w.tmp, t)
	return t
}

func (w *bwd) zeros(shape ...int) kernels.Tensor {
	t := w.m.be.New(shape...)
	w.tmp = append(w.tmp, t)
	return t
}

func (w *bwd) free() {
	for _, t := range w.tmp {
		w.m.be.Free(t)
	}
}

// baseGrad picks a weight gradient, or nil without base gradients.
func (w *bwd) baseGrad(pick func(*Model) kernels.Tensor) kernels.Tensor {
	if w.g.base == nil {
		return nil
	}
	return pick(w.g.base)
}

// mlp backpropagates dx (the layer output gradient) through the MLP block,
// leaving in dx the gradient of the residual after attention.
func (w *bwd) mlp(l int, dx kernels.Tensor) {
	m, be, s := w.m, w.m.be, &w.act.layers[l]
	t, inter := len(w.act.b.ids), m.cfg.IntermediateSize
	dAct, dGate, dUp := w.alloc(t, inter), w.alloc(t, inter), w.alloc(t, inter)
	ac := m.operand(s.ac)
	w.linear(dAct, &ac, dx, l, ModDown, false)
	ac.free()
	be.SwiGLUBackward(dGate, dUp, dAct, s.gate, s.up)
	dh := w.alloc(t, m.cfg.HiddenSize)
	h2 := m.operand(s.h2)
	w.linear(dh, &h2, dGate, l, ModGate, false)
	w.linear(dh, &h2, dUp, l, ModUp, true)
	h2.free()
	w.normInto(dx, dh, s.xMid, m.layers[l].mlpNorm, func(b *Model) kernels.Tensor { return b.layers[l].mlpNorm })
}

// normInto adds the RMSNorm backward of dh (input x, weight nw) to dx.
func (w *bwd) normInto(dx, dh, x, nw kernels.Tensor, pick func(*Model) kernels.Tensor) {
	be := w.m.be
	d := w.alloc(x.Shape()...)
	be.RMSNormBackward(d, w.baseGrad(pick), dh, x, nw, float32(w.m.cfg.RMSNormEps))
	be.Add(dx, dx, d)
}

// attention backpropagates dx through the attention block, leaving in dx
// the gradient of the layer input.
func (w *bwd) attention(l int, dx kernels.Tensor) {
	m, be, s, cfg := w.m, w.m.be, &w.act.layers[l], w.m.cfg
	t, b := len(w.act.b.ids), w.act.b
	qw, kw := cfg.NumHeads*cfg.HeadDim, cfg.NumKVHeads*cfg.HeadDim
	dAtt := w.alloc(t, qw)
	att := m.operand(s.att)
	w.linear(dAtt, &att, dx, l, ModO, false)
	att.free()
	dqr, dkr, dv := w.alloc(t, qw), w.zeros(t, kw), w.zeros(t, kw) // AttentionBackward adds to dk and dv
	a := m.attn(0)
	for _, sg := range b.segs {
		view := func(x kernels.Tensor, width int) kernels.Tensor { return be.View(x, sg.off*width, sg.n, width) }
		if a.BF16 && s.lse != nil {
			// The forward's statistics (trainLayer kept them).
			a.LSE, a.Out = view(s.lse, cfg.NumHeads), view(s.att, qw)
		}
		be.AttentionBackward(view(dqr, qw), view(dkr, kw), view(dv, kw), view(dAtt, qw),
			view(s.qr, qw), view(s.kr, kw), view(s.v, kw), a)
	}
	be.RoPE(dqr, b.dpos, m.rope, true)
	be.RoPE(dkr, b.dpos, m.rope, true)
	dq, dk := dqr, dkr
	if cfg.QKNorm {
		dq, dk = w.alloc(t, qw), w.alloc(t, kw)
		ly, eps := &m.layers[l], float32(cfg.RMSNormEps)
		heads := func(x kernels.Tensor, n int) kernels.Tensor { return be.View(x, 0, t*n, cfg.HeadDim) }
		be.RMSNormBackward(heads(dq, cfg.NumHeads), w.baseGrad(func(b *Model) kernels.Tensor { return b.layers[l].qNorm }),
			heads(dqr, cfg.NumHeads), heads(s.q, cfg.NumHeads), ly.qNorm, eps)
		be.RMSNormBackward(heads(dk, cfg.NumKVHeads), w.baseGrad(func(b *Model) kernels.Tensor { return b.layers[l].kNorm }),
			heads(dkr, cfg.NumKVHeads), heads(s.k, cfg.NumKVHeads), ly.kNorm, eps)
	}
	dh := w.alloc(t, cfg.HiddenSize)
	h1 := m.operand(s.h1)
	w.linear(dh, &h1, dq, l, ModQ, false)
	w.linear(dh, &h1, dk, l, ModK, true)
	w.linear(dh, &h1, dv, l, ModV, true)
	h1.free()
	w.normInto(dx, dh, s.xIn, m.layers[l].attnNorm, func(b *Model) kernels.Tensor { return b.layers[l].attnNorm })
}

// linear backpropagates dy through y = in*W^T + bias + scale*(in*A^T)*B^T:
// din is set (or added to, with accumulate) to dy*W + scale*(dy*B)*A, and
// the weight, bias and LoRA gradients are accumulated.
func (w *bwd) linear(din kernels.Tensor, in *operand, dy kernels.Tensor, l int, mod Module, accumulate bool) {
	m, be := w.m, w.m.be
	beta := float32(0)
	if accumulate {
		beta = 1
	}
	wt := m.layers[l].w[mod]
	dyo := m.operand(dy)
	defer dyo.free()
	m.baseMatMul(din, &dyo, wt, false, beta)
	if gb := w.g.base; gb != nil {
		be.MatMul(gb.layers[l].w[mod], dy, in.x, true, false, 1, 1)
		if mod <= ModO && gb.layers[l].bias[mod] != nil {
			be.SumRows(gb.layers[l].bias[mod], dy)
		}
	}
	a := w.act.adapter
	if a == nil || a.Layers[l][mod] == nil {
		return
	}
	lw := a.Layers[l][mod]
	t := len(w.act.b.ids)
	proj, dt := be.View(w.lora, 0, t, a.Rank), be.View(w.dt, 0, t, a.Rank)
	var ga *LoRA
	if w.g.adapter != nil {
		ga = w.g.adapter.Layers[l][mod]
	}
	if m.loraCasts(wt) {
		w.loraBF16(din, in, &dyo, proj, dt, a, l, mod, ga)
		return
	}
	be.MatMul(proj, in.x, lw.A, false, true, 1, 0)
	be.MatMul(dt, dy, lw.B, false, false, a.Scale, 0)
	be.MatMul(din, dt, lw.A, false, false, 1, 1)
	if ga != nil {
		be.MatMul(ga.B, dy, proj, true, false, a.Scale, 1)
		be.MatMul(ga.A, dt, in.x, true, false, 1, 1)
	}
}

// loraBF16 is linear's LoRA part under autocast (Model.loraBF16's
// backward): every GEMM takes bf16 operands (in, dy, A, B, the recomputed
// in*A^T and its gradient dt, rounded) and accumulates in float32 into
// float32 din and gradients ga (nil: no adapter gradients) of layer l's
// module mod of adapter a.
func (w *bwd) loraBF16(din kernels.Tensor, in, dy *operand, proj, dt kernels.Tensor, a *Adapter, l int, mod Module, ga *LoRA) {
	m, be, scale := w.m, w.m.be, a.Scale
	ab, bb, owned := a.weightsBF16(l, mod)
	if owned {
		defer be.Free(ab)
		defer be.Free(bb)
	}
	be.MatMul(proj, in.bf16(), ab, false, true, 1, 0)
	be.MatMul(dt, dy.bf16(), bb, false, false, scale, 0)
	dtb := m.castBF16(dt)
	defer be.Free(dtb)
	be.MatMul(din, dtb, ab, false, false, 1, 1)
	if ga == nil {
		return
	}
	projb := m.castBF16(proj)
	defer be.Free(projb)
	be.MatMul(ga.B, dy.bf16(), projb, true, false, scale, 1)
	be.MatMul(ga.A, dtb, in.bf16(), true, false, 1, 1)
}
