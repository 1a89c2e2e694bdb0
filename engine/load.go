package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/hone-rl/hone/kernels"
	"github.com/hone-rl/hone/kernels/cpu"
	"github.com/hone-rl/hone/model"
	"github.com/hone-rl/hone/model/tokenizer"
)

// modelLM adapts model.Model to the scheduler's lm interface. Logits are cut
// to the tokenizer's vocabulary so padded embedding rows are never sampled.
type modelLM struct {
	m     *model.Model
	vocab int
}

func (l *modelLM) VocabSize() int    { return l.vocab }
func (l *modelLM) NewCache() lmCache { return l.m.NewCache() }

// Free releases the model's weights (a reload replaced it).
func (l *modelLM) Free() { l.m.Free() }

func (l *modelLM) KVBytesPerToken() int {
	c := l.m.Config()
	return c.NumLayers * 2 * c.NumKVHeads * c.HeadDim * 4
}

func (l *modelLM) LoadAdapter(dir string) (lmAdapter, error) {
	a, err := model.LoadAdapter(dir, l.m)
	if err != nil {
		return nil, err
	}
	a.Freeze() // served as loaded: autocast rounds its weights once
	return a, nil
}

// modelSteps turns the scheduler's steps into the model's.
func modelSteps(steps []lmStep) ([]model.Step, error) {
	ms := make([]model.Step, len(steps))
	for i, s := range steps {
		c, ok := s.Cache.(*model.KVCache)
		if !ok {
			return nil, fmt.Errorf("step %d: foreign cache %T", i, s.Cache)
		}
		ms[i] = model.Step{Tokens: s.Tokens, Cache: c}
		if s.Adapter != nil {
			if ms[i].Adapter, ok = s.Adapter.(*model.Adapter); !ok {
				return nil, fmt.Errorf("step %d: foreign adapter %T", i, s.Adapter)
			}
		}
	}
	return ms, nil
}

// DeviceSampling reports whether the model's backend draws tokens next to
// the logits: a device backend (not the CPU, where the logits are already
// in host memory) that is a kernels.Sampler.
func (l *modelLM) DeviceSampling() bool {
	be := l.m.Backend()
	_, ok := be.(kernels.Sampler)
	return ok && be.Name() != "cpu"
}

// ForwardSample is Forward with the tokens drawn on the device
// (model.ForwardSample over the tokenizer's vocabulary).
func (l *modelLM) ForwardSample(ctx context.Context, steps []lmStep, params []kernels.Sampling, topN int) (kernels.SampleOut, error) {
	ms, err := modelSteps(steps)
	if err != nil {
		return kernels.SampleOut{}, err
	}
	return l.m.ForwardSample(ctx, ms, params, topN, l.vocab)
}

func (l *modelLM) Forward(ctx context.Context, steps []lmStep) ([][]float32, error) {
	ms, err := modelSteps(steps)
	if err != nil {
		return nil, err
	}
	out, err := l.m.Forward(ctx, ms)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i] = out[i][:l.vocab]
	}
	return out, nil
}

// loadModel loads a model folder (weights, tokenizer, generation_config.json)
// onto dev, or the CPU backend with threads workers when dev is nil, the
// base weights stored as Options.WeightDType says and multiplied as
// Options.Autocast says.
func loadModel(ctx context.Context, dir string, threads int, dev kernels.Backend, weights, autocast string) (modelParts, error) {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	dt := kernels.F32
	if weights == "bfloat16" || (weights == "auto" && dev != nil) {
		dt = kernels.BF16
	}
	onDevice := dev != nil
	if dev == nil {
		dev = cpu.New(threads)
	}
	m, err := model.LoadT(dir, dev, dt)
	if err != nil {
		return modelParts{}, err
	}
	m.SetAutocast(model.AutocastFor(autocast, onDevice, dt))
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return modelParts{}, err
	}
	defaults, err := loadGenerationConfig(dir)
	if err != nil {
		return modelParts{}, err
	}
	cfg := m.Config()
	vocab := min(cfg.VocabSize, tok.VocabSize())
	// An EOS id the model cannot produce would index past its logits when
	// min_tokens masks the EOS ids: refuse the folder, naming the file.
	for _, src := range []struct {
		files string
		ids   []int32
	}{{"tokenizer_config.json or generation_config.json", tok.Config().EOSIDs}, {"config.json", cfg.EOSTokenIDs}} {
		for _, id := range src.ids {
			if id < 0 || int(id) >= vocab {
				return modelParts{}, fmt.Errorf("%s: eos_token_id %d is outside the model's vocabulary of %d tokens", src.files, id, vocab)
			}
		}
	}
	eos := append(append([]int32(nil), tok.Config().EOSIDs...), cfg.EOSTokenIDs...)
	return modelParts{lm: &modelLM{m: m, vocab: vocab}, tok: tok, maxModelLen: cfg.MaxPositions,
		eos: eos, defaults: defaults}, ctx.Err()
}

// loadGenerationConfig reads the sampling defaults of generation_config.json
// (vLLM's --generation-config auto); without the file they are vLLM's
// neutral defaults: temperature 1, top_p 1, top_k off.
func loadGenerationConfig(dir string) (genDefaults, error) {
	d := genDefaults{Temperature: 1, TopP: 1}
	raw, err := os.ReadFile(filepath.Join(dir, "generation_config.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return d, nil
	}
	if err != nil {
		return d, fmt.Errorf("read generation_config.json: %w", err)
	}
	var gc struct {
		Temperature *float64 `json:"temperature"`
		TopP        *float64 `json:"top_p"`
		TopK        *int     `json:"top_k"`
	}
	if err := json.Unmarshal(raw, &gc); err != nil {
		return d, fmt.Errorf("parse generation_config.json: %w", err)
	}
	if gc.Temperature != nil {
		d.Temperature = *gc.Temperature
	}
	if gc.TopP != nil {
		d.TopP = *gc.TopP
	}
	if gc.TopK != nil {
		d.TopK = *gc.TopK
	}
	return d, nil
}

// reloadWeights loads the model folder again and swaps it in once the
// running sequences finish; loaded adapters are reloaded onto it.
func (e *Engine) reloadWeights(ctx context.Context) error {
	parts, err := loadModel(ctx, e.opts.ModelDir, e.opts.Threads, e.opts.Device, e.opts.WeightDType, e.opts.Autocast)
	if err != nil {
		return fmt.Errorf("reload weights: %w", err)
	}
	if v := parts.lm.VocabSize(); v != e.vocab {
		return fmt.Errorf("reload weights: vocabulary changed from %d to %d", e.vocab, v)
	}
	entries := e.adapters.list()
	fresh := make([]lmAdapter, len(entries))
	for i, a := range entries {
		if fresh[i], err = parts.lm.LoadAdapter(a.path); err != nil {
			for _, f := range fresh[:i] {
				f.Free()
			}
			return fmt.Errorf("reload weights: adapter %s: %w", a.name, err)
		}
	}
	return e.sched.replaceLM(ctx, parts.lm, func() {
		for i, a := range entries {
			a.swapLM(fresh[i])
		}
	})
}
