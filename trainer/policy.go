package trainer

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/hone-rl/hone/kernels"
	"github.com/hone-rl/hone/model"
	"github.com/hone-rl/hone/trainer/checkpoint"
)

// errNonFinite marks a step whose gradients are NaN or infinite: the
// update is skipped.
var errNonFinite = errors.New("non-finite gradients, update skipped")

// AdamWOptions are the AdamW hyper-parameters (decoupled weight decay,
// Loshchilov & Hutter), as torch.optim.AdamW takes them.
type AdamWOptions struct {
	Beta1       float64 `yaml:"beta1"`
	Beta2       float64 `yaml:"beta2"`
	Eps         float64 `yaml:"eps"`
	WeightDecay float64 `yaml:"weight_decay"`
}

// Policy is a frozen base model plus the LoRA adapter being trained, with
// the adapter's gradients and AdamW moments on the model's backend. With
// no adapter every model weight is trained (full fine-tuning, for small
// models).
type Policy struct {
	Model   *model.Model
	Adapter *model.Adapter // nil: full fine-tuning
	be      kernels.Backend
	grads   *model.Grads
	m, v    []kernels.Tensor // AdamW moments, in Adapter.Params order
	steps   int64            // optimizer steps taken
}

// NewPolicy prepares adapter a for training on m, or every weight of m
// when a is nil.
func NewPolicy(m *model.Model, a *model.Adapter) *Policy {
	p := &Policy{Model: m, Adapter: a, be: m.Backend(), grads: m.NewGrads(a, a == nil)}
	for _, prm := range p.params() {
		p.m = append(p.m, p.be.New(prm.Tensor.Shape()...))
		p.v = append(p.v, p.be.New(prm.Tensor.Shape()...))
	}
	return p
}

// params are the trained tensors: the adapter's, or the model's.
func (p *Policy) params() []model.Param {
	if p.Adapter != nil {
		return p.Adapter.Params()
	}
	return p.Model.Params()
}

// gradParams are the gradients of params, in the same order.
func (p *Policy) gradParams() []model.Param {
	if p.Adapter != nil {
		return p.grads.Adapter()
	}
	return p.grads.Base()
}

// Free releases gradients and moments (not the model or adapter).
func (p *Policy) Free() {
	p.grads.Free()
	for i := range p.m {
		p.be.Free(p.m[i])
		p.be.Free(p.v[i])
	}
	p.m, p.v = nil, nil
}

// toTokenAligned shifts the model's per-target logprobs (row t predicts
// token t+1) to trainer alignment (index t is token t, index 0 is 0).
func toTokenAligned(lp [][]float32) [][]float32 {
	out := make([][]float32, len(lp))
	for i, r := range lp {
		out[i] = append([]float32{0}, r...)
	}
	return out
}

// forward runs the adapter policy on seqs and returns the saved pass and
// token-aligned logprobs.
func (p *Policy) forward(ctx context.Context, seqs [][]int32) (*model.Activations, [][]float32, error) {
	act, err := p.Model.ForwardTrain(ctx, seqs, p.Adapter)
	if err != nil {
		return nil, nil, err
	}
	return act, toTokenAligned(act.LogProbs()), nil
}

// reference returns token-aligned logprobs of the base model (adapter
// disabled), the KL reference. Full fine-tuning keeps no frozen copy.
func (p *Policy) reference(ctx context.Context, seqs [][]int32) ([][]float32, error) {
	if p.Adapter == nil {
		return nil, fmt.Errorf("reference logprobs: full fine-tuning has no frozen reference (set kl_coef 0)")
	}
	act, err := p.Model.ForwardTrain(ctx, seqs, nil)
	if err != nil {
		return nil, fmt.Errorf("reference logprobs: %w", err)
	}
	defer act.Free()
	return toTokenAligned(act.LogProbs()), nil
}

// backward accumulates adapter gradients for token-aligned dlogp.
func (p *Policy) backward(ctx context.Context, act *model.Activations, dlogp [][]float32) error {
	shifted := make([][]float32, len(dlogp))
	for i, d := range dlogp {
		shifted[i] = d[1:]
	}
	return p.Model.Backward(ctx, act, shifted, p.grads)
}

