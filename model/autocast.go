package model

import "github.com/hone-rl/hone/kernels"

// Autocast, as PyTorch's torch.autocast(dtype=torch.bfloat16) treats a
// bf16 model: the GEMMs against a bf16 base weight take their float32
// activation operand rounded to bf16 (round to nearest even, into a
// temporary the size of that operand) and run bf16 x bf16 with float32
// accumulation and a float32 result, which a GPU runs on its tensor cores.
// The GEMMs are the projections' x W^T, the LM head's h W^T and the input
// gradient dY W of the backward (the LM head's too: its logits' gradient is
// rounded to bf16, as the gradient of PyTorch's bf16 logits is). Attention
// runs with bf16 inputs too (kernels.Attn.BF16: q, k, v and the backward's
// output gradient rounded, float32 accumulation; on a GPU the tensor-core
// kernels, which also round the probabilities and score gradients for
// their products, as FlashAttention does under autocast). LoRA's A and B
// GEMMs of a bf16 module run bf16 x bf16 too, as torch.autocast runs every
// linear whatever its weight's type: their activation, A, B and the
// rank-sized intermediate (in A^T, its gradient) rounded, float32 results
// (SetAutocastLoRA turns this part off). Norms, the LoRA weights themselves,
// their gradients and the optimiser state stay float32.
//
// Off (the default), a bf16 weight meets the float32 activation as is: the
// backend widens the weight and the product is the float32 GEMM of the
// stored values (exact mode). Autocast moves a step's loss and gradients by
// the rounding of the activations (about 2^-9 relative per element); both
// backends implement it alike (Backend.Convert, then MatMul with two bf16
// operands), so the CPU and CUDA backends agree with autocast on as they do
// with it off.

// SetAutocast turns autocast on or off for later passes (Forward,
// ForwardTrain and Backward; a Backward follows the setting of its own
// call). It changes nothing for float32 weights.
func (m *Model) SetAutocast(on bool) { m.autocast = on }

// SetAutocastLoRA chooses, under autocast, whether the LoRA GEMMs of bf16
// modules run in bf16 (on, the default: torch.autocast's behaviour) or in
// float32 (off: the stored LoRA weights and the float32 activation as
// they are).
func (m *Model) SetAutocastLoRA(on bool) { m.loraF32 = !on }

// AutocastFor resolves an autocast setting (trainer.autocast,
// engine_embedded.autocast): "on", "off", or "auto", on when the base
// weights are bf16 on a device backend (where the bf16 GEMM runs on tensor
// cores; on the CPU it only rounds).
func AutocastFor(setting string, device bool, weights kernels.DType) bool {
	switch setting {
	case "on":
		return true
	case "off":
		return false
	}
	return device && weights == kernels.BF16
}

// Autocast reports whether autocast is on.
func (m *Model) Autocast() bool { return m.autocast }

// attnBF16 reports whether attention runs with bf16 inputs: autocast on a
// bf16 model (the layers' projections are bf16 together).
func (m *Model) attnBF16() bool {
	return m.autocast && len(m.layers) > 0 && m.layers[0].w[ModQ].DType() == kernels.BF16
}

// casts reports whether a GEMM against base weight w runs in bf16.
func (m *Model) casts(w kernels.Tensor) bool { return m.autocast && w.DType() == kernels.BF16 }

// loraCasts reports whether the LoRA GEMMs of a module with base weight w
// run in bf16 (autocast applies to w and SetAutocastLoRA left it on).
func (m *Model) loraCasts(w kernels.Tensor) bool { return m.casts(w) && !m.loraF32 }

// operand is a GEMM's float32 activation operand and its bf16 rounding,
// made on first need: the GEMMs that read one activation (q, k and v read
// one norm; a module's base and LoRA GEMMs read its input) share one
// rounding. Call free when its GEMMs are done.
type operand struct {
	be    kernels.Backend
	x, xb kernels.Tensor
}

func (m *Model) operand(x kernels.Tensor) operand { return operand{be: m.be, x: x} }

// bf16 returns x rounded to bf16 (round to nearest even).
func (o *operand) bf16() kernels.Tensor {
	if o.xb == nil {
		o.xb = o.be.Empty(kernels.BF16, o.x.Shape()...)
		o.be.Convert(o.xb, o.x)
	}
	return o.xb
}

func (o *operand) free() {
	if o.xb != nil {
		o.be.Free(o.xb)
		o.xb = nil
	}
}

// castBF16 returns a new bf16 rounding of x, which the caller frees.
func (m *Model) castBF16(x kernels.Tensor) kernels.Tensor {
	o := m.operand(x)
	return o.bf16()
}

// baseMatMul sets c = x op(w) + beta*c for a base weight w (op transposes
// with transW), with x rounded to bf16 first when autocast applies.
func (m *Model) baseMatMul(c kernels.Tensor, x *operand, w kernels.Tensor, transW bool, beta float32) {
	if !m.casts(w) {
		m.be.MatMul(c, x.x, w, false, transW, 1, beta)
		return
	}
	m.be.MatMul(c, x.bf16(), w, false, transW, 1, beta)
}

// headInput returns the LM head's input for the training pass, the final
// norm of x: float32, or when autocast applies to the LM head rounded to a
// bf16 tensor, which TokenLogProbs and its backward multiply bf16 x bf16
// (the backward then rounds the logits' gradient too).
func (m *Model) headInput(act *Activations, x kernels.Tensor) kernels.Tensor {
	be, eps := m.be, float32(m.cfg.RMSNormEps)
	t, _ := kernels.Rows(x)
	if !m.casts(m.lmHead) {
		h := act.alloc(t, m.cfg.HiddenSize)
		be.RMSNorm(h, x, m.norm, eps)
		return h
	}
	h := be.Empty(kernels.F32, t, m.cfg.HiddenSize)
	defer be.Free(h)
	be.RMSNorm(h, x, m.norm, eps)
	hb := act.allocT(kernels.BF16, t, m.cfg.HiddenSize)
	be.Convert(hb, h)
	return hb
}
