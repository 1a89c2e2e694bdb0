package model

import (
	"context"
	"fmt"

	"github.com/hone-rl/hone/kernels"
)

// segment is one step's rows inside a batched forward.
type segment struct {
	off, n, past int
	cache        *KVCache
	adapter      *Adapter
}

// batch is the flattened token rows of a Forward call.
type batch struct {
	ids, pos []int32
	segs     []segment
	// dids and dpos are ids and pos on the device, uploaded once per pass
	// (upload) for every layer's ops.
	dids, dpos kernels.Index
}

// upload puts ids and positions on the device.
func (b *batch) upload(be kernels.Backend) {
	b.dids, b.dpos = be.UploadIndex(b.ids), be.UploadIndex(b.pos)
}

// free releases what upload made (safe to call twice, or without upload).
func (b *batch) free(be kernels.Backend) {
	if b.dids != nil {
		be.FreeIndex(b.dids)
		be.FreeIndex(b.dpos)
		b.dids, b.dpos = nil, nil
	}
}

func (m *Model) newBatch(steps []Step) (*batch, error) {
	b := &batch{}
	seen := map[*KVCache]bool{}
	for i, s := range steps {
		if s.Cache == nil || s.Cache.m != m {
			return nil, fmt.Errorf("step %d: cache is nil or belongs to another model", i)
		}
		if seen[s.Cache] {
			return nil, fmt.Errorf("step %d: cache used twice in one batch", i)
		}
		seen[s.Cache] = true
		if len(s.Tokens) == 0 {
			return nil, fmt.Errorf("step %d: no tokens", i)
		}
		if s.Adapter != nil && s.Adapter.m != m {
			return nil, fmt.Errorf("step %d: adapter %q belongs to another model", i, s.Adapter.Name)
		}
		past := s.Cache.Len()
		if past+len(s.Tokens) > m.cfg.MaxPositions {
			return nil, fmt.Errorf("step %d: %d cached + %d new positions exceed the context of %d", i, past, len(s.Tokens), m.cfg.MaxPositions)
		}
		for _, id := range s.Tokens {
			if id < 0 || int(id) >= m.cfg.VocabSize {
				return nil, fmt.Errorf("step %d: token %d outside vocabulary of %d", i, id, m.cfg.VocabSize)
			}
		}
		b.segs = append(b.segs, segment{off: len(b.ids), n: len(s.Tokens), past: past, cache: s.Cache, adapter: s.Adapter})
		b.ids = append(b.ids, s.Tokens...)
		for j := range s.Tokens {
			b.pos = append(b.pos, int32(past+j))
		}
	}
	return b, nil
}

// Forward implements the contract in api.go.
func (m *Model) Forward(ctx context.Context, steps []Step) ([][]float32, error) {
	if len(steps) == 0 {
		return nil, nil
	}
	b, err := m.newBatch(steps)
	if err != nil {
		return nil, fmt.Errorf("forward: %w", err)
	}
	last := make([]int32, len(b.segs))
	for i, s := range b.segs {
		last[i] = int32(s.off + s.n - 1)
	}
	out, err := m.run(ctx, b, last)
	if err == nil {
		err = m.be.Err() // a device error makes out undefined
	}
	if err != nil {
		return nil, fmt.Errorf("forward: %w", err)
	}
	return out, nil
}

// Logits runs tokens through a fresh cache and returns the logits of every
// position.
func (m *Model) Logits(ctx context.Context, tokens []int32, a *Adapter) ([][]float32, error) {
	c := m.NewCache()
	defer c.Free()
	b, err := m.newBatch([]Step{{Tokens: tokens, Cache: c, Adapter: a}})
	if err != nil {
		return nil, fmt.Errorf("logits: %w", err)
	}
	rows := make([]int32, len(tokens))
	for i := range rows {
		rows[i] = int32(i)
	}
	out, err := m.run(ctx, b, rows)
	if err != nil {
		return nil, fmt.Errorf("logits: %w", err)
	}
	return out, nil
}

// ForwardSample is Forward with the next token of each step drawn next to
// the logits by be's kernels.Sampler (params has one entry per step; the
// first vocab logits of each row are sampled, vocab <= the model's): only
// rows*(2+2*topN) numbers reach the host instead of the logits.
func (m *Model) ForwardSample(ctx context.Context, steps []Step, params []kernels.Sampling, topN, vocab int) (kernels.SampleOut, error) {
	sm, ok := m.be.(kernels.Sampler)
	switch {
	case !ok:
		return kernels.SampleOut{}, fmt.Errorf("forward sample: backend %s does not sample", m.be.Name())
	case len(params) != len(steps) || vocab <= 0 || vocab > m.cfg.VocabSize:
		return kernels.SampleOut{}, fmt.Errorf("forward sample: %d parameter rows for %d steps, vocabulary %d of %d",
			len(params), len(steps), vocab, m.cfg.VocabSize)
	case len(steps) == 0:
		return kernels.SampleOut{}, nil
	}
	b, err := m.newBatch(steps)
	if err != nil {
		return kernels.SampleOut{}, fmt.Errorf("forward sample: %w", err)
	}
	last := make([]int32, len(b.segs))
	for i, s := range b.segs {
		last[i] = int32(s.off + s.n - 1)
	}
	logits, err := m.runLogits(ctx, b, last)
	if err != nil {
		return kernels.SampleOut{}, fmt.Errorf("forward sample: %w", err)
	}
	defer m.be.Free(logits)
	if vocab < m.cfg.VocabSize { // the tokenizer's ids only: rows packed to vocab columns
		packed := m.be.New(len(last), vocab)
		defer m.be.Free(packed)
		for r := range last {
			m.be.Copy(m.be.View(packed, r*vocab, vocab), m.be.View(logits, r*m.cfg.VocabSize, vocab))
		}
		logits = packed
	}
	out := sm.Sample(logits, params, topN)
	if err := m.be.Err(); err != nil {
		return kernels.SampleOut{}, fmt.Errorf("forward sample: %w", err)
	}
	return out, nil
}

