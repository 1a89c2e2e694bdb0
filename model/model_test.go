package model

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hone-rl/hone/kernels"
	"github.com/hone-rl/hone/kernels/cpu"
)

// testConfig is a small config of the given architecture with GQA.
func testConfig(arch string) *Config {
	return &Config{Architecture: arch, VocabSize: 61, HiddenSize: 32, IntermediateSize: 48, NumLayers: 2,
		NumHeads: 4, NumKVHeads: 2, HeadDim: 12, MaxPositions: 128, RMSNormEps: 1e-6, RopeTheta: 10000,
		TieWordEmbeddings: arch == ArchQwen3, QKNorm: arch == ArchQwen3, AttentionBias: arch != ArchQwen3}
}

func newTestModel(t *testing.T, arch string) *Model {
	t.Helper()
	m, err := New(testConfig(arch), cpu.New(2), 7)
	if err != nil {
		t.Fatal(err)
	}
	// Larger weights than the 0.02 init so that layers matter.
	rng := rand.New(rand.NewPCG(9, 9))
	for _, p := range m.Params() {
		d := make([]float32, p.Tensor.Len())
		m.be.Download(d, p.Tensor)
		for i := range d {
			d[i] += float32(0.2 * rng.NormFloat64())
		}
		m.be.Copy(p.Tensor, m.be.Upload(d, p.Tensor.Shape()...))
	}
	return m
}

func randTokens(rng *rand.Rand, n, vocab int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(rng.IntN(vocab))
	}
	return out
}

func closeRows(t *testing.T, what string, got, want []float32, rel float64) {
	t.Helper()
	var num, den float64
	for i := range want {
		d := float64(got[i] - want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	if len(got) != len(want) || !(math.Sqrt(num) <= rel*math.Sqrt(den)+1e-6) {
		t.Fatalf("%s: relative error %g (len %d vs %d)", what, math.Sqrt(num/den), len(got), len(want))
	}
}

// TestDecodeMatchesFullForward checks that prefill + token-by-token decode
// through the cache gives the logits of one full pass, for each
// architecture, and that mixed batches give the same as single steps.
func TestDecodeMatchesFullForward(t *testing.T) {
	ctx := context.Background()
	for _, arch := range []string{ArchQwen3, ArchQwen2, ArchLlama} {
		t.Run(arch, func(t *testing.T) {
			m := newTestModel(t, arch)
			rng := rand.New(rand.NewPCG(1, 1))
			toks := randTokens(rng, 20, m.cfg.VocabSize)
			full, err := m.Logits(ctx, toks, nil)
			if err != nil {
				t.Fatal(err)
			}
			c := m.NewCache()
			got, err := m.Forward(ctx, []Step{{Tokens: toks[:7], Cache: c}})
			if err != nil {
				t.Fatal(err)
			}
			closeRows(t, "prefill", got[0], full[6], 1e-5)
			for i := 7; i < len(toks); i++ {
				got, err = m.Forward(ctx, []Step{{Tokens: toks[i : i+1], Cache: c}})
				if err != nil {
					t.Fatal(err)
				}
				closeRows(t, "decode", got[0], full[i], 1e-5)
			}
			if c.Len() != len(toks) {
				t.Fatalf("cache len %d", c.Len())
			}
			// Prefix reuse: truncate and decode again.
			c.Truncate(10)
			got, err = m.Forward(ctx, []Step{{Tokens: toks[10:12], Cache: c}})
			if err != nil {
				t.Fatal(err)
			}
			closeRows(t, "after truncate", got[0], full[11], 1e-5)
		})
	}
}

func TestBatchedForwardMatchesSingle(t *testing.T) {
	ctx := context.Background()
	m := newTestModel(t, ArchQwen3)
	ad, err := NewAdapter(m, "a", AdapterConfig{Rank: 4, Alpha: 8}, 3)
	if err != nil {
		t.Fatal(err)
	}
	randomizeB(t, m, ad)
	ad2, err := NewAdapter(m, "b", AdapterConfig{Rank: 2, Alpha: 2, Targets: []Module{ModV, ModUp}}, 4)
	if err != nil {
		t.Fatal(err)
	}
	randomizeB(t, m, ad2)
	rng := rand.New(rand.NewPCG(2, 2))
	seqs := [][]int32{randTokens(rng, 9, 61), randTokens(rng, 1, 61), randTokens(rng, 14, 61), randTokens(rng, 3, 61), randTokens(rng, 20, 61)}
	adapters := []*Adapter{nil, ad, ad, ad2, nil}
	var want [][]float32
	for i, s := range seqs {
		l, err := m.Logits(ctx, s, adapters[i])
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, l[len(l)-1])
	}
	// Prefill some sequences partly first so the batch mixes decode and prefill.
	var steps []Step
	for i, s := range seqs {
		c := m.NewCache()
		cut := len(s) - 1
		if i%2 == 0 && cut > 0 {
			if _, err := m.Forward(ctx, []Step{{Tokens: s[:cut], Cache: c, Adapter: adapters[i]}}); err != nil {
				t.Fatal(err)
			}
			steps = append(steps, Step{Tokens: s[cut:], Cache: c, Adapter: adapters[i]})
			continue
		}
		steps = append(steps, Step{Tokens: s, Cache: c, Adapter: adapters[i]})
	}
	got, err := m.Forward(ctx, steps)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		closeRows(t, "batched", got[i], want[i], 1e-5)
	}
}

