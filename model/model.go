package model

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/hone-rl/hone/kernels"
)

// Module is one of the seven linear projections of a decoder layer (the
// LoRA targets).
type Module int

// The projections, in PEFT's usual order.
const (
	ModQ Module = iota
	ModK
	ModV
	ModO
	ModGate
	ModUp
	ModDown
	NumModules
)

var moduleNames = [NumModules]string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

// String returns the Hugging Face module name ("q_proj", ...).
func (mod Module) String() string { return moduleNames[mod] }

// path is the module's name under a layer ("self_attn.q_proj").
func (mod Module) path() string {
	if mod <= ModO {
		return "self_attn." + moduleNames[mod]
	}
	return "mlp." + moduleNames[mod]
}

// ParseModule maps a Hugging Face module name to a Module.
func ParseModule(name string) (Module, bool) {
	for i, n := range moduleNames {
		if n == name {
			return Module(i), true
		}
	}
	return 0, false
}

// Dims returns a projection's output and input widths under cfg.
func (c *Config) Dims(mod Module) (out, in int) {
	q, kv := c.NumHeads*c.HeadDim, c.NumKVHeads*c.HeadDim
	switch mod {
	case ModQ:
		return q, c.HiddenSize
	case ModK, ModV:
		return kv, c.HiddenSize
	case ModO:
		return c.HiddenSize, q
	case ModGate, ModUp:
		return c.IntermediateSize, c.HiddenSize
	default:
		return c.HiddenSize, c.IntermediateSize
	}
}

// hasBias tells whether a projection has a bias: q/k/v with AttentionBias,
// and o_proj too except in Qwen2 (whose attention_bias is implied for q/k/v
// only, as in transformers).
func (c *Config) hasBias(mod Module) bool {
	if !c.AttentionBias || mod > ModO {
		return false
	}
	return mod <= ModV || c.Architecture != ArchQwen2
}

// Model is a loaded transformer on a backend. Its weights are read-only
// during Forward, so concurrent Forward calls on distinct caches are safe.
type Model struct {
	cfg    *Config
	be     kernels.Backend
	embed  kernels.Tensor // [V,H]
	norm   kernels.Tensor // [H]
	lmHead kernels.Tensor // [V,H]; the same tensor as embed when tied
	layers []layer
	rope   kernels.RoPETable // cos/sin for positions [0, MaxPositions)
	// checkpoint: what ForwardTrain keeps of each layer (SetCheckpointMode).
	checkpoint Checkpointing
	// autocast: GEMMs against bf16 base weights round their activation to
	// bf16 (SetAutocast, autocast.go).
	autocast bool
	// loraF32: under autocast, LoRA GEMMs stay float32 (SetAutocastLoRA).
	loraF32 bool
}

// layer holds one decoder layer's weights.
type layer struct {
	attnNorm, mlpNorm kernels.Tensor             // [H]
	qNorm, kNorm      kernels.Tensor             // [HeadDim], Qwen3 only
	w                 [NumModules]kernels.Tensor // [out,in]
	bias              [4]kernels.Tensor          // q, k, v (and o) biases when AttentionBias
}

// Param is a named weight, with its Hugging Face name.
type Param struct {
	Name   string
	Tensor kernels.Tensor
}

// paramSpec is one weight the config calls for.
type paramSpec struct {
	name  string
	shape []int
	init  string // "normal", "ones" or "zeros"
	slot  func(m *Model) *kernels.Tensor
}

func specs(c *Config) []paramSpec {
	h := c.HiddenSize
	out := []paramSpec{{"model.embed_tokens.weight", []int{c.VocabSize, h}, "normal", func(m *Model) *kernels.Tensor { return &m.embed }}}
	for i := 0; i < c.NumLayers; i++ {
		pre := fmt.Sprintf("model.layers.%d.", i)
		out = append(out,
			paramSpec{pre + "input_layernorm.weight", []int{h}, "ones", func(m *Model) *kernels.Tensor { return &m.layers[i].attnNorm }},
			paramSpec{pre + "post_attention_layernorm.weight", []int{h}, "ones", func(m *Model) *kernels.Tensor { return &m.layers[i].mlpNorm }})
		if c.QKNorm {
			out = append(out,
				paramSpec{pre + "self_attn.q_norm.weight", []int{c.HeadDim}, "ones", func(m *Model) *kernels.Tensor { return &m.layers[i].qNorm }},
				paramSpec{pre + "self_attn.k_norm.weight", []int{c.HeadDim}, "ones", func(m *Model) *kernels.Tensor { return &m.layers[i].kNorm }})
		}
		for mod := ModQ; mod < NumModules; mod++ {
			o, in := c.Dims(mod)
			out = append(out, paramSpec{pre + mod.path() + ".weight", []int{o, in}, "normal", func(m *Model) *kernels.Tensor { return &m.layers[i].w[mod] }})
			if c.hasBias(mod) {
				out = append(out, paramSpec{pre + mod.path() + ".bias", []int{o}, "zeros", func(m *Model) *kernels.Tensor { return &m.layers[i].bias[mod] }})
			}
		}
	}
	out = append(out, paramSpec{"model.norm.weight", []int{h}, "ones", func(m *Model) *kernels.Tensor { return &m.norm }})
	if !c.TieWordEmbeddings {
		out = append(out, paramSpec{"lm_head.weight", []int{c.VocabSize, h}, "normal", func(m *Model) *kernels.Tensor { return &m.lmHead }})
	}
	return out
}

