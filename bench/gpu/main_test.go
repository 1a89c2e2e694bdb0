package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hone-rl/hone/kernels"
	"github.com/hone-rl/hone/kernels/backends"
	"github.com/hone-rl/hone/model"
	"github.com/hone-rl/hone/peers"
	"github.com/hone-rl/hone/trainer/memplan"
)

// TestRun: without a GPU the benchmark says "not measured: no GPU" and
// succeeds; -tiny runs the LoRA step end to end on the emulated CUDA
// backend and on the CPU; the Qwen3 shapes are refused off a GPU.
func TestRun(t *testing.T) {
	if backends.CUDABuilt() {
		t.Skip("these cases describe a build without -tags cuda")
	}
	cases := []struct {
		args, env []string
		out, not  []string
		err       string
	}{
		{args: nil, out: []string{"not measured: no GPU (backend cuda: backend unavailable: this hone was built without CUDA support"}},
		{args: []string{"-backend", "cuda"}, out: []string{"not measured: no GPU"}},
		{args: []string{"-backend", "emulated", "-tiny", "-steps", "1", "-tokens", "32"},
			out: []string{"backend emulated/fast on the host (no GPU: no peak)", "tiny   bf16+autocast, sel. ckpt  4/4     32", "MFU n/a",
				"per op class, tiny (bf16+autocast, sel. ckpt), 4 layers: one profiled step", "attention fwd", "attention bwd",
				"GEMM", "norms", "LM head + logprob", "optimizer", "all classes (wall)"}},
		{args: []string{"-backend", "cpu", "-tiny", "-steps", "1", "-tokens", "32"},
			out: []string{"backend cpu", "tiny   f32 ", "-> on cpu: f32\n", "per op class"}},
		{args: []string{"-backend", "cpu", "-tiny", "-steps", "1", "-tokens", "32", "-compare", "-profile=false"},
			out: []string{"tiny   f32 ", "tiny   bf16 "}, not: []string{"per op class"}},
		{args: []string{"-backend", "emulated", "-tiny", "-steps", "1", "-tokens", "32", "-weight-dtype", "float32", "-checkpointing", "off"},
			out: []string{"tiny   f32  "}},
		{args: []string{"-backend", "cpu", "-tiny", "-steps", "1", "-tokens", "32"}, env: []string{"HONE_TRAINER_WEIGHT_DTYPE=bfloat16",
			"HONE_TRAINER_AUTOCAST=on"}, out: []string{"tiny   bf16+autocast  "}},
		{args: []string{"-backend", "cpu", "-tiny", "-weight-dtype", "half"}, err: "weight_dtype"},
		{args: []string{"-backend", "cpu", "-tiny"}, env: []string{"HONE_TRAINER_BOGUS=1"}, err: "HONE_TRAINER_BOGUS"},
		{args: []string{"-backend", "emulated", "-tiny", "-steps", "1", "-tokens", "32", "-lora-autocast", "both", "-profile=false"},
			out: []string{"tiny   bf16+autocast, sel. ckpt ", "tiny   bf16+autocast (LoRA fp32), sel. ckpt "}},
		{args: []string{"-backend", "cpu", "-tiny", "-lora-autocast", "fp8"}, err: `-lora-autocast "fp8"`},
		{args: []string{"-backend", "emulated"}, err: "use it with -tiny"},
		{args: []string{"-backend", "cpu", "-tiny", "-tokens", "1"}, err: "-tokens 1"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var b strings.Builder
			for _, kv := range tc.env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			err := run(context.Background(), tc.args, &b)
			t.Logf("\n%s", b.String())
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.out {
				if !strings.Contains(b.String(), w) {
					t.Errorf("output lacks %q", w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(b.String(), w) {
					t.Errorf("output has %q", w)
				}
			}
		})
	}
}

// TestFewerLayers: when memory says so a shape runs with fewer layers and
// the output says so (here the tiny shape with room for two of its four).
func TestFewerLayers(t *testing.T) {
	be, err := backends.Open(backends.CPU, "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := model.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	fixed, per := memory(shapesOf(c), 32, 16, setting{weights: kernels.F32})
	o := options{backend: "cpu", tiny: true, tokens: 32, steps: 1, rank: 16, freeBytes: (fixed + 2*per + per/2) * 10 / 9}
	topts, err := trainerOptions(o)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := bench(context.Background(), &b, be, o, topts); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", b.String())
	if !strings.Contains(b.String(), "tiny   f32      2/4") || !strings.Contains(b.String(), "2 of 4 layers: all 4 need") {
		t.Errorf("no fewer-layers row or note")
	}
}

// TestFitLayers: Qwen3-8B's shape at 2048 tokens in float32 without
// checkpointing fits an 80 GB GPU whole (~54 GB) and a 40 GB one with fewer
// layers; in bf16 with autocast and checkpointing (what hone serve --train
// runs on a GPU) it fits 40 GB whole and 24 GB in part; the 0.6B shape fits
// all.
func TestFitLayers(t *testing.T) {
	c06, err := model.Preset("qwen3-0.6b-shape")
	if err != nil {
		t.Fatal(err)
	}
	s8, s06 := shapesOf(qwen3Shape8B()), shapesOf(c06)
	f32, gpuRun := setting{weights: kernels.F32}, setting{weights: kernels.BF16, autocast: true, checkpoint: model.CheckpointFull}
	sel := setting{weights: kernels.BF16, autocast: true, checkpoint: model.CheckpointSelective}
	for _, tc := range []struct {
		name     string
		s        memplan.Shapes
		set      setting
		free     int64
		min, max int
	}{
		{"8b on 80 GB", s8, f32, 80e9, 36, 36},
		{"8b on 40 GB", s8, f32, 40e9, 20, 30},
		{"8b on 4 GB", s8, f32, 4e9, 0, 0},
		{"0.6b on 24 GB", s06, f32, 24e9, 28, 28},
		{"no limit (host)", s8, f32, 0, 36, 36},
		{"8b bf16 ckpt on 40 GB", s8, gpuRun, 40e9, 36, 36},
		{"8b bf16 ckpt on 16 GB", s8, gpuRun, 16e9, 10, 30},
		{"0.6b bf16 ckpt on 8 GB", s06, gpuRun, 8e9, 28, 28},
		{"8b bf16 selective on 80 GB", s8, sel, 80e9, 36, 36},
		{"8b bf16 selective on 40 GB", s8, sel, 40e9, 36, 36},
		{"8b bf16 selective on 24 GB", s8, sel, 24e9, 10, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, need := fitLayers(tc.s, 2048, 16, tc.set, tc.free)
			if n < tc.min || n > tc.max {
				t.Fatalf("%d layers fit (need %.1f GB for all), want %d..%d", n, float64(need)/1e9, tc.min, tc.max)
			}
			t.Logf("%d of %d layers; %.1f GB for all", n, tc.s.Layers, float64(need)/1e9)
		})
	}
	// 0.6B, 2048 tokens: about 4 FLOPs per weight and token (frozen base)
	// plus attention; between 4N and 6N per token.
	n := float64(s06.Params())
	if f := flops(s06, 2048, 16) / 2048; f < 4*n || f > 6*n {
		t.Errorf("0.6B: %.3g FLOPs/token, want between 4N=%.3g and 6N=%.3g", f, 4*n, 6*n)
	}
}

// TestShapesFlag: -shapes picks the Qwen3 shapes by name.
func TestShapesFlag(t *testing.T) {
	got, err := shapes(options{shapes: "qwen3-8b"})
	if err != nil || len(got) != 1 || got[0].name != "qwen3-8b" {
		t.Fatalf("%v %v", got, err)
	}
	if got, err := shapes(options{}); err != nil || len(got) != 2 {
		t.Fatalf("default: %v %v", got, err)
	}
	if _, err := shapes(options{shapes: "llama"}); err == nil || !strings.Contains(err.Error(), `unknown shape "llama"`) {
		t.Fatalf("unknown: %v", err)
	}
}

// TestPEFTAnchorTiny runs the transformers + PEFT anchor the GPU bundle
// ships (peft_anchor.py) on its tiny shape on the CPU with the peers'
// torch: one JSON row per dtype, bf16-autocast included, each with a
// positive step time. A check of the script, not a figure.
func TestPEFTAnchorTiny(t *testing.T) {
	py, err := peers.Python()
	if err != nil {
		if peers.Required() {
			t.Fatalf("HONE_REQUIRE_PEERS=1: %v", err)
		}
		t.Skip(err)
	}
	out := filepath.Join(t.TempDir(), "rows.jsonl")
	cmd := exec.Command(py, "peft_anchor.py", "--tiny", "--steps", "1", "--tokens", "64", "--json", out)
	b, err := cmd.CombinedOutput()
	t.Logf("%s", b)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r struct {
			Dtype          string  `json:"dtype"`
			SecondsPerStep float64 `json:"seconds_per_step"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("row %q: %v", line, err)
		}
		if !(r.SecondsPerStep > 0) {
			t.Errorf("row %q: no step time", line)
		}
		got = append(got, r.Dtype)
	}
	if want := []string{"bf16", "bf16-autocast", "fp32"}; !slices.Equal(got, want) {
		t.Errorf("rows %v, want %v", got, want)
	}
}
