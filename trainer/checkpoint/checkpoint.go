// Package checkpoint writes and reads trainer checkpoints: each policy
// version is a folder checkpoints/<name>/v<N>/ holding a PEFT LoRA adapter
// exactly as PEFT's save_pretrained writes it (adapter_config.json,
// adapter_model.safetensors) plus the optimizer state --resume needs
// (optimizer.safetensors, trainer_state.json). A full fine-tuning version
// holds a complete model folder (config.json, model.safetensors, tokenizer
// files) instead of the adapter. Versions appear atomically:
// a folder is written under a temporary name and renamed into place.
package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hone-rl/hone/model"
)

// File names inside a version folder.
const (
	ConfigFile       = "adapter_config.json"
	WeightsFile      = "adapter_model.safetensors"
	ModelConfigFile  = "config.json"       // full fine-tuning checkpoints
	ModelWeightsFile = "model.safetensors" // full fine-tuning checkpoints
	OptimizerFile    = "optimizer.safetensors"
	StateFile        = "trainer_state.json"
)

// LoRAConfig is the part of PEFT's LoraConfig hone sets.
type LoRAConfig struct {
	BaseModel     string   // base_model_name_or_path
	R             int      // rank
	Alpha         float64  // lora_alpha; the scale is Alpha/R
	Dropout       float64  // lora_dropout
	TargetModules []string // q_proj, k_proj, ...
}

// Validate reports a configuration error, if any.
func (c LoRAConfig) Validate() error {
	if c.R <= 0 || c.Alpha <= 0 || len(c.TargetModules) == 0 {
		return fmt.Errorf("lora config: r %d, lora_alpha %v, %d target modules: want positive r and alpha and a target", c.R, c.Alpha, len(c.TargetModules))
	}
	for _, m := range c.TargetModules {
		if _, ok := model.ParseModule(m); !ok {
			return fmt.Errorf("lora config: unknown target module %q", m)
		}
	}
	return nil
}

// peftConfig mirrors the adapter_config.json PEFT 0.22.0's save_pretrained
// writes for a plain LoRA on a causal LM, every default included, in the
// same (sorted) key order; only peft_version is left out (hone is not PEFT).
// trainer/parity_test.go compares it with what the installed PEFT writes.
type peftConfig struct {
	AloraInvocationTokens any            `json:"alora_invocation_tokens"`
	AlphaPattern          map[string]any `json:"alpha_pattern"`
	ArrowConfig           any            `json:"arrow_config"`
	AstraConfig           any            `json:"astra_config"`
	AutoMapping           any            `json:"auto_mapping"`
	BaseModel             string         `json:"base_model_name_or_path"`
	Bias                  string         `json:"bias"`
	CordaConfig           any            `json:"corda_config"`
	EnsureWeightTying     bool           `json:"ensure_weight_tying"`
	EvaConfig             any            `json:"eva_config"`
	ExcludeModules        any            `json:"exclude_modules"`
	FanInFanOut           bool           `json:"fan_in_fan_out"`
	InferenceMode         bool           `json:"inference_mode"`
	InitLoRAWeights       bool           `json:"init_lora_weights"`
	KasaConfig            any            `json:"kasa_config"`
	LayerReplication      any            `json:"layer_replication"`
	LayersPattern         any            `json:"layers_pattern"`
	LayersToTransform     any            `json:"layers_to_transform"`
	LoftQConfig           map[string]any `json:"loftq_config"`
	LoRAAlpha             float64        `json:"lora_alpha"`
	LoRABias              bool           `json:"lora_bias"`
	LoRADropout           float64        `json:"lora_dropout"`
	LoRAGAConfig          any            `json:"lora_ga_config"`
	MegatronConfig        any            `json:"megatron_config"`
	MegatronCore          string         `json:"megatron_core"`
	ModulesToSave         any            `json:"modules_to_save"`
	MonteCLoRAConfig      any            `json:"monteclora_config"`
	PeftType              string         `json:"peft_type"`
	QALoRAGroupSize       int            `json:"qalora_group_size"`
	R                     int            `json:"r"`
	RankPattern           map[string]any `json:"rank_pattern"`
	Revision              any            `json:"revision"`
	TargetModules         []string       `json:"target_modules"`
	TargetParameters      any            `json:"target_parameters"`
	TaskType              string         `json:"task_type"`
	TrainableTokenIndices any            `json:"trainable_token_indices"`
	UseBDLoRA             any            `json:"use_bdlora"`
	UseDoRA               bool           `json:"use_dora"`
	UseQALoRA             bool           `json:"use_qalora"`
	UseRSLoRA             bool           `json:"use_rslora"`
	VeLoRAConfig          any            `json:"velora_config"`
}

