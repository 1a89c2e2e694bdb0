package trainer

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/hone-rl/hone/model"
	"github.com/hone-rl/hone/peers"
	"github.com/hone-rl/hone/trainer/checkpoint"
)

const python = "/usr/bin/python3"

// needTorch skips without PyTorch unless HONE_REQUIRE_PARITY=1.
func needTorch(t *testing.T) {
	t.Helper()
	if err := exec.Command(python, "-c", "import torch").Run(); err != nil {
		if os.Getenv("HONE_REQUIRE_PARITY") == "1" {
			t.Fatalf("PyTorch required (HONE_REQUIRE_PARITY=1): %v", err)
		}
		t.Skipf("PyTorch not available (%v): apt-get install python3-torch", err)
	}
}

// repoScript is scripts/<dir>/<name> of this repository.
func repoScript(t *testing.T, dir, name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "scripts", dir, name)
}

type parityInput struct {
	Sequences  [][]int32      `json:"sequences"`
	Mask       [][]uint8      `json:"-"`
	MaskJSON   [][]int        `json:"mask"`
	Behaviour  [][]float32    `json:"behaviour"`
	Advantages [][]float32    `json:"advantages"`
	Weights    []float64      `json:"weights"`
	Loss       map[string]any `json:"loss"`
}

// peersPython returns the peers' Python (transformers, PEFT): skips without
// it, saying how to get it, unless HONE_REQUIRE_PEERS=1 makes that a failure.
func peersPython(t *testing.T) string {
	t.Helper()
	py, err := peers.Python()
	if err != nil {
		if peers.Required() {
			t.Fatalf("HONE_REQUIRE_PEERS=1: %v", err)
		}
		t.Skip(err)
	}
	return py
}