func newModel(cfg *Config, be kernels.Backend) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := *cfg
	return &Model{cfg: &c, be: be, layers: make([]layer, cfg.NumLayers), rope: be.NewRoPETable(c.RopeFreqs(), c.MaxPositions)}, nil
}

func (m *Model) finish() {
	if m.cfg.TieWordEmbeddings {
		m.lmHead = m.embed
	}
}

// New builds a randomly initialised model (weights N(0, 0.02), norms 1,
// biases 0) from a seed.
func New(cfg *Config, be kernels.Backend, seed int64) (*Model, error) {
	m, err := newModel(cfg, be)
	if err != nil {
		return nil, fmt.Errorf("new model: %w", err)
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x686f6e65))
	for _, s := range specs(m.cfg) {
		data := make([]float32, numel(s.shape))
		for i := range data {
			switch s.init {
			case "normal":
				data[i] = float32(0.02 * rng.NormFloat64())
			case "ones":
				data[i] = 1
			}
		}
		*s.slot(m) = be.Upload(data, s.shape...)
	}
	m.finish()
	return m, nil
}

// Load reads dir/config.json and dir/model.safetensors (or the shards listed
// in dir/model.safetensors.index.json).
func Load(dir string, be kernels.Backend) (*Model, error) { return LoadT(dir, be, kernels.F32) }

// LoadT is Load with the base matrices (the embedding, the LM head and every
// layer's projections, what SetWeightDType converts) uploaded as weights
// straight from the file: with kernels.BF16 the device never holds them in
// float32 (norms and biases stay float32).
func LoadT(dir string, be kernels.Backend, weights kernels.DType) (*Model, error) {
	cfg, err := LoadConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("load model %s: %w", dir, err)
	}
	m, err := newModel(cfg, be)
	if err != nil {
		return nil, fmt.Errorf("load model %s: %w", dir, err)
	}
	files, err := weightFiles(dir)
	if err != nil {
		return nil, fmt.Errorf("load model %s: %w", dir, err)
	}
	defer closeAll(files)
	if err := checkUnexpected(files, specs(m.cfg)); err != nil {
		return nil, fmt.Errorf("load model %s: %w", dir, err)
	}
	for _, s := range specs(m.cfg) {
		st, ok := files[s.name]
		if !ok {
			return nil, fmt.Errorf("load model %s: missing tensor %s", dir, s.name)
		}
		t, err := st.Float32(s.name)
		if err != nil {
			return nil, fmt.Errorf("load model %s: %w", dir, err)
		}
		if !equalShape(t.Shape, s.shape) {
			return nil, fmt.Errorf("load model %s: tensor %s has shape %v, config wants %v", dir, s.name, t.Shape, s.shape)
		}
		dt := kernels.F32
		if s.init == "normal" { // a matrix: the embedding, the LM head or a projection
			dt = weights
		}
		*s.slot(m) = be.UploadT(dt, t.Data, s.shape...)
	}
	m.finish()
	return m, nil
}

// checkUnexpected rejects weights the config does not account for (a bias
// or norm of an unsupported variant would otherwise be silently ignored),
// except tensors known to be redundant.
func checkUnexpected(files map[string]*SafeTensors, ss []paramSpec) error {
	want := make(map[string]bool, len(ss))
	for _, s := range ss {
		want[s.name] = true
	}
	for name := range files {
		if want[name] || name == "lm_head.weight" || strings.HasSuffix(name, ".rotary_emb.inv_freq") {
			continue
		}
		return fmt.Errorf("unexpected tensor %s for this config", name)
	}
	return nil
}