// MarshalConfig renders adapter_config.json as PEFT does (sorted keys,
// two-space indent).
func MarshalConfig(c LoRAConfig) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	targets := slices.Clone(c.TargetModules)
	slices.Sort(targets)
	pc := peftConfig{
		AlphaPattern: map[string]any{}, BaseModel: c.BaseModel, Bias: "none", InferenceMode: true,
		InitLoRAWeights: true, LoftQConfig: map[string]any{}, LoRAAlpha: c.Alpha, LoRADropout: c.Dropout,
		MegatronCore: "megatron.core", PeftType: "LORA", QALoRAGroupSize: 16, R: c.R, RankPattern: map[string]any{},
		TargetModules: targets, TaskType: "CAUSAL_LM",
	}
	return json.MarshalIndent(pc, "", "  ")
}

// ParseConfig reads a PEFT adapter_config.json. It accepts only LoRA
// adapters without features hone does not implement (DoRA, rsLoRA, biases,
// fan_in_fan_out).
func ParseConfig(b []byte) (LoRAConfig, error) {
	var pc struct {
		peftConfig
		TargetModules json.RawMessage `json:"target_modules"`
	}
	if err := json.Unmarshal(b, &pc); err != nil {
		return LoRAConfig{}, fmt.Errorf("parse adapter config: %w", err)
	}
	if pc.PeftType != "LORA" || pc.UseDoRA || pc.UseRSLoRA || pc.FanInFanOut || (pc.Bias != "" && pc.Bias != "none") {
		return LoRAConfig{}, fmt.Errorf("adapter config: peft_type %q (dora %v, rslora %v, fan_in_fan_out %v, bias %q): only plain LORA is supported",
			pc.PeftType, pc.UseDoRA, pc.UseRSLoRA, pc.FanInFanOut, pc.Bias)
	}
	c := LoRAConfig{BaseModel: pc.BaseModel, R: pc.R, Alpha: pc.LoRAAlpha, Dropout: pc.LoRADropout}
	if err := json.Unmarshal(pc.TargetModules, &c.TargetModules); err != nil {
		var one string // PEFT also allows a single regex string
		if json.Unmarshal(pc.TargetModules, &one) != nil {
			return LoRAConfig{}, fmt.Errorf("adapter config target_modules: %s", pc.TargetModules)
		}
		return LoRAConfig{}, fmt.Errorf("adapter config target_modules %q: regex targets are not supported", one)
	}
	return c, c.Validate()
}

// TensorName is PEFT's name for a LoRA factor: which is "A" ([r, in]) or
// "B" ([out, r]) of module (q_proj, ..., down_proj) in decoder layer i.
func TensorName(layer int, module, which string) string {
	group := "self_attn"
	if strings.HasSuffix(module, "gate_proj") || strings.HasSuffix(module, "up_proj") || strings.HasSuffix(module, "down_proj") {
		group = "mlp"
	}
	return fmt.Sprintf("base_model.model.model.layers.%d.%s.%s.lora_%s.weight", layer, group, module, which)
}

// ParseTensorName inverts TensorName.
func ParseTensorName(name string) (layer int, module, which string, err error) {
	rest, ok := strings.CutPrefix(name, "base_model.model.model.layers.")
	parts := strings.Split(rest, ".")
	if !ok || len(parts) != 5 || parts[4] != "weight" || (parts[3] != "lora_A" && parts[3] != "lora_B") {
		return 0, "", "", fmt.Errorf("tensor %q: not a PEFT LoRA factor name", name)
	}
	layer, err = strconv.Atoi(parts[0])
	if err != nil || layer < 0 {
		return 0, "", "", fmt.Errorf("tensor %q: bad layer index", name)
	}
	if _, ok := model.ParseModule(parts[2]); !ok || TensorName(layer, parts[2], parts[3][5:]) != name {
		return 0, "", "", fmt.Errorf("tensor %q: unknown module path", name)
	}
	return layer, parts[2], parts[3][5:], nil
}