// TestLossGradientParityTransformers compares the trainer's loss, token
// log-probabilities and LoRA gradients with autograd through transformers'
// AutoModelForCausalLM and PEFT's PeftModel (float64 there, float32 here),
// the adapter being the one trainer/checkpoint wrote, loaded by
// PeftModel.from_pretrained (scripts/peers/hf_loss.py checks PEFT took every
// tensor): relative error <= 1e-3.
func TestLossGradientParityTransformers(t *testing.T) {
	py := peersPython(t)
	cases := []struct {
		name string
		opts LossOptions
	}{
		{"sft token-mean", LossOptions{Kind: LossSFT, KLEstimator: KLk1, Aggregation: AggTokenMean}},
		{"ppo-clip token-mean", LossOptions{Kind: LossPPO, ClipLow: 0.2, ClipHigh: 0.28, KLEstimator: KLk3, Aggregation: AggTokenMean}},
		{"ppo dual-clip k3 seq-mean", LossOptions{Kind: LossPPO, ClipLow: 0.2, ClipHigh: 0.2, DualClip: 3, KLCoef: 0.1, KLEstimator: KLk3, Aggregation: AggSeqMean}},
		{"ppo k2 token-mean", LossOptions{Kind: LossPPO, ClipLow: 0.1, ClipHigh: 0.1, KLCoef: 0.5, KLEstimator: KLk2, Aggregation: AggTokenMean}},
		{"decoupled ppo truncated IS", LossOptions{Kind: LossPPO, ClipLow: 0.2, ClipHigh: 0.2, TISCap: 1.2, KLEstimator: KLk1, Aggregation: AggTokenMean}},
	}
	dir := t.TempDir()
	pol := testPolicy(t, microConfig(), 11)
	defer pol.Free()
	modelDir := filepath.Join(dir, "model")
	if err := pol.Model.Save(modelDir); err != nil {
		t.Fatal(err)
	}
	tensors, _, _ := pol.snapshot()
	adapterDir, err := checkpoint.Dir{Root: dir}.Write(checkpoint.Version{Config: checkpoint.LoRAConfig{BaseModel: "micro", R: 4, Alpha: 8,
		TargetModules: []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}}, Tensors: tensors,
		State: checkpoint.State{Version: 1}})
	if err != nil {
		t.Fatal(err)
	}
	in := parityBatch(t, pol)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			goLoss, goLogp, goGrads, clipped := goSide(t, pol, tc.opts, in)
			ref := refSide(t, py, tc.opts, in, modelDir, adapterDir, filepath.Join(dir, "ref.safetensors"))
			want := ref["loss"].Data[0]
			if rel := math.Abs(goLoss-float64(want)) / math.Max(math.Abs(float64(want)), 1e-12); rel > 1e-3 {
				t.Errorf("loss %v, transformers + PEFT %v (rel err %.2e)", goLoss, want, rel)
			}
			worstLogp := 0.0
			for i, lp := range goLogp {
				r := ref[fmt.Sprintf("logp.%d", i)].Data
				for k := range lp {
					worstLogp = math.Max(worstLogp, math.Abs(float64(lp[k])-float64(r[k])))
				}
			}
			if worstLogp > 1e-4 {
				t.Errorf("token log-probabilities differ from transformers + PEFT by up to %.3g (tolerance 1e-4)", worstLogp)
			}
			worst := 0.0
			for name, g := range goGrads {
				r, ok := ref["grad."+name]
				if !ok {
					t.Fatalf("%s: no gradient from PEFT", name)
				}
				var diff, norm float64
				for i := range g {
					diff += math.Pow(float64(g[i])-float64(r.Data[i]), 2)
					norm += math.Pow(float64(r.Data[i]), 2)
				}
				rel := math.Sqrt(diff / math.Max(norm, 1e-30))
				worst = math.Max(worst, rel)
				if rel > 1e-3 {
					t.Errorf("%s: relative error %.2e against transformers + PEFT autograd", name, rel)
				}
			}
			t.Logf("loss %.6g vs %.6g; token logprobs within %.2e; worst LoRA gradient relative error %.2e over %d tensors; %d tokens clipped",
				goLoss, want, worstLogp, worst, len(goGrads), clipped)
			if tc.opts.Kind == LossPPO && tc.opts.TISCap == 0 && clipped == 0 {
				t.Error("no token was clipped: the clipped branch went untested")
			}
		})
	}
}

// TestAdapterConfigMatchesPEFT compares the adapter_config.json
// trainer/checkpoint writes with the one the installed PEFT's save_pretrained
// writes for the same LoraConfig (scripts/peers/hf_adapter_config.py): the
// same keys with the same values, but peft_version (hone is not PEFT) and
// the order of target_modules (PEFT writes a set).
func TestAdapterConfigMatchesPEFT(t *testing.T) {
	py := peersPython(t)
	cmd := exec.Command(py, repoScript(t, "peers", "hf_adapter_config.py"), "--r", "8", "--alpha", "16", "--dropout", "0.05",
		"--targets", "v_proj,q_proj", "--base", "Qwen/Qwen3-0.6B")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("hf_adapter_config.py: %v\n%s", err, stderr.String())
	}
	ours, err := checkpoint.MarshalConfig(checkpoint.LoRAConfig{BaseModel: "Qwen/Qwen3-0.6B", R: 8, Alpha: 16, Dropout: 0.05,
		TargetModules: []string{"v_proj", "q_proj"}})
	if err != nil {
		t.Fatal(err)
	}
	var peft, hone map[string]any
	if err := json.Unmarshal(raw, &peft); err != nil {
		t.Fatalf("PEFT's adapter_config.json: %v\n%s", err, raw)
	}
	if err := json.Unmarshal(ours, &hone); err != nil {
		t.Fatal(err)
	}
	delete(peft, "peft_version")
	for _, m := range []map[string]any{peft, hone} {
		if tm, ok := m["target_modules"].([]any); ok {
			slices.SortFunc(tm, func(a, b any) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
		}
	}
	for k, v := range peft {
		if hv, ok := hone[k]; !ok {
			t.Errorf("hone's adapter_config.json lacks %q (PEFT writes %v)", k, v)
		} else if !reflect.DeepEqual(hv, v) {
			t.Errorf("%s: hone writes %v, PEFT %v", k, hv, v)
		}
	}
	for k, v := range hone {
		if _, ok := peft[k]; !ok {
			t.Errorf("hone's adapter_config.json has %q = %v, which PEFT does not write", k, v)
		}
	}
	t.Logf("%d keys, as PEFT writes them", len(hone))
}

