package model

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/hone-rl/hone/kernels"
)

// LoRA is one projection's low-rank update: W' = W + Scale * B*A with A
// [rank, in] and B [out, rank], as PEFT stores them.
type LoRA struct {
	A, B kernels.Tensor
}

// Adapter is a LoRA adapter resident on a model's backend. Several adapters
// can be loaded at once; a Step picks one. Its tensors are exposed so a
// trainer can update them in place.
type Adapter struct {
	Name    string
	Rank    int
	Alpha   float64
	Scale   float32  // Alpha/Rank (Alpha/sqrt(Rank) with rsLoRA)
	RSLoRA  bool     // use_rslora
	Targets []Module // targeted projections, sorted
	// Layers[l][mod] is nil when mod is not adapted in layer l.
	Layers [][NumModules]*LoRA
	m      *Model
	// frozen: Freeze promised the weights no longer change, so autocast's
	// bf16 copies of them (cast, made once) serve every pass.
	frozen   bool
	castOnce sync.Once
	cast     [][NumModules]*LoRA
}

// AdapterConfig is what a new adapter needs.
type AdapterConfig struct {
	Rank    int
	Alpha   float64
	Targets []Module // nil means all seven projections
}

// peftConfig is adapter_config.json as PEFT writes it.
type peftConfig struct {
	PeftType            string          `json:"peft_type"`
	TaskType            string          `json:"task_type"`
	R                   int             `json:"r"`
	LoraAlpha           float64         `json:"lora_alpha"`
	LoraDropout         float64         `json:"lora_dropout"`
	TargetModules       json.RawMessage `json:"target_modules"`
	Bias                string          `json:"bias"`
	FanInFanOut         bool            `json:"fan_in_fan_out"`
	UseRSLoRA           bool            `json:"use_rslora"`
	InferenceMode       bool            `json:"inference_mode"`
	BaseModelNameOrPath string          `json:"base_model_name_or_path"`
	// Read only, to refuse what hone does not compute (never written).
	UseDoRA      bool           `json:"use_dora,omitempty"`
	RankPattern  map[string]any `json:"rank_pattern,omitempty"`
	AlphaPattern map[string]any `json:"alpha_pattern,omitempty"`
}

// loraName is the PEFT tensor name of layer l, module mod, matrix "A"/"B".
// (Concatenated: the trainer lists every adapter tensor a few times a
// step, and Sprintf made that a measurable share of a GPU step's host time.)
func loraName(l int, mod Module, which string) string {
	return "base_model.model.model.layers." + strconv.Itoa(l) + "." + mod.path() + ".lora_" + which + ".weight"
}

var loraRe = regexp.MustCompile(`^base_model\.model\.model\.layers\.(\d+)\.(self_attn|mlp)\.(\w+)\.lora_([AB])(?:\.default)?\.weight$`)

// NewAdapter creates an adapter initialised as PEFT does (A uniform with
// bound 1/sqrt(in), B zero, so it starts as the identity update).
func NewAdapter(m *Model, name string, ac AdapterConfig, seed int64) (*Adapter, error) {
	targets := ac.Targets
	if targets == nil {
		for mod := ModQ; mod < NumModules; mod++ {
			targets = append(targets, mod)
		}
	}
	a, err := m.emptyAdapter(name, ac.Rank, ac.Alpha, false, targets)
	if err != nil {
		return nil, fmt.Errorf("new adapter %s: %w", name, err)
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x6c6f7261))
	for l := range a.Layers {
		for _, mod := range a.Targets {
			out, in := m.cfg.Dims(mod)
			bound := 1 / math.Sqrt(float64(in))
			ad := make([]float32, a.Rank*in)
			for i := range ad {
				ad[i] = float32((2*rng.Float64() - 1) * bound)
			}
			a.Layers[l][mod] = &LoRA{A: m.be.Upload(ad, a.Rank, in), B: m.be.New(out, a.Rank)}
		}
	}
	return a, nil
}

func (m *Model) emptyAdapter(name string, rank int, alpha float64, rs bool, targets []Module) (*Adapter, error) {
	if rank <= 0 || rank > 4096 {
		return nil, fmt.Errorf("rank %d out of range", rank)
	}
	if alpha <= 0 || math.IsInf(alpha, 0) || math.IsNaN(alpha) {
		return nil, fmt.Errorf("lora_alpha %g must be positive", alpha)
	}
	scale := alpha / float64(rank)
	if rs {
		scale = alpha / math.Sqrt(float64(rank))
	}
	t := append([]Module(nil), targets...)
	sort.Slice(t, func(i, j int) bool { return t[i] < t[j] })
	return &Adapter{Name: name, Rank: rank, Alpha: alpha, Scale: float32(scale), RSLoRA: rs, Targets: t,
		Layers: make([][NumModules]*LoRA, m.cfg.NumLayers), m: m}, nil
}