// State is the trainer's own progress, saved beside the optimizer moments.
type State struct {
	Version       int64             `json:"version"`        // policy version of this checkpoint
	OptimizerStep int64             `json:"optimizer_step"` // AdamW steps taken
	Baseline      *float64          `json:"baseline,omitempty"`
	Cursors       map[string]uint64 `json:"cursors,omitempty"` // experience cursor per source
}

// Version is everything one checkpoint folder holds.
type Version struct {
	Config LoRAConfig
	// Base, when set, makes this a full fine-tuning checkpoint: Tensors are
	// every model weight under Hugging Face names, written as config.json +
	// model.safetensors instead of an adapter.
	Base *model.Config
	// CopyFrom is a model folder whose tokenizer and generation files are
	// copied into a full checkpoint, so it is a complete model folder.
	CopyFrom string
	Tensors  map[string]model.HostTensor // PEFT tensor names (or model weight names with Base)
	// Moments are AdamW's first and second moments keyed by tensor name
	// (nil for an adapter without optimizer state).
	M, V  map[string]model.HostTensor
	State State
}

// Dir is a checkpoints/<name> folder.
type Dir struct{ Root string }

// Path returns the folder of version n.
func (d Dir) Path(n int64) string { return filepath.Join(d.Root, fmt.Sprintf("v%d", n)) }

// Write stores v as version v.State.Version, atomically, and returns its
// folder.
func (d Dir) Write(v Version) (string, error) {
	final := d.Path(v.State.Version)
	if _, err := os.Stat(final); err == nil {
		return "", fmt.Errorf("write checkpoint: %s already exists", final)
	}
	if err := os.MkdirAll(d.Root, 0o755); err != nil {
		return "", fmt.Errorf("write checkpoint: %w", err)
	}
	tmp, err := os.MkdirTemp(d.Root, ".tmp-v*")
	if err != nil {
		return "", fmt.Errorf("write checkpoint: %w", err)
	}
	if err := writeFiles(tmp, v); err != nil {
		_ = os.RemoveAll(tmp)
		return "", fmt.Errorf("write checkpoint v%d: %w", v.State.Version, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		_ = os.RemoveAll(tmp)
		return "", fmt.Errorf("write checkpoint v%d: %w", v.State.Version, err)
	}
	return final, nil
}

// copied lists the files of a model folder a full checkpoint carries over.
var copied = []string{"tokenizer.json", "tokenizer_config.json", "generation_config.json", "special_tokens_map.json"}

func writeFiles(dir string, v Version) error {
	var err error
	if v.Base != nil {
		err = writeFull(dir, v)
	} else {
		err = writeAdapter(dir, v)
	}
	if err != nil {
		return err
	}
	pt := map[string]string{"format": "pt"}
	if v.M != nil {
		if err := model.WriteSafetensors(filepath.Join(dir, OptimizerFile), moments(v.M, v.V), pt); err != nil {
			return err
		}
	}
	st, err := json.MarshalIndent(v.State, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, StateFile), st, 0o644)
}