// parityBatch builds three sequences with behaviour logprobs near the
// current policy's, so some ratios fall outside the clip range.
func parityBatch(t *testing.T, pol *Policy) parityInput {
	r := rand.New(rand.NewPCG(21, 22))
	in := parityInput{Sequences: [][]int32{{1, 7, 9, 30, 2, 5, 44}, {3, 11, 12}, {6, 6, 19, 20, 21, 40, 41, 8, 2}}}
	act, lps, err := pol.forward(context.Background(), in.Sequences)
	if err != nil {
		t.Fatal(err)
	}
	act.Free()
	for i, s := range in.Sequences {
		n := len(s)
		m, mj, b, a := make([]uint8, n), make([]int, n), make([]float32, n), make([]float32, n)
		for k := 1; k < n; k++ {
			if k >= 2 || i == 1 {
				m[k], mj[k] = 1, 1
			}
			b[k] = lps[i][k] + float32(0.4*r.NormFloat64())
			a[k] = float32(r.NormFloat64())
		}
		in.Mask, in.MaskJSON = append(in.Mask, m), append(in.MaskJSON, mj)
		in.Behaviour, in.Advantages = append(in.Behaviour, b), append(in.Advantages, a)
		in.Weights = append(in.Weights, 0.5+r.Float64())
	}
	return in
}

func goSide(t *testing.T, pol *Policy, o LossOptions, in parityInput) (float64, [][]float32, map[string][]float32, int) {
	ctx := context.Background()
	scales := AggregationScales(o.Aggregation, in.Mask)
	act, lps, err := pol.forward(ctx, in.Sequences)
	if err != nil {
		t.Fatal(err)
	}
	defer act.Free()
	var refs [][]float32
	if o.KLCoef > 0 {
		if refs, err = pol.reference(ctx, in.Sequences); err != nil {
			t.Fatal(err)
		}
	}
	total, clipped := 0.0, 0
	dl := make([][]float32, len(in.Sequences))
	for i := range in.Sequences {
		si := SeqInput{Logprobs: lps[i], Behaviour: in.Behaviour[i], Advantages: in.Advantages[i], Mask: in.Mask[i],
			Weight: in.Weights[i], Scale: scales[i]}
		if refs != nil {
			si.Ref = refs[i]
		}
		out, err := o.Seq(si)
		if err != nil {
			t.Fatal(err)
		}
		total += out.Loss
		clipped += out.Clipped
		dl[i] = out.Grad
	}
	if err := pol.backward(ctx, act, dl); err != nil {
		t.Fatal(err)
	}
	grads := map[string][]float32{}
	for _, g := range pol.grads.Adapter() {
		h := make([]float32, g.Tensor.Len())
		pol.be.Download(h, g.Tensor)
		grads[g.Name] = h
	}
	pol.grads.Zero()
	return total, lps, grads, clipped
}

func refSide(t *testing.T, py string, o LossOptions, in parityInput, modelDir, adapterDir, out string) map[string]model.HostTensor {
	in.Loss = map[string]any{"kind": o.Kind, "clip_low": o.ClipLow, "clip_high": o.ClipHigh, "dual_clip": o.DualClip, "tis_cap": o.TISCap,
		"kl_coef": o.KLCoef, "kl_estimator": o.KLEstimator, "aggregation": o.Aggregation}
	raw, _ := json.Marshal(in)
	inPath := out + ".json"
	if err := os.WriteFile(inPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, repoScript(t, "peers", "hf_loss.py"), "--model", modelDir, "--adapter", adapterDir, "--input", inPath, "--out", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hf_loss.py: %v\n%s", err, msg)
	}
	return readAll(t, out)
}