// run executes the layers over the batch, appends to the caches, and returns
// the logits of the requested rows.
func (m *Model) run(ctx context.Context, b *batch, rows []int32) ([][]float32, error) {
	logits, err := m.runLogits(ctx, b, rows)
	if err != nil {
		return nil, err
	}
	defer m.be.Free(logits)
	v := m.cfg.VocabSize
	host := make([]float32, logits.Len())
	m.be.Download(host, logits)
	out := make([][]float32, len(rows))
	for i := range out {
		out[i] = host[i*v : (i+1)*v : (i+1)*v]
	}
	return out, nil
}

// runLogits executes the layers over the batch, appends to the caches, and
// returns the device logits [len(rows), vocabulary] of the requested rows
// (the caller frees them).
func (m *Model) runLogits(ctx context.Context, b *batch, rows []int32) (kernels.Tensor, error) {
	for _, s := range b.segs {
		s.cache.reserve(s.past + s.n)
	}
	sc := m.newScratch(len(b.ids), b.segs)
	defer sc.free()
	be, cfg := m.be, m.cfg
	b.upload(be)
	defer b.free(be)
	x := sc.x
	be.Embedding(x, m.embed, b.dids)
	for l := range m.layers {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m.attentionBlock(l, b, sc)
		m.mlpBlock(l, b, sc)
	}
	for _, s := range b.segs {
		s.cache.n = s.past + s.n
	}
	h := be.Empty(kernels.F32, len(rows), cfg.HiddenSize)
	hn := be.Empty(kernels.F32, len(rows), cfg.HiddenSize)
	logits := be.Empty(kernels.F32, len(rows), cfg.VocabSize)
	drows := be.UploadIndex(rows)
	defer func() { be.Free(h); be.Free(hn); be.FreeIndex(drows) }()
	be.Embedding(h, x, drows)
	be.RMSNorm(hn, h, m.norm, float32(cfg.RMSNormEps))
	hno := m.operand(hn)
	m.baseMatMul(logits, &hno, m.lmHead, true, 0)
	hno.free()
	return logits, nil
}

// scratch holds a forward pass's activations, sized for t rows.
type scratch struct {
	be                    kernels.Backend
	x, h, q, k, v, att, o kernels.Tensor
	qn, kn                kernels.Tensor
	gate, up, act, down   kernels.Tensor
	lora                  kernels.Tensor
	all                   []kernels.Tensor
}

func (m *Model) newScratch(t int, segs []segment) *scratch {
	c := m.cfg
	be := m.be
	sc := &scratch{be: be}
	alloc := func(shape ...int) kernels.Tensor {
		x := be.New(shape...)
		sc.all = append(sc.all, x)
		return x
	}
	q, kv := c.NumHeads*c.HeadDim, c.NumKVHeads*c.HeadDim
	sc.x, sc.h, sc.o, sc.down = alloc(t, c.HiddenSize), alloc(t, c.HiddenSize), alloc(t, c.HiddenSize), alloc(t, c.HiddenSize)
	sc.q, sc.att, sc.qn = alloc(t, q), alloc(t, q), alloc(t, q)
	sc.k, sc.v, sc.kn = alloc(t, kv), alloc(t, kv), alloc(t, kv)
	sc.gate, sc.up, sc.act = alloc(t, c.IntermediateSize), alloc(t, c.IntermediateSize), alloc(t, c.IntermediateSize)
	rank := 0
	for _, s := range segs {
		if s.adapter != nil {
			rank = max(rank, s.adapter.Rank)
		}
	}
	if rank > 0 {
		sc.lora = alloc(t * rank)
	}
	return sc
}

func (sc *scratch) free() {
	for _, t := range sc.all {
		sc.be.Free(t)
	}
}

