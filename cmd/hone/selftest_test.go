package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hone-rl/hone/kernels"
	"github.com/hone-rl/hone/kernels/backends"
	"github.com/hone-rl/hone/kernels/conformance"
	"github.com/hone-rl/hone/kernels/cpu"
	"github.com/hone-rl/hone/model"
)

// brokenRMSNorm is the CPU backend with RMSNorm's output 1% too large.
type brokenRMSNorm struct{ kernels.Backend }

func (b brokenRMSNorm) RMSNorm(out, x, w kernels.Tensor, eps float32) {
	b.Backend.RMSNorm(out, x, w, eps)
	b.Backend.Scale(out, out, 1.01)
}

// withBrokenCUDA makes "cuda" (and "auto") open the broken backend, as if a
// GPU were there whose RMSNorm kernel is wrong.
func withBrokenCUDA(t *testing.T) {
	t.Helper()
	orig := openBackend
	openBackend = func(name, variant string) (backends.Opened, error) {
		if name != backends.CUDA && name != backends.Auto {
			return orig(name, variant)
		}
		be, err := cpu.NewVariant(1, cpu.VariantGeneric)
		if err != nil {
			return backends.Opened{}, err
		}
		return backends.Opened{Backend: brokenRMSNorm{be}, Name: backends.CUDA, Variant: "broken"}, nil
	}
	t.Cleanup(func() { openBackend = orig })
}

// passLine is the table's last line when every check passes: one row per
// conformance group and eighteen LoRA-step rows (loss, grads, adamw for two
// architectures, with float32 base weights, bf16 ones, and bf16 ones with
// autocast).
var (
	nChecks  = len(conformance.Groups(cpu.New(1))) + 18
	passLine = fmt.Sprintf("PASS: %d checks", nChecks)
)