// TestOptimizerParityTorch runs three optimizer steps (global-norm clip,
// then AdamW with decoupled weight decay) on LoRA tensors with fixed
// gradients, against torch.nn.utils.clip_grad_norm_ + torch.optim.AdamW.
func TestOptimizerParityTorch(t *testing.T) {
	needTorch(t)
	dir := t.TempDir()
	pol := testPolicy(t, microConfig(), 13)
	defer pol.Free()
	params, _, _ := pol.snapshot()
	if err := model.WriteSafetensors(filepath.Join(dir, "params.safetensors"), params, nil); err != nil {
		t.Fatal(err)
	}
	o := AdamWOptions{Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, WeightDecay: 0.1}
	const steps, lr, maxNorm = 3, 1e-2, 0.5
	r := rand.New(rand.NewPCG(3, 4))
	grads := map[string]model.HostTensor{}
	var norms []float64
	for s := 0; s < steps; s++ {
		for _, g := range pol.grads.Adapter() {
			h := model.HostTensor{Shape: g.Tensor.Shape(), Data: make([]float32, g.Tensor.Len())}
			for i := range h.Data {
				h.Data[i] = float32(0.3 * r.NormFloat64() * float64(s+1))
			}
			grads[fmt.Sprintf("grads.%d.%s", s, g.Name)] = h
			up := pol.be.Upload(h.Data, h.Shape...)
			pol.be.Copy(g.Tensor, up)
			pol.be.Free(up)
		}
		norm, err := pol.optimize(lr, maxNorm, o)
		if err != nil {
			t.Fatal(err)
		}
		norms = append(norms, norm)
	}
	if err := model.WriteSafetensors(filepath.Join(dir, "grads.safetensors"), grads, nil); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.safetensors")
	cmd := exec.Command(python, repoScript(t, "torch", "trainer_adamw.py"), "--params", filepath.Join(dir, "params.safetensors"),
		"--grads", filepath.Join(dir, "grads.safetensors"), "--out", out, "--steps", fmt.Sprint(steps), "--lr", fmt.Sprint(lr),
		"--beta1", "0.9", "--beta2", "0.99", "--eps", "1e-8", "--weight-decay", "0.1", "--max-norm", fmt.Sprint(maxNorm))
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("trainer_adamw.py: %v\n%s", err, msg)
	}
	ref := readAll(t, out)
	for s, n := range norms {
		if want := float64(ref[fmt.Sprintf("norm.%d", s)].Data[0]); math.Abs(n-want) > 1e-4*want {
			t.Errorf("step %d: grad norm %v, PyTorch %v", s, n, want)
		}
	}
	got, _, _ := pol.snapshot()
	worst := 0.0
	for name, h := range got {
		w := ref[name].Data
		for i := range h.Data {
			worst = math.Max(worst, math.Abs(float64(h.Data[i])-float64(w[i])))
		}
	}
	t.Logf("after %d steps: largest parameter difference %.2e (lr %v)", steps, worst, lr)
	if worst > 1e-5 {
		t.Fatalf("parameters differ from PyTorch's AdamW by up to %v", worst)
	}
}

func readAll(t *testing.T, path string) map[string]model.HostTensor {
	st, err := model.OpenSafetensors(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	res := map[string]model.HostTensor{}
	for _, n := range st.Names() {
		h, err := st.Float32(n)
		if err != nil {
			t.Fatal(err)
		}
		res[n] = model.HostTensor{Shape: h.Shape, Data: append([]float32(nil), h.Data...)}
	}
	return res
}