// optimize clips the accumulated gradients to maxNorm (<= 0: no clip),
// applies one AdamW step at rate lr, zeroes the gradients and returns the
// norm before clipping. A non-finite norm skips the update.
func (p *Policy) optimize(lr, maxNorm float64, o AdamWOptions) (float64, error) {
	gs := p.gradParams()
	norm := math.Sqrt(p.sumSquares(gs))
	defer p.grads.Zero()
	if err := p.be.Err(); err != nil {
		return 0, fmt.Errorf("optimizer step refused: %w", err)
	}
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		return norm, fmt.Errorf("gradient norm is %v: %w", norm, errNonFinite)
	}
	if maxNorm > 0 && norm > maxNorm {
		c := float32(maxNorm / (norm + 1e-6)) // torch.nn.utils.clip_grad_norm_
		for _, g := range gs {
			p.be.Scale(g.Tensor, g.Tensor, c)
		}
	}
	p.steps++
	hp := kernels.AdamW{LR: float32(lr), Beta1: float32(o.Beta1), Beta2: float32(o.Beta2), Eps: float32(o.Eps),
		WeightDecay: float32(o.WeightDecay), Step: int(p.steps)}
	for i, prm := range p.params() {
		p.be.AdamWStep(prm.Tensor, gs[i].Tensor, p.m[i], p.v[i], hp)
	}
	return norm, nil
}

// sumSquares is the sum of squares of every gradient, accumulated on the
// device into one [1] tensor and downloaded once: no synchronisation per
// parameter tensor (each tensor's sum is taken in float64, the running
// total is float32).
func (p *Policy) sumSquares(gs []model.Param) float64 {
	acc := p.be.New(1) // per step: a tensor made under a device error could not be reused after ClearErr
	defer p.be.Free(acc)
	for _, g := range gs {
		p.be.SumSquaresInto(acc, 0, g.Tensor)
	}
	var ss [1]float32
	p.be.Download(ss[:], acc)
	return float64(ss[0])
}

// snapshot copies the trained tensors and their moments to host memory.
func (p *Policy) snapshot() (tensors, m, v map[string]model.HostTensor) {
	tensors, m, v = map[string]model.HostTensor{}, map[string]model.HostTensor{}, map[string]model.HostTensor{}
	for i, prm := range p.params() {
		tensors[prm.Name] = p.download(prm.Tensor)
		m[prm.Name] = p.download(p.m[i])
		v[prm.Name] = p.download(p.v[i])
	}
	return tensors, m, v
}

func (p *Policy) download(t kernels.Tensor) model.HostTensor {
	h := model.HostTensor{Shape: append([]int(nil), t.Shape()...), Data: make([]float32, t.Len())}
	p.be.Download(h.Data, t)
	return h
}

// restore loads trained tensors and moments from a checkpoint.
func (p *Policy) restore(ck checkpoint.Version) error {
	if (ck.Base != nil) != (p.Adapter == nil) {
		return fmt.Errorf("restore: checkpoint and policy disagree on full fine-tuning vs LoRA")
	}
	for i, prm := range p.params() {
		dsts := []kernels.Tensor{prm.Tensor, p.m[i], p.v[i]}
		for j, src := range []map[string]model.HostTensor{ck.Tensors, ck.M, ck.V} {
			h, ok := src[prm.Name]
			if !ok && j > 0 {
				continue // no optimizer state: fresh moments
			}
			if !ok || h.Shape == nil || len(h.Data) != dsts[j].Len() {
				return fmt.Errorf("restore %s: checkpoint tensor missing or shaped %v, want %v", prm.Name, h.Shape, prm.Tensor.Shape())
			}
			up := p.be.Upload(h.Data, dsts[j].Shape()...)
			p.be.Copy(dsts[j], up)
			p.be.Free(up)
		}
	}
	p.steps = ck.State.OptimizerStep
	return nil
}

// LoadPolicy loads the base model in modelDir on be and creates the
// adapter opts.LoRA describes, or none with opts.Mode "full" (New restores
// a checkpoint over it when opts.Resume is set).
func LoadPolicy(modelDir string, be kernels.Backend, opts Options) (*Policy, error) {
	m, err := model.LoadT(modelDir, be, opts.WeightDTypeOn(be.Name()))
	if err != nil {
		return nil, fmt.Errorf("load policy model: %w", err)
	}
	m.SetCheckpointMode(opts.CheckpointMode(be.Name()))
	m.SetAutocast(opts.AutocastOn(be.Name()))
	if opts.Mode == ModeFull {
		return NewPolicy(m, nil), nil
	}
	a, err := NewAdapterFor(m, opts)
	if err != nil {
		return nil, fmt.Errorf("new policy adapter: %w", err)
	}
	return NewPolicy(m, a), nil
}