// LoadAdapter reads a PEFT adapter folder (adapter_config.json +
// adapter_model.safetensors) onto m's backend. The adapter is named after
// the folder.
func LoadAdapter(dir string, m *Model) (*Adapter, error) {
	a, err := loadAdapter(dir, m)
	if err != nil {
		return nil, fmt.Errorf("load adapter %s: %w", dir, err)
	}
	return a, nil
}

func loadAdapter(dir string, m *Model) (*Adapter, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "adapter_config.json"))
	if err != nil {
		return nil, err
	}
	pc, targets, err := parseAdapterConfig(raw)
	if err != nil {
		return nil, err
	}
	a, err := m.emptyAdapter(filepath.Base(dir), pc.R, pc.LoraAlpha, pc.UseRSLoRA, targets)
	if err != nil {
		return nil, err
	}
	st, err := OpenSafetensors(filepath.Join(dir, "adapter_model.safetensors"))
	if err != nil {
		return nil, err
	}
	defer st.Close()
	if err := a.fill(st); err != nil {
		a.Free()
		return nil, err
	}
	return a, nil
}

// parseAdapterConfig reads adapter_config.json.
func parseAdapterConfig(raw []byte) (peftConfig, []Module, error) {
	var pc peftConfig
	if err := json.Unmarshal(raw, &pc); err != nil {
		return pc, nil, fmt.Errorf("adapter_config.json: %w", err)
	}
	if pc.PeftType != "" && pc.PeftType != "LORA" {
		return pc, nil, fmt.Errorf("adapter_config.json: peft_type %q is not LORA", pc.PeftType)
	}
	if pc.FanInFanOut {
		return pc, nil, fmt.Errorf("adapter_config.json: fan_in_fan_out is not supported")
	}
	if pc.UseDoRA {
		return pc, nil, fmt.Errorf("adapter_config.json: use_dora (DoRA) is not supported")
	}
	// PEFT gives the modules these patterns match their own rank or alpha;
	// hone scales every module of an adapter alike.
	if len(pc.RankPattern) > 0 || len(pc.AlphaPattern) > 0 {
		return pc, nil, fmt.Errorf("adapter_config.json: rank_pattern/alpha_pattern (per-module rank or alpha) are not supported")
	}
	targets, err := parseTargets(pc.TargetModules)
	return pc, targets, err
}

// parseTargets reads target_modules: a list of module names, or
// "all-linear". As in PEFT, a name matches a module whose path ends with it,
// so PEFT's save_pretrained may also list paths ("model.layers.3.mlp.up_proj",
// as it does when a model has fewer than 20 targeted modules and
// target_modules was "all-linear"); which layers an adapter changes is
// whatever adapter_model.safetensors holds.
func parseTargets(raw json.RawMessage) ([]Module, error) {
	var names []string
	if err := json.Unmarshal(raw, &names); err != nil {
		var one string
		if err2 := json.Unmarshal(raw, &one); err2 != nil || one != "all-linear" {
			return nil, fmt.Errorf("adapter_config.json: target_modules must be a list of module names or \"all-linear\"")
		}
		names = moduleNames[:]
	}
	var out []Module
	seen := map[Module]bool{}
	for _, n := range names {
		mod, ok := parseTarget(n)
		if !ok {
			return nil, fmt.Errorf("adapter_config.json: unsupported target module %q", n)
		}
		if !seen[mod] {
			seen[mod] = true
			out = append(out, mod)
		}
	}
	return out, nil
}

// parseTarget reads one target_modules entry: a projection's name, or a
// dotted suffix of its path model.layers.N.(self_attn|mlp).NAME.
func parseTarget(name string) (Module, bool) {
	parts := strings.Split(name, ".")
	mod, ok := ParseModule(parts[len(parts)-1])
	if !ok {
		return 0, false
	}
	full := append([]string{"model", "layers", "N"}, strings.Split(mod.path(), ".")...)
	if len(parts) > len(full) {
		return 0, false
	}
	for i, p := range parts {
		want := full[len(full)-len(parts)+i]
		if want == "N" {
			if n, err := strconv.Atoi(p); err != nil || n < 0 || strconv.Itoa(n) != p {
				return 0, false
			}
		} else if p != want {
			return 0, false
		}
	}
	return mod, true
}