// randomizeB makes an adapter non-trivial (PEFT initialises B to zero).
func randomizeB(t *testing.T, m *Model, a *Adapter) {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 5))
	for _, p := range a.Params() {
		d := make([]float32, p.Tensor.Len())
		for i := range d {
			d[i] = float32(0.3 * rng.NormFloat64())
		}
		m.be.Copy(p.Tensor, m.be.Upload(d, p.Tensor.Shape()...))
	}
}

func TestAdapterChangesAndRoundTrips(t *testing.T) {
	ctx := context.Background()
	m := newTestModel(t, ArchQwen2)
	toks := []int32{1, 5, 9, 33, 2}
	base, err := m.Logits(ctx, toks, nil)
	if err != nil {
		t.Fatal(err)
	}
	ad, err := NewAdapter(m, "a", AdapterConfig{Rank: 2, Alpha: 4, Targets: []Module{ModQ, ModV, ModDown}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	zero, err := m.Logits(ctx, toks, ad)
	if err != nil {
		t.Fatal(err)
	}
	closeRows(t, "zero-B adapter is identity", zero[4], base[4], 1e-6)
	randomizeB(t, m, ad)
	with, err := m.Logits(ctx, toks, ad)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(with[4], base[4]); d < 1e-3 {
		t.Fatalf("adapter changed logits by only %g", d)
	}
	dir := filepath.Join(t.TempDir(), "adapter")
	if err := ad.Save(dir); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadAdapter(dir, m)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Rank != 2 || loaded.Scale != 2 || len(loaded.Targets) != 3 {
		t.Fatalf("loaded adapter %+v", loaded)
	}
	again, err := m.Logits(ctx, toks, loaded)
	if err != nil {
		t.Fatal(err)
	}
	closeRows(t, "reloaded adapter", again[4], with[4], 0)
	after, err := m.Logits(ctx, toks, nil)
	if err != nil {
		t.Fatal(err)
	}
	closeRows(t, "base after adapters", after[4], base[4], 0)
}

func maxDiff(a, b []float32) float64 {
	var d float64
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

func TestSaveLoadRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, arch := range []string{ArchQwen3, ArchQwen2, ArchLlama} {
		m := newTestModel(t, arch)
		dir := t.TempDir()
		if err := m.Save(dir); err != nil {
			t.Fatal(err)
		}
		m2, err := Load(dir, cpu.New(1))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := m2.Config(), m.Config(); got.Architecture != arch || got.NumParams() != want.NumParams() ||
			got.AttentionBias != want.AttentionBias || got.QKNorm != want.QKNorm || got.TieWordEmbeddings != want.TieWordEmbeddings {
			t.Fatalf("reloaded config %+v, want %+v", got, want)
		}
		toks := []int32{3, 4, 5}
		a, _ := m.Logits(ctx, toks, nil)
		b, err := m2.Logits(ctx, toks, nil)
		if err != nil {
			t.Fatal(err)
		}
		closeRows(t, arch+" reloaded", b[2], a[2], 0)
	}
}

func TestForwardRejectsBadSteps(t *testing.T) {
	ctx := context.Background()
	m := newTestModel(t, ArchLlama)
	other := newTestModel(t, ArchLlama)
	c := m.NewCache()
	long := make([]int32, 129)
	for _, tc := range []struct {
		name  string
		steps []Step
	}{
		{"nil cache", []Step{{Tokens: []int32{1}}}},
		{"empty tokens", []Step{{Cache: c}}},
		{"token out of range", []Step{{Tokens: []int32{61}, Cache: c}}},
		{"negative token", []Step{{Tokens: []int32{-1}, Cache: c}}},
		{"too long", []Step{{Tokens: long, Cache: c}}},
		{"foreign cache", []Step{{Tokens: []int32{1}, Cache: other.NewCache()}}},
		{"same cache twice", []Step{{Tokens: []int32{1}, Cache: c}, {Tokens: []int32{2}, Cache: c}}},
	} {
		if _, err := m.Forward(ctx, tc.steps); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	if c.Len() != 0 {
		t.Fatalf("failed steps grew the cache to %d", c.Len())
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.Forward(cctx, []Step{{Tokens: []int32{1}, Cache: c}}); err == nil || c.Len() != 0 {
		t.Fatalf("cancelled forward: err %v, cache %d", err, c.Len())
	}
}

// TestLoadSharded splits a saved model across two safetensors files with a
// Hugging Face index and loads it back.
func TestLoadSharded(t *testing.T) {
	m := newTestModel(t, ArchLlama)
	dir := t.TempDir()
	if err := WriteConfig(dir, m.Config()); err != nil {
		t.Fatal(err)
	}
	shards := []map[string]HostTensor{{}, {}}
	index := map[string]string{}
	for i, p := range m.Params() {
		shards[i%2][p.Name] = download(m.be, p.Tensor)
		index[p.Name] = []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}[i%2]
	}
	for i, sh := range shards {
		name := []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}[i]
		if err := WriteSafetensors(filepath.Join(dir, name), sh, nil); err != nil {
			t.Fatal(err)
		}
	}
	raw, _ := json.Marshal(map[string]any{"metadata": map[string]any{}, "weight_map": index})
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	m2, err := Load(dir, cpu.New(1))
	if err != nil {
		t.Fatal(err)
	}
	toks := []int32{1, 2, 3}
	a, _ := m.Logits(context.Background(), toks, nil)
	b, err := m2.Logits(context.Background(), toks, nil)
	if err != nil {
		t.Fatal(err)
	}
	closeRows(t, "sharded", b[2], a[2], 0)
	os.Remove(filepath.Join(dir, "model-00002-of-00002.safetensors"))
	if _, err := Load(dir, cpu.New(1)); err == nil {
		t.Fatal("missing shard accepted")
	}
}

// TestConcurrentForward backs the documented guarantee: Forward calls on
// distinct caches may run at once (run with -race).
func TestConcurrentForward(t *testing.T) {
	ctx := context.Background()
	m := newTestModel(t, ArchQwen3)
	toks := []int32{4, 8, 15, 16, 23, 42}
	want, err := m.Logits(ctx, toks, nil)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 4)
	got := make([][]float32, 4)
	for g := range got {
		go func() {
			c := m.NewCache()
			defer c.Free()
			out, err := m.Forward(ctx, []Step{{Tokens: toks, Cache: c}})
			if err == nil {
				got[g] = out[0]
			}
			errs <- err
		}()
	}
	for range got {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range got {
		closeRows(t, "concurrent", g, want[len(toks)-1], 1e-6)
	}
}

// TestLoadRejectsUnexpectedTensors: a weight the config does not describe
// (here an MLP bias) must fail the load rather than be ignored.
func TestLoadRejectsUnexpectedTensors(t *testing.T) {
	m := newTestModel(t, ArchQwen3)
	dir := t.TempDir()
	if err := WriteConfig(dir, m.Config()); err != nil {
		t.Fatal(err)
	}
	host := map[string]HostTensor{"model.layers.0.mlp.up_proj.bias": {Shape: []int{48}, Data: make([]float32, 48)}}
	for _, p := range m.Params() {
		host[p.Name] = download(m.be, p.Tensor)
	}
	if err := WriteSafetensors(filepath.Join(dir, "model.safetensors"), host, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir, cpu.New(1)); err == nil || !strings.Contains(err.Error(), "up_proj.bias") {
		t.Fatalf("error %v", err)
	}
}

// TestBF16Weights: with the base matrices in bf16 the model decodes as it
// prefills (the KV cache path), its logits stay close to the float32
// model's (the storage rounding, 2^-8 relative per weight, not more), the
// embedding stays tied, and Save writes the rounded weights as float32.
func TestBF16Weights(t *testing.T) {
	ctx := context.Background()
	for _, arch := range []string{ArchQwen3, ArchLlama} {
		t.Run(arch, func(t *testing.T) {
			m := newTestModel(t, arch)
			rng := rand.New(rand.NewPCG(3, 3))
			toks := randTokens(rng, 12, m.cfg.VocabSize)
			f32, err := m.Logits(ctx, toks, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.SetWeightDType(kernels.BF16); err != nil {
				t.Fatal(err)
			}
			if m.embed.DType() != kernels.BF16 || m.layers[1].w[ModDown].DType() != kernels.BF16 || m.norm.DType() != kernels.F32 {
				t.Fatalf("dtypes: embed %v down %v norm %v", m.embed.DType(), m.layers[1].w[ModDown].DType(), m.norm.DType())
			}
			if m.cfg.TieWordEmbeddings != (m.lmHead == m.embed) {
				t.Fatalf("tied embeddings untied")
			}
			full, err := m.Logits(ctx, toks, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := range full {
				closeRows(t, "bf16 against float32 weights", full[i], f32[i], 3e-2)
			}
			c := m.NewCache()
			got, err := m.Forward(ctx, []Step{{Tokens: toks[:5], Cache: c}})
			if err != nil {
				t.Fatal(err)
			}
			closeRows(t, "bf16 prefill", got[0], full[4], 1e-5)
			for i := 5; i < len(toks); i++ {
				if got, err = m.Forward(ctx, []Step{{Tokens: toks[i : i+1], Cache: c}}); err != nil {
					t.Fatal(err)
				}
				closeRows(t, "bf16 decode", got[0], full[i], 1e-5)
			}
			dir := t.TempDir()
			if err := m.Save(dir); err != nil {
				t.Fatal(err)
			}
			back, err := Load(dir, m.be)
			if err != nil {
				t.Fatal(err)
			}
			again, err := back.Logits(ctx, toks, nil)
			if err != nil {
				t.Fatal(err)
			}
			closeRows(t, "saved bf16 weights, loaded as float32", again[len(toks)-1], full[len(toks)-1], 1e-5)
			// LoadT uploads the matrices as bf16 directly: the same rounded
			// weights as SetWeightDType, so the same logits.
			direct, err := LoadT(dir, m.be, kernels.BF16)
			if err != nil {
				t.Fatal(err)
			}
			if direct.embed.DType() != kernels.BF16 || direct.layers[0].w[ModQ].DType() != kernels.BF16 ||
				direct.layers[0].attnNorm.DType() != kernels.F32 {
				t.Fatalf("LoadT dtypes: embed %v q %v norm %v", direct.embed.DType(), direct.layers[0].w[ModQ].DType(),
					direct.layers[0].attnNorm.DType())
			}
			viaLoad, err := direct.Logits(ctx, toks, nil)
			if err != nil {
				t.Fatal(err)
			}
			closeRows(t, "LoadT bf16", viaLoad[len(toks)-1], full[len(toks)-1], 1e-6)
		})
	}
}
