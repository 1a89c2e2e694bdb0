package main

import (
	"context"
	"strings"
	"testing"

	"github.com/hone-rl/hone/kernels/backends"
	"github.com/hone-rl/hone/model"
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
		args []string
		out  []string
		err  string
	}{
		{args: nil, out: []string{"not measured: no GPU (backend cuda: backend unavailable: this hone was built without CUDA support"}},
		{args: []string{"-backend", "cuda"}, out: []string{"not measured: no GPU"}},
		{args: []string{"-backend", "emulated", "-tiny", "-steps", "1", "-tokens", "32"},
			out: []string{"backend emulated/fast on the host (no GPU: no peak)", "tiny   4/4     32", "MFU n/a"}},
		{args: []string{"-backend", "cpu", "-tiny", "-steps", "1", "-tokens", "32"}, out: []string{"backend cpu", "tiny"}},
		{args: []string{"-backend", "emulated"}, err: "use it with -tiny"},
		{args: []string{"-backend", "cpu", "-tiny", "-tokens", "1"}, err: "-tokens 1"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var b strings.Builder
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
	fixed, per := memory(shapesOf(c), 32, 16)
	o := options{backend: "cpu", tiny: true, tokens: 32, steps: 1, rank: 16, freeBytes: (fixed + 2*per + per/2) * 10 / 9}
	var b strings.Builder
	if err := bench(context.Background(), &b, be, o); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", b.String())
	if !strings.Contains(b.String(), "tiny   2/4") || !strings.Contains(b.String(), "2 of 4 layers: all 4 need") {
		t.Errorf("no fewer-layers row or note")
	}
}

// TestFitLayers: Qwen3-8B's shape at 2048 tokens in float32 fits an 80 GB
// GPU whole (~54 GB) and a 40 GB one with fewer layers; the 0.6B shape
// fits both.
func TestFitLayers(t *testing.T) {
	c06, err := model.Preset("qwen3-0.6b-shape")
	if err != nil {
		t.Fatal(err)
	}
	s8, s06 := shapesOf(qwen3Shape8B()), shapesOf(c06)
	for _, tc := range []struct {
		name     string
		s        memplan.Shapes
		free     int64
		min, max int
	}{
		{"8b on 80 GB", s8, 80e9, 36, 36},
		{"8b on 40 GB", s8, 40e9, 20, 30},
		{"8b on 4 GB", s8, 4e9, 0, 0},
		{"0.6b on 24 GB", s06, 24e9, 28, 28},
		{"no limit (host)", s8, 0, 36, 36},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, need := fitLayers(tc.s, 2048, 16, tc.free)
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