// closeAll unmaps every file of a weightFiles map (Close is idempotent).
func closeAll(files map[string]*SafeTensors) {
	for _, st := range files {
		_ = st.Close()
	}
}

// weightFiles opens the model's safetensors files and maps each tensor name to
// the file that holds it.
func weightFiles(dir string) (map[string]*SafeTensors, error) {
	names := []string{"model.safetensors"}
	if raw, err := os.ReadFile(filepath.Join(dir, "model.safetensors.index.json")); err == nil {
		var idx struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(raw, &idx); err != nil {
			return nil, fmt.Errorf("safetensors index: %w", err)
		}
		names = names[:0]
		seen := map[string]bool{}
		for _, f := range idx.WeightMap {
			if !seen[f] && filepath.Base(f) == f {
				seen[f] = true
				names = append(names, f)
			}
		}
	}
	out := map[string]*SafeTensors{}
	for _, n := range names {
		st, err := OpenSafetensors(filepath.Join(dir, n))
		if err != nil {
			closeAll(out)
			return nil, err
		}
		for _, t := range st.Names() {
			out[t] = st
		}
	}
	return out, nil
}

func equalShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Save writes dir/config.json and dir/model.safetensors (F32).
func (m *Model) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("save model: %w", err)
	}
	if err := WriteConfig(dir, m.cfg); err != nil {
		return fmt.Errorf("save model: %w", err)
	}
	host := map[string]HostTensor{}
	for _, p := range m.Params() {
		host[p.Name] = download(m.be, p.Tensor)
	}
	if err := WriteSafetensors(filepath.Join(dir, "model.safetensors"), host, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("save model: %w", err)
	}
	return nil
}

func download(be kernels.Backend, t kernels.Tensor) HostTensor {
	d := make([]float32, t.Len())
	be.Download(d, t)
	return HostTensor{Shape: append([]int(nil), t.Shape()...), Data: d}
}

// Params lists every weight with its Hugging Face name (lm_head is absent
// when tied to the embedding). The tensors are the model's own: a trainer
// that updates them changes the model.
func (m *Model) Params() []Param {
	ss := specs(m.cfg)
	out := make([]Param, len(ss))
	for i, s := range ss {
		out[i] = Param{Name: s.name, Tensor: *s.slot(m)}
	}
	return out
}

// Free releases the model's weights and RoPE table on its backend (a GPU
// model's memory); the model is unusable afterwards. Adapters are freed on
// their own.
func (m *Model) Free() {
	for _, p := range m.Params() {
		if p.Tensor != nil {
			m.be.Free(p.Tensor)
		}
	}
	if m.rope != nil {
		m.be.FreeRoPETable(m.rope)
		m.rope = nil
	}
	m.layers, m.embed, m.norm, m.lmHead = nil, nil, nil, nil
}

// Config returns the model's configuration (do not modify it).
func (m *Model) Config() *Config { return m.cfg }

// Backend returns the backend holding the weights.
func (m *Model) Backend() kernels.Backend { return m.be }

func (m *Model) attn(past int) kernels.Attn {
	return kernels.Attn{Heads: m.cfg.NumHeads, KVHeads: m.cfg.NumKVHeads, HeadDim: m.cfg.HeadDim, Past: past,
		Scale: float32(1 / math.Sqrt(float64(m.cfg.HeadDim))), BF16: m.attnBF16()}
}

// SetWeightDType stores the base matrices (the embedding, the LM head and
// every layer's projections) as dt, converting those of another type:
// kernels.BF16 halves their memory, computation stays float32 (the backend
// widens on load). Norms and biases stay float32. A bf16 model serves
// Forward and LoRA training (ForwardTrain and Backward with adapter
// gradients), not full fine-tuning, whose optimiser updates the weights in
// float32.
func (m *Model) SetWeightDType(dt kernels.DType) error {
	be := m.be
	conv := func(t kernels.Tensor) kernels.Tensor {
		if t == nil || t.DType() == dt {
			return t
		}
		h := make([]float32, t.Len())
		be.Download(h, t)
		u := be.UploadT(dt, h, t.Shape()...)
		be.Free(t)
		return u
	}
	tied := m.lmHead == m.embed
	m.embed = conv(m.embed)
	if tied {
		m.lmHead = m.embed
	} else {
		m.lmHead = conv(m.lmHead)
	}
	for l := range m.layers {
		for mod := range m.layers[l].w {
			m.layers[l].w[mod] = conv(m.layers[l].w[mod])
		}
	}
	if err := be.Err(); err != nil {
		return fmt.Errorf("set weight dtype %v: %w", dt, err)
	}
	return nil
}