// attentionBlock runs x += o_proj(attention(norm(x))) for layer l.
func (m *Model) attentionBlock(l int, b *batch, sc *scratch) {
	be, cfg, ly := m.be, m.cfg, &m.layers[l]
	eps := float32(cfg.RMSNormEps)
	be.RMSNorm(sc.h, sc.x, ly.attnNorm, eps)
	h := m.operand(sc.h)
	m.linear(sc.q, &h, l, ModQ, b.segs, sc.lora)
	m.linear(sc.k, &h, l, ModK, b.segs, sc.lora)
	m.linear(sc.v, &h, l, ModV, b.segs, sc.lora)
	h.free()
	q, k := sc.q, sc.k
	if cfg.QKNorm {
		t := len(b.ids)
		be.RMSNorm(be.View(sc.qn, 0, t*cfg.NumHeads, cfg.HeadDim), be.View(sc.q, 0, t*cfg.NumHeads, cfg.HeadDim), ly.qNorm, eps)
		be.RMSNorm(be.View(sc.kn, 0, t*cfg.NumKVHeads, cfg.HeadDim), be.View(sc.k, 0, t*cfg.NumKVHeads, cfg.HeadDim), ly.kNorm, eps)
		q, k = sc.qn, sc.kn
	}
	be.RoPE(q, b.dpos, m.rope, false)
	be.RoPE(k, b.dpos, m.rope, false)
	qw, kw := cfg.NumHeads*cfg.HeadDim, cfg.NumKVHeads*cfg.HeadDim
	for _, s := range b.segs {
		ck, cv := s.cache.rows(l, s.past+s.n)
		be.Copy(be.View(ck, s.past*kw, s.n, kw), be.View(k, s.off*kw, s.n, kw))
		be.Copy(be.View(cv, s.past*kw, s.n, kw), be.View(sc.v, s.off*kw, s.n, kw))
		be.Attention(be.View(sc.att, s.off*qw, s.n, qw), be.View(q, s.off*qw, s.n, qw), ck, cv, m.attn(s.past))
	}
	att := m.operand(sc.att)
	m.linear(sc.o, &att, l, ModO, b.segs, sc.lora)
	att.free()
	be.Add(sc.x, sc.x, sc.o)
}

// mlpBlock runs x += down(silu(gate(norm(x))) * up(norm(x))) for layer l.
func (m *Model) mlpBlock(l int, b *batch, sc *scratch) {
	be, ly := m.be, &m.layers[l]
	be.RMSNorm(sc.h, sc.x, ly.mlpNorm, float32(m.cfg.RMSNormEps))
	h := m.operand(sc.h)
	m.linear(sc.gate, &h, l, ModGate, b.segs, sc.lora)
	m.linear(sc.up, &h, l, ModUp, b.segs, sc.lora)
	h.free()
	be.SwiGLU(sc.act, sc.gate, sc.up)
	act := m.operand(sc.act)
	m.linear(sc.down, &act, l, ModDown, b.segs, sc.lora)
	act.free()
	be.Add(sc.x, sc.x, sc.down)
}

// linear sets out = in*W^T (+ bias) and adds each segment's LoRA delta
// scale*(in*A^T)*B^T; consecutive segments sharing an adapter share the
// matmuls. tmp is scratch of at least rows*rank elements.
func (m *Model) linear(out kernels.Tensor, in *operand, l int, mod Module, segs []segment, tmp kernels.Tensor) {
	be, ly := m.be, &m.layers[l]
	m.baseMatMul(out, in, ly.w[mod], true, 0)
	if mod <= ModO && ly.bias[mod] != nil {
		be.AddRow(out, ly.bias[mod])
	}
	outW, inW := m.cfg.Dims(mod)
	cast := m.loraCasts(ly.w[mod])
	for i := 0; i < len(segs); {
		j := i + 1
		for j < len(segs) && segs[j].adapter == segs[i].adapter {
			j++
		}
		if a := segs[i].adapter; a != nil {
			if w := a.Layers[l][mod]; w != nil {
				r0, r1 := segs[i].off, segs[j-1].off+segs[j-1].n
				rows := r1 - r0
				t, o := be.View(tmp, 0, rows, a.Rank), be.View(out, r0*outW, rows, outW)
				if cast {
					m.loraBF16(o, be.View(in.bf16(), r0*inW, rows, inW), t, a, l, mod)
				} else {
					be.MatMul(t, be.View(in.x, r0*inW, rows, inW), w.A, false, true, 1, 0)
					be.MatMul(o, t, w.B, false, true, a.Scale, 1)
				}
			}
		}
		i = j
	}
}

// loraBF16 adds scale*(in*A^T)*B^T to out under autocast for layer l's
// module mod of adapter a: in is bf16, A, B and the intermediate t
// (float32 scratch) are rounded to bf16 for their GEMMs, as torch.autocast
// runs a LoRA's two linears.
func (m *Model) loraBF16(out, in, t kernels.Tensor, a *Adapter, l int, mod Module) {
	be := m.be
	ab, bb, owned := a.weightsBF16(l, mod)
	be.MatMul(t, in, ab, false, true, 1, 0)
	tb := m.castBF16(t)
	be.MatMul(out, tb, bb, false, true, a.Scale, 1)
	be.Free(tb)
	if owned {
		be.Free(ab)
		be.Free(bb)
	}
}