// fill uploads the adapter's tensors, checking names and shapes.
func (a *Adapter) fill(st *SafeTensors) error {
	cfg, be := a.m.cfg, a.m.be
	host := map[[2]int][2]*HostTensor{}
	for _, name := range st.Names() {
		sm := loraRe.FindStringSubmatch(name)
		if sm == nil {
			return fmt.Errorf("unsupported adapter tensor %q", name)
		}
		l, _ := strconv.Atoi(sm[1])
		mod, ok := ParseModule(sm[3])
		if !ok || l >= cfg.NumLayers || mod.path() != sm[2]+"."+sm[3] {
			return fmt.Errorf("adapter tensor %q does not match the model", name)
		}
		t, err := st.Float32(name)
		if err != nil {
			return err
		}
		out, in := cfg.Dims(mod)
		want := []int{a.Rank, in}
		if sm[4] == "B" {
			want = []int{out, a.Rank}
		}
		if !equalShape(t.Shape, want) {
			return fmt.Errorf("adapter tensor %q has shape %v, want %v", name, t.Shape, want)
		}
		pair := host[[2]int{l, int(mod)}]
		pair[map[string]int{"A": 0, "B": 1}[sm[4]]] = &t
		host[[2]int{l, int(mod)}] = pair
	}
	if len(host) == 0 {
		return fmt.Errorf("adapter has no LoRA tensors")
	}
	for key, pair := range host {
		if pair[0] == nil || pair[1] == nil {
			return fmt.Errorf("layer %d %s: lora_A and lora_B must both be present", key[0], Module(key[1]))
		}
		a.Layers[key[0]][key[1]] = &LoRA{A: be.Upload(pair[0].Data, pair[0].Shape...), B: be.Upload(pair[1].Data, pair[1].Shape...)}
	}
	return nil
}

// Params lists the adapter's tensors with their PEFT names, in a stable
// order (layer, module, A before B). They are the adapter's own tensors.
func (a *Adapter) Params() []Param {
	var out []Param
	for l := range a.Layers {
		for mod := ModQ; mod < NumModules; mod++ {
			if w := a.Layers[l][mod]; w != nil {
				out = append(out, Param{Name: loraName(l, mod, "A"), Tensor: w.A}, Param{Name: loraName(l, mod, "B"), Tensor: w.B})
			}
		}
	}
	return out
}

// Save writes a PEFT adapter folder: adapter_config.json and
// adapter_model.safetensors (F32).
func (a *Adapter) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("save adapter: %w", err)
	}
	names := make([]string, len(a.Targets))
	for i, t := range a.Targets {
		names[i] = t.String()
	}
	tm, _ := json.Marshal(names)
	pc := peftConfig{PeftType: "LORA", TaskType: "CAUSAL_LM", R: a.Rank, LoraAlpha: a.Alpha, TargetModules: tm,
		Bias: "none", UseRSLoRA: a.RSLoRA, InferenceMode: true}
	raw, err := json.MarshalIndent(pc, "", "  ")
	if err != nil {
		return fmt.Errorf("save adapter: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "adapter_config.json"), append(raw, '\n'), 0o644); err != nil {
		return fmt.Errorf("save adapter: %w", err)
	}
	host := map[string]HostTensor{}
	for _, p := range a.Params() {
		host[p.Name] = download(a.m.be, p.Tensor)
	}
	if err := WriteSafetensors(filepath.Join(dir, "adapter_model.safetensors"), host, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("save adapter: %w", err)
	}
	return nil
}

// Freeze promises that the adapter's weights no longer change (an engine's
// served adapter; never one being trained): under autocast its LoRA GEMMs
// then take bf16 copies made once, instead of rounding A and B on every
// pass (two conversions per module and step of a decode).
func (a *Adapter) Freeze() { a.frozen = true }

// weightsBF16 returns A and B of layer l's module mod rounded to bf16, and
// whether the caller frees them (not for a frozen adapter's copies).
func (a *Adapter) weightsBF16(l int, mod Module) (ab, bb kernels.Tensor, owned bool) {
	m := a.m
	if !a.frozen {
		w := a.Layers[l][mod]
		return m.castBF16(w.A), m.castBF16(w.B), true
	}
	a.castOnce.Do(func() {
		a.cast = make([][NumModules]*LoRA, len(a.Layers))
		for l := range a.Layers {
			for mod, w := range a.Layers[l] {
				if w != nil {
					a.cast[l][mod] = &LoRA{A: m.castBF16(w.A), B: m.castBF16(w.B)}
				}
			}
		}
	})
	c := a.cast[l][mod]
	return c.A, c.B, false
}

// Free releases the adapter's tensors.
func (a *Adapter) Free() {
	for _, p := range a.Params() {
		a.m.be.Free(p.Tensor)
	}
	for l := range a.cast {
		for _, c := range a.cast[l] {
			if c != nil {
				a.m.be.Free(c.A)
				a.m.be.Free(c.B)
			}
		}
	}
	a.cast = nil
	for l := range a.Layers {
		a.Layers[l] = [NumModules]*LoRA{}
	}
}