// TestSelftestCommand: hone selftest's table, exit codes and messages. This
// build has no -tags cuda: cuda exits 2 saying so, auto tests cpu.
func TestSelftestCommand(t *testing.T) {
	if backends.CUDABuilt() {
		t.Skip("these cases describe a build without -tags cuda")
	}
	cases := []struct {
		name       string
		args       []string
		broken     bool
		code       int
		out, err   []string // substrings of stdout and stderr
		jsonPassed *bool
	}{
		{name: "cpu", args: []string{"--backend", "cpu"}, code: 0,
			out: []string{"backend cpu", "conformance/RMSNorm", "lora-step/llama/grads", passLine}},
		{name: "emulated", args: []string{"--backend", "emulated"}, code: 0,
			out: []string{"backend emulated/fast", "conformance/Attention", passLine}},
		{name: "emulated readable", args: []string{"--backend", "emulated", "--variant", "readable"}, code: 0,
			out: []string{"backend emulated/readable", passLine}},
		{name: "auto falls back to cpu", args: []string{"--backend", "auto"}, code: 0,
			out: []string{"auto: testing cpu (cuda unavailable: backend cuda: backend unavailable: this hone was built without CUDA support", "PASS"}},
		{name: "cuda without the build", args: []string{"--backend", "cuda"}, code: 2,
			err: []string{"hone selftest: backend cuda: backend unavailable: this hone was built without CUDA support"}},
		{name: "unknown backend", args: []string{"--backend", "tpu"}, code: 2, err: []string{"want one of cpu, cuda, emulated, auto"}},
		{name: "unknown variant", args: []string{"--backend", "emulated", "--variant", "turbo"}, code: 2, err: []string{"turbo"}},
		{name: "json", args: []string{"--backend", "cpu", "--json"}, code: 0, jsonPassed: ptr(true)},
		{name: "broken op named", args: []string{"--backend", "cuda"}, broken: true, code: 1,
			out: []string{"backend cuda/broken", "FAIL: "},
			err: []string{"hone selftest: selftest of cuda/broken failed: conformance/RMSNorm (rmsnorm"}},
		{name: "broken op json", args: []string{"--backend", "cuda", "--json"}, broken: true, code: 1, jsonPassed: ptr(false),
			out: []string{`"conformance/RMSNorm"`}, err: []string{"conformance/RMSNorm"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.broken {
				withBrokenCUDA(t)
			}
			code, out, errOut := runCLI(t, append([]string{"selftest"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errOut)
			}
			for _, w := range tc.out {
				if !strings.Contains(out, w) {
					t.Errorf("stdout does not contain %q:\n%s", w, out)
				}
			}
			for _, w := range tc.err {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr does not contain %q:\n%s", w, errOut)
				}
			}
			if tc.jsonPassed != nil {
				var rep struct {
					Backend string
					Pass    bool
					Failed  []string
					Results []struct {
						Name string
						Pass bool
					}
				}
				if err := json.Unmarshal([]byte(out), &rep); err != nil {
					t.Fatalf("stdout is not JSON: %v\n%s", err, out)
				}
				if rep.Pass != *tc.jsonPassed || len(rep.Results) != nChecks {
					t.Fatalf("json: pass %v, %d results:\n%s", rep.Pass, len(rep.Results), out)
				}
				if !rep.Pass && (len(rep.Failed) == 0 || rep.Failed[0] != "conformance/RMSNorm") {
					t.Errorf("json failed list %v does not start with conformance/RMSNorm", rep.Failed)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// writeModel writes a config.json of the preset (Qwen3-8B's shape when
// preset is "qwen3-8b") into a fresh folder.
func writeModel(t *testing.T, preset string) string {
	t.Helper()
	var cfg *model.Config
	if preset == "qwen3-8b" {
		cfg = &model.Config{Architecture: model.ArchQwen3, VocabSize: 151936, HiddenSize: 4096, IntermediateSize: 12288,
			NumLayers: 36, NumHeads: 32, NumKVHeads: 8, HeadDim: 128, MaxPositions: 40960, RMSNormEps: 1e-6,
			RopeTheta: 1e6, QKNorm: true}
	} else {
		var err error
		if cfg, err = model.Preset(preset); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	if err := model.WriteConfig(dir, cfg); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestSelftestMemoryPlan: the plan hone selftest prints on a GPU, for the
// configured model and a given GPU size (here without NVML): Qwen3-8B r=16,
// 8k tokens, 80 GB beside an engine at 0.45 is kernels/cuda/DESIGN.md's
// table (two whole sequences per micro-batch, bf16 weights with autocast,
// the defaults); a 24 GB GPU refuses with the numbers.
func TestSelftestMemoryPlan(t *testing.T) {
	dir := writeModel(t, "qwen3-8b")
	for _, tc := range []struct {
		name     string
		gpu      int64
		seqs     int64
		out, err string
	}{
		{"80 GB", 80e9, 2, "micro-batch budget: 22", ""},
		{"24 GB", 24e9, 0, "does not fit: memplan: one 8192-token sequence needs", "memplan: one 8192-token sequence"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := memoryPlan("", dir, tc.gpu, 8192, 0.45)
			if err != nil {
				t.Fatal(err)
			}
			p.GPU = "test GPU"
			if p.Plan.MicroBatchSequences != tc.seqs || !strings.Contains(p.Error, tc.err) || (tc.err == "") != (p.Error == "") {
				t.Fatalf("plan %+v, error %q", p.Plan, p.Error)
			}
			var b bytes.Buffer
			p.write(&b)
			if !strings.Contains(b.String(), tc.out) || !strings.Contains(b.String(), "not measured") ||
				!strings.Contains(b.String(), "GEMM temporaries (autocast true)") {
				t.Errorf("printed plan lacks %q:\n%s", tc.out, b.String())
			}
			t.Logf("\n%s", b.String())
		})
	}
	if _, err := memoryPlan("", "", 80e9, 8192, 0.45); err == nil || !strings.Contains(err.Error(), "no model configured") {
		t.Errorf("no model: %v", err)
	}
}

// TestServeTrainBackend: hone serve --train with trainer.backend cuda in a
// build without CUDA refuses to start, saying why, whether the key comes
// from the file or HONE_TRAINER_BACKEND; with a GPU whose backend fails
// the selftest it refuses naming the failing op; with a bad value the
// configuration is refused.
func TestServeTrainBackend(t *testing.T) {
	if backends.CUDABuilt() {
		t.Skip("these cases describe a build without -tags cuda")
	}
	modelDir := writeModel(t, "tiny")
	cases := []struct {
		name   string
		yaml   string
		env    string // HONE_TRAINER_BACKEND
		broken bool
		err    []string
	}{
		{name: "cuda in the file", yaml: "trainer:\n  backend: cuda\n",
			err: []string{"trainer: trainer.backend cuda: refusing to train: backend cuda: backend unavailable: " +
				"this hone was built without CUDA support", "set trainer.backend to cpu or auto"}},
		{name: "cuda in the environment", env: "cuda", err: []string{"refusing to train", "built without CUDA support"}},
		{name: "failing selftest", yaml: "trainer:\n  backend: cuda\n", broken: true,
			err: []string{"trainer.backend cuda: refusing to train on cuda/broken: selftest of cuda/broken failed: conformance/RMSNorm (rmsnorm"}},
		{name: "bad value", yaml: "trainer:\n  backend: gpu\n", err: []string{`trainer.backend: "gpu" is not one of cpu, cuda, auto`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.broken {
				withBrokenCUDA(t)
			}
			if tc.env != "" {
				t.Setenv("HONE_TRAINER_BACKEND", tc.env)
			}
			dir := t.TempDir()
			args := []string{"serve", "--train", "--data", filepath.Join(dir, "data"), "--model", modelDir,
				"--engine", "http://127.0.0.1:9", "--listen", "127.0.0.1:0", "--control-listen", "127.0.0.1:0"}
			if tc.yaml != "" {
				cfg := filepath.Join(dir, "hone.yaml")
				if err := os.WriteFile(cfg, []byte(tc.yaml), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", cfg)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var o, e bytes.Buffer
			stdout, stderr = &o, &e
			t.Cleanup(func() { stdout, stderr = os.Stdout, os.Stderr })
			code := run(ctx, args)
			if code == 0 {
				t.Fatalf("hone serve --train started\n%s", e.String())
			}
			for _, w := range tc.err {
				if !strings.Contains(e.String(), w) {
					t.Errorf("stderr does not contain %q:\n%s", w, e.String())
				}
			}
		})
	}
}

// TestOpenTrainerBackend: what trainer.backend opens (cpu as before; auto
// falls back to cpu with a log line, and also when the GPU fails the
// selftest; cuda refuses).
func TestOpenTrainerBackend(t *testing.T) {
	if backends.CUDABuilt() {
		t.Skip("these cases describe a build without -tags cuda")
	}
	cases := []struct {
		backend string
		broken  bool
		want    string // opened backend; "" = refused
		log     string // in the log
		err     string
	}{
		{backend: "cpu", want: "cpu"},
		{backend: "", want: "cpu"},
		{backend: "auto", want: "cpu", log: `msg="trainer.backend auto: training on cpu" cuda_unavailable="backend cuda: backend unavailable: this hone was built without CUDA support`},
		{backend: "auto", broken: true, want: "cpu", log: `the GPU failed hone selftest, training on cpu" failed="[conformance/RMSNorm`},
		{backend: "cuda", err: "built without CUDA support"},
		{backend: "cuda", broken: true, err: "failed: conformance/RMSNorm", log: "running hone selftest before training"},
		{backend: "tpu", err: `trainer.backend "tpu": want cpu, cuda or auto`},
	}
	for _, tc := range cases {
		t.Run(tc.backend+map[bool]string{true: "/broken"}[tc.broken], func(t *testing.T) {
			if tc.broken {
				withBrokenCUDA(t)
			}
			var logBuf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logBuf, nil))
			o, err := openTrainerBackend(context.Background(), tc.backend, log)
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				defer o.Close()
				if o.Name != tc.want {
					t.Fatalf("opened %s, want %s", o.Label(), tc.want)
				}
			}
			if !strings.Contains(logBuf.String(), tc.log) {
				t.Errorf("log does not contain %q:\n%s", tc.log, logBuf.String())
			}
		})
	}
}
