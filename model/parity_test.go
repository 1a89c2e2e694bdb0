package model

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hone-rl/hone/kernels/cpu"
)

// hfScript is the transformers + PEFT reference (run by the peers' Python).
const hfScript = "../scripts/peers/hf_model.py"

// Tolerances against transformers (both sides float32; the gradients'
// reference is float64): logits may differ by summation order only.
const (
	logitTol   = 1e-4 // max |hone - transformers| over all logits, relative to max(1, max |logit|)
	gradRelTol = 1e-3 // ||g_hone - g_torch|| / ||g_torch|| per LoRA tensor
)

// peersPython returns the Python of the peers' virtualenv (transformers,
// PEFT, torch): $HONE_PEERS_PYTHON, else what scripts/peers/ensure.sh
// --print-only names. Without one the test skips, saying how to get it,
// unless HONE_REQUIRE_PEERS=1 makes that a failure. (peers.Python does the
// same, but model's tests cannot import peers: it imports model.)
func peersPython(t *testing.T) string {
	t.Helper()
	py := os.Getenv("HONE_PEERS_PYTHON")
	var why string
	if py != "" {
		if _, err := os.Stat(py); err != nil {
			why = fmt.Sprintf("HONE_PEERS_PYTHON=%s: %v", py, err)
		}
	} else {
		var stderr bytes.Buffer
		cmd := exec.Command("bash", "../scripts/peers/ensure.sh", "--print-only")
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		py = lines[len(lines)-1]
		if err != nil || py == "" {
			why = "no peers environment with transformers + PEFT (run make peers, or set HONE_PEERS_PYTHON): " + strings.TrimSpace(stderr.String())
		}
	}
	if why != "" {
		if os.Getenv("HONE_REQUIRE_PEERS") == "1" {
			t.Fatalf("HONE_REQUIRE_PEERS=1: %s", why)
		}
		t.Skip(why)
	}
	return py
}

// relErr is ||got-want|| / ||want||.
func relErr(got, want []float32) float64 {
	var num, den float64
	for i := range want {
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num / den)
}

// logitDiff is the largest |got-want| and where it is, and the largest |want|.
func logitDiff(got, want []float32) (worst float64, at int, scale float64) {
	scale = 1
	for i := range want {
		if d := math.Abs(float64(got[i]) - float64(want[i])); d > worst || math.IsNaN(d) {
			worst, at = d, i
		}
		scale = math.Max(scale, math.Abs(float64(want[i])))
	}
	return worst, at, scale
}

// hfCase is one architecture against transformers' class of the same name.
type hfCase struct {
	name string
	cfg  *Config
	// peft is the LoraConfig (JSON) of the adapter PEFT makes for hone to load.
	peft string
	// raw, when set, is the config.json both read (cfg is hone's parse of
	// it); otherwise both read the config.json hone writes for cfg.
	raw []byte
}

// shrunkConfigs are model/testdata's real config.json files (Qwen3-0.6B,
// Qwen2.5-0.5B, Llama-3.2-1B with Llama 3 rope scaling, transformers 5's
// rope_parameters form) with small dimensions and every other field kept.
func shrunkConfigs(t *testing.T) []hfCase {
	t.Helper()
	var out []hfCase
	for i, name := range []string{"qwen3-0.6b", "qwen2.5-0.5b", "llama-3.2-1b", "qwen3-rope-parameters"} {
		raw, err := os.ReadFile(filepath.Join("testdata", name+".config.json"))
		if err != nil {
			t.Fatal(err)
		}
		var c map[string]any
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]any{"vocab_size": 128, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
			"num_attention_heads": 4, "num_key_value_heads": 2} {
			c[k] = v
		}
		if _, ok := c["head_dim"]; ok {
			c["head_dim"] = 24
		}
		delete(c, "torch_dtype")
		raw, _ = json.MarshalIndent(c, "", "  ")
		cfg, err := ParseConfig(raw)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		peft := fmt.Sprintf(`{"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "o_proj", "up_proj"], "seed": %d}`, 10+i)
		if name == "qwen2.5-0.5b" {
			// An adapter stored in bfloat16, as one trained in bf16 is.
			peft = `{"r": 8, "lora_alpha": 8, "target_modules": "all-linear", "seed": 20, "save_dtype": "bfloat16"}`
		}
		out = append(out, hfCase{name: name + "-config", cfg: cfg, peft: peft, raw: raw})
	}
	return out
}