func writeFull(dir string, v Version) error {
	if err := model.WriteConfig(dir, v.Base); err != nil {
		return err
	}
	if err := model.WriteSafetensors(filepath.Join(dir, ModelWeightsFile), v.Tensors, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	if v.CopyFrom == "" {
		return nil
	}
	for _, name := range copied {
		b, err := os.ReadFile(filepath.Join(v.CopyFrom, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("copy %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func writeAdapter(dir string, v Version) error {
	cfg, err := MarshalConfig(v.Config)
	if err != nil {
		return err
	}
	for name, t := range v.Tensors {
		if _, _, _, err := ParseTensorName(name); err != nil {
			return err
		}
		if len(t.Shape) != 2 {
			return fmt.Errorf("tensor %s: shape %v, want rank 2", name, t.Shape)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), cfg, 0o644); err != nil {
		return err
	}
	return model.WriteSafetensors(filepath.Join(dir, WeightsFile), v.Tensors, map[string]string{"format": "pt"})
}

func moments(m, v map[string]model.HostTensor) map[string]model.HostTensor {
	out := make(map[string]model.HostTensor, 2*len(m))
	for n, t := range m {
		out[n+".exp_avg"] = t
	}
	for n, t := range v {
		out[n+".exp_avg_sq"] = t
	}
	return out
}

// Read loads version n (optimizer state included when present).
func (d Dir) Read(n int64) (Version, error) {
	dir := d.Path(n)
	v := Version{State: State{Version: n}}
	weights := filepath.Join(dir, WeightsFile)
	raw, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if errors.Is(err, os.ErrNotExist) {
		v.Base, err = model.LoadConfig(filepath.Join(dir, ModelConfigFile))
		weights = filepath.Join(dir, ModelWeightsFile)
	} else if err == nil {
		v.Config, err = ParseConfig(raw)
	}
	if err != nil {
		return Version{}, fmt.Errorf("read checkpoint v%d: %w", n, err)
	}
	if v.Tensors, err = readTensors(weights); err != nil {
		return Version{}, fmt.Errorf("read checkpoint v%d: %w", n, err)
	}
	if raw, err = os.ReadFile(filepath.Join(dir, StateFile)); err == nil {
		if err := json.Unmarshal(raw, &v.State); err != nil {
			return Version{}, fmt.Errorf("read checkpoint v%d state: %w", n, err)
		}
	}
	opt, err := readTensors(filepath.Join(dir, OptimizerFile))
	if errors.Is(err, os.ErrNotExist) {
		return v, nil
	}
	if err != nil {
		return Version{}, fmt.Errorf("read checkpoint v%d optimizer: %w", n, err)
	}
	v.M, v.V = splitMoments(opt)
	return v, nil
}

func splitMoments(opt map[string]model.HostTensor) (m, v map[string]model.HostTensor) {
	m, v = map[string]model.HostTensor{}, map[string]model.HostTensor{}
	for n, t := range opt {
		if base, ok := strings.CutSuffix(n, ".exp_avg_sq"); ok {
			v[base] = t
		} else if base, ok := strings.CutSuffix(n, ".exp_avg"); ok {
			m[base] = t
		}
	}
	return m, v
}

func readTensors(path string) (map[string]model.HostTensor, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	st, err := model.OpenSafetensors(path)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	out := map[string]model.HostTensor{}
	for _, n := range st.Names() {
		t, err := st.Float32(n)
		if err != nil {
			return nil, err
		}
		out[n] = model.HostTensor{Shape: slices.Clone(t.Shape), Data: slices.Clone(t.Data)}
	}
	return out, nil
}

// Latest returns the highest complete version in the folder (0, false when
// there is none).
func (d Dir) Latest() (int64, bool, error) {
	entries, err := os.ReadDir(d.Root)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("list checkpoints: %w", err)
	}
	best, found := int64(0), false
	for _, e := range entries {
		n, err := strconv.ParseInt(strings.TrimPrefix(e.Name(), "v"), 10, 64)
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "v") || err != nil {
			continue
		}
		if complete(filepath.Join(d.Root, e.Name())) && (!found || n > best) {
			best, found = n, true
		}
	}
	return best, found, nil
}

// complete reports whether a version folder holds weights (adapter or full).
func complete(dir string) bool {
	for _, f := range []string{WeightsFile, ModelWeightsFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return true
		}
	}
	return false
}

// Prune deletes every complete version but the newest keep (keep <= 0
// keeps all) and returns the versions it removed.
func (d Dir) Prune(keep int) ([]int64, error) {
	if keep <= 0 {
		return nil, nil
	}
	entries, err := os.ReadDir(d.Root)
	if err != nil {
		return nil, fmt.Errorf("prune checkpoints: %w", err)
	}
	var versions []int64
	for _, e := range entries {
		n, err := strconv.ParseInt(strings.TrimPrefix(e.Name(), "v"), 10, 64)
		if e.IsDir() && strings.HasPrefix(e.Name(), "v") && err == nil && complete(filepath.Join(d.Root, e.Name())) {
			versions = append(versions, n)
		}
	}
	slices.Sort(versions)
	if len(versions) <= keep {
		return nil, nil
	}
	old := versions[:len(versions)-keep]
	for _, n := range old {
		if err := os.RemoveAll(d.Path(n)); err != nil {
			return nil, fmt.Errorf("prune checkpoint v%d: %w", n, err)
		}
	}
	return old, nil
}