// TestTransformersParity writes a random small model and a LoRA adapter of
// each architecture hone implements and runs transformers 5 + PEFT on the
// same files (scripts/peers/hf_model.py):
//   - hone's logits equal AutoModelForCausalLM's (float32, max abs diff),
//     on configs hone writes and on real models' config.json files shrunk;
//   - PEFT's PeftModel.from_pretrained loads hone's adapter (every tensor,
//     bit for bit) and gives hone's logits with it;
//   - the gradient of a masked mean token log-probability with respect to
//     every LoRA tensor equals autograd through transformers + PEFT;
//   - hone's LoadAdapter reads an adapter PEFT's save_pretrained wrote (all
//     seven projections, a subset, rsLoRA, bfloat16) and gives PEFT's logits
//     with it.
func TestTransformersParity(t *testing.T) {
	py := peersPython(t)
	for _, tc := range []hfCase{
		{"qwen3", &Config{Architecture: ArchQwen3, VocabSize: 97, HiddenSize: 64, IntermediateSize: 96, NumLayers: 2,
			NumHeads: 4, NumKVHeads: 2, HeadDim: 24, MaxPositions: 256, RMSNormEps: 1e-6, RopeTheta: 1e6,
			TieWordEmbeddings: true, QKNorm: true},
			`{"r": 4, "lora_alpha": 8, "target_modules": "all-linear", "seed": 1}`, nil},
		{"qwen2", &Config{Architecture: ArchQwen2, VocabSize: 83, HiddenSize: 48, IntermediateSize: 80, NumLayers: 2,
			NumHeads: 6, NumKVHeads: 2, HeadDim: 8, MaxPositions: 256, RMSNormEps: 1e-6, RopeTheta: 1e4, AttentionBias: true},
			`{"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj", "down_proj"], "seed": 2}`, nil},
		{"llama", &Config{Architecture: ArchLlama, VocabSize: 70, HiddenSize: 32, IntermediateSize: 64, NumLayers: 3,
			NumHeads: 4, NumKVHeads: 1, HeadDim: 8, MaxPositions: 256, RMSNormEps: 1e-5, RopeTheta: 5e5, AttentionBias: true},
			`{"r": 4, "lora_alpha": 32, "use_rslora": true, "target_modules": ["k_proj", "o_proj", "gate_proj", "up_proj"], "seed": 3}`, nil},
		// Llama 3 rope scaling with a short original context, so all three
		// frequency bands occur.
		{"llama3-scaled", &Config{Architecture: ArchLlama, VocabSize: 70, HiddenSize: 32, IntermediateSize: 64, NumLayers: 2,
			NumHeads: 2, NumKVHeads: 1, HeadDim: 32, MaxPositions: 256, RMSNormEps: 1e-5, RopeTheta: 5e5, TieWordEmbeddings: true,
			RopeScaling: &RopeScaling{RopeType: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 64}},
			`{"r": 2, "lora_alpha": 3, "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], "seed": 4}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) { transformersParity(t, py, tc) })
	}
	for _, tc := range shrunkConfigs(t) {
		t.Run(tc.name, func(t *testing.T) { transformersParity(t, py, tc) })
	}
}

func transformersParity(t *testing.T, py string, tc hfCase) {
	ctx := context.Background()
	cfg := tc.cfg
	dir := t.TempDir()
	m, err := New(cfg, cpu.New(2), 11)
	if err != nil {
		t.Fatal(err)
	}
	perturb(m, 0.15, 4)
	// Scale 2: at scale 4 (B ~ N(0, 0.3^2)) the shrunk Llama-3.2 model's
	// float32 logits were so ill-conditioned that transformers itself moved
	// by 3.6e-4 between float32 and float64, past the tolerance.
	a, err := NewAdapter(m, "a", AdapterConfig{Rank: 4, Alpha: 8}, 2)
	if err != nil {
		t.Fatal(err)
	}
	randomizeB(t, m, a)
	if err := m.Save(filepath.Join(dir, "model")); err != nil {
		t.Fatal(err)
	}
	if tc.raw != nil {
		if err := os.WriteFile(filepath.Join(dir, "model", "config.json"), tc.raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Save(filepath.Join(dir, "adapter")); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(6, 6))
	seqs := [][]int32{randTokens(rng, 23, cfg.VocabSize), randTokens(rng, 9, cfg.VocabSize), randTokens(rng, 1, cfg.VocabSize)}
	// The loss takes the first two (a one-token sequence has no target).
	mask := [][]float32{make([]float32, 22), make([]float32, 8)}
	for i := range mask {
		for j := range mask[i] {
			mask[i][j] = float32(rng.IntN(2))
		}
	}
	in, _ := json.Marshal(map[string]any{"sequences": seqs, "loss_mask": mask})
	if err := os.WriteFile(filepath.Join(dir, "input.json"), in, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "ref.safetensors")
	peftDir := filepath.Join(dir, "peft-adapter")
	cmd := exec.Command(py, hfScript, "--model", filepath.Join(dir, "model"), "--adapter", filepath.Join(dir, "adapter"),
		"--input", filepath.Join(dir, "input.json"), "--out", out, "--peft-save", peftDir, "--peft-config", tc.peft)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("transformers reference failed: %v\n%s", err, b)
	}
	ref, err := OpenSafetensors(out)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	get := func(name string) []float32 {
		ht, err := ref.Float32(name)
		if err != nil {
			t.Fatal(err)
		}
		return ht.Data
	}

	// transformers' forward, and PEFT with hone's adapter.
	for _, ad := range []*Adapter{nil, a} {
		prefix := "logits"
		if ad != nil {
			prefix = "lora_logits"
		}
		checkLogits(t, m, seqs, ad, prefix, get)
	}

	// Gradients of the masked mean log-probability w.r.t. every LoRA tensor.
	loss, act, dlogp := maskedLoss(t, m, seqs[:2], mask, a)
	if want := float64(get("loss")[0]); math.Abs(loss-want) > 1e-4*math.Abs(want) {
		t.Errorf("loss %g, transformers %g", loss, want)
	}
	g := m.NewGrads(a, false)
	if err := m.Backward(ctx, act, dlogp, g); err != nil {
		t.Fatal(err)
	}
	act.Free()
	worst := 0.0
	for _, p := range g.Adapter() {
		got := make([]float32, p.Tensor.Len())
		m.be.Download(got, p.Tensor)
		e := relErr(got, get("grad."+p.Name))
		worst = math.Max(worst, e)
		if e > gradRelTol {
			t.Errorf("%s: gradient relative error %.3g, transformers + PEFT autograd (tolerance %g)", p.Name, e, gradRelTol)
		}
	}
	t.Logf("worst LoRA gradient relative error %.3g over %d tensors", worst, len(g.Adapter()))

	// An adapter PEFT wrote, in hone.
	pa, err := LoadAdapter(peftDir, m)
	if err != nil {
		t.Fatalf("hone cannot load PEFT's save_pretrained adapter: %v", err)
	}
	defer pa.Free()
	var spec struct {
		R       int     `json:"r"`
		Alpha   float64 `json:"lora_alpha"`
		RSLoRA  bool    `json:"use_rslora"`
		Targets any     `json:"target_modules"`
	}
	if err := json.Unmarshal([]byte(tc.peft), &spec); err != nil {
		t.Fatal(err)
	}
	wantScale := spec.Alpha / float64(spec.R)
	if spec.RSLoRA {
		wantScale = spec.Alpha / math.Sqrt(float64(spec.R))
	}
	if pa.Rank != spec.R || math.Abs(float64(pa.Scale)-wantScale) > 1e-6 {
		t.Errorf("PEFT adapter loaded with rank %d scale %g, want %d and %g", pa.Rank, pa.Scale, spec.R, wantScale)
	}
	if names, ok := spec.Targets.([]any); ok && len(pa.Targets) != len(names) {
		t.Errorf("PEFT adapter targets %v, LoraConfig %v", pa.Targets, names)
	}
	checkLogits(t, m, seqs, pa, "peft_logits", get)

	// The comparison can fail: one changed weight of the loaded adapter moves
	// the logits past the tolerance.
	lo := pa.Layers[0][pa.Targets[0]]
	b := make([]float32, lo.B.Len())
	m.be.Download(b, lo.B)
	b[0] += 0.5
	m.be.Copy(lo.B, m.be.Upload(b, lo.B.Shape()...))
	rows, err := m.Logits(ctx, seqs[0], pa)
	if err != nil {
		t.Fatal(err)
	}
	want := get("peft_logits.0")
	if d, _, scale := logitDiff(flatten(rows), want); d <= logitTol*scale {
		t.Errorf("changing one lora_B weight moved the logits by only %.3g: the comparison cannot fail", d)
	}
}

// checkLogits compares hone's logits of every sequence (with adapter ad)
// with the reference's prefix.{i}.
func checkLogits(t *testing.T, m *Model, seqs [][]int32, ad *Adapter, prefix string, get func(string) []float32) {
	t.Helper()
	worst := 0.0
	for i, s := range seqs {
		rows, err := m.Logits(context.Background(), s, ad)
		if err != nil {
			t.Fatal(err)
		}
		got, want := flatten(rows), get(fmt.Sprintf("%s.%d", prefix, i))
		if len(got) != len(want) {
			t.Fatalf("%s.%d: %d logits, transformers %d", prefix, i, len(got), len(want))
		}
		d, at, scale := logitDiff(got, want)
		worst = math.Max(worst, d/scale)
		if d > logitTol*scale {
			v := m.cfg.VocabSize
			t.Errorf("%s.%d: max abs diff %.3g at position %d token %d (hone %g, transformers %g; max |logit| %.3g, tolerance %.3g)",
				prefix, i, d, at/v, at%v, got[at], want[at], scale, logitTol*scale)
		}
	}
	t.Logf("%s: max abs diff / max(1, max |logit|) = %.3g over %d sequences", prefix, worst, len(seqs))
}

func flatten(rows [][]float32) []float32 {
	var out []float32
	for _, r := range rows {
		out = append(out, r...)
	}
	return out
}

// perturb adds N(0, std) noise to every weight so the layers are far from
// the near-identity 0.02 init.
func perturb(m *Model, std float64, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed))
	for _, p := range m.Params() {
		d := make([]float32, p.Tensor.Len())
		m.be.Download(d, p.Tensor)
		for i := range d {
			d[i] += float32(std * rng.NormFloat64())
		}
		m.be.Copy(p.Tensor, m.be.Upload(d, p.Tensor.Shape()...))
	}
}
