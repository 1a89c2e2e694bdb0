//go:build cgo && !cuda

package engine

import (
	"context"
	"encoding/json"
	"math"
	"net/http/httptest"
	"testing"

	"github.com/hone-rl/hone/kernels"
	"github.com/hone-rl/hone/kernels/cuda"
)

// TestEngineOnEmulatedCUDA: the embedded engine runs on the CUDA backend
// (its kernels compiled for the host against the shim): the tiny model's
// greedy completions, with a LoRA adapter loaded at run time, are the CPU
// backend's tokens with log-probabilities within 1e-3, and a weights reload
// swaps the model on the device.
func TestEngineOnEmulatedCUDA(t *testing.T) {
	dir := tinyModelDir(t)
	dev, err := cuda.NewEmulated(cuda.VariantFast)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	type answer struct {
		Choices []struct {
			Text     string `json:"text"`
			Logprobs struct {
				TokenLogprobs []float64 `json:"token_logprobs"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	run := func(device bool) []answer {
		opts := DefaultOptions()
		opts.ModelDir, opts.ServedModelName, opts.WeightDType = dir, "tiny", "float32"
		if device {
			opts.Device = dev
		}
		e, err := New(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(e.Handler())
		defer func() { srv.Close(); e.Close() }()
		if st, body := post(t, srv.URL+"/v1/load_lora_adapter", map[string]any{"lora_name": "a", "lora_path": dir + "/adapter"}); st != 200 {
			t.Fatalf("load adapter: %d %s", st, body)
		}
		var out []answer
		for _, m := range []string{"tiny", "a"} {
			st, body := post(t, srv.URL+"/v1/completions", map[string]any{"model": m, "prompt": "Ann has 6 boxes of 7 pens.",
				"max_tokens": 12, "temperature": 0, "logprobs": 1})
			if st != 200 {
				t.Fatalf("%s: %d %s", m, st, body)
			}
			var a answer
			if err := json.Unmarshal(body, &a); err != nil || len(a.Choices) != 1 {
				t.Fatalf("%s: %s", m, body)
			}
			out = append(out, a)
		}
		if device {
			if st, body := post(t, srv.URL+"/collective_rpc", map[string]any{"method": "reload_weights"}); st != 200 {
				t.Fatalf("reload weights: %d %s", st, body)
			}
			if err := dev.Err(); err != nil {
				t.Fatalf("device error after reload: %v", err)
			}
		}
		return out
	}
	cpuAns, devAns := run(false), run(true)
	for i := range cpuAns {
		c, d := cpuAns[i].Choices[0], devAns[i].Choices[0]
		if c.Text != d.Text || len(c.Logprobs.TokenLogprobs) != len(d.Logprobs.TokenLogprobs) {
			t.Fatalf("call %d: cpu %q, emulated cuda %q", i, c.Text, d.Text)
		}
		for j := range c.Logprobs.TokenLogprobs {
			if math.Abs(c.Logprobs.TokenLogprobs[j]-d.Logprobs.TokenLogprobs[j]) > 1e-3 {
				t.Errorf("call %d token %d: logprob %g on cpu, %g on emulated cuda", i, j, c.Logprobs.TokenLogprobs[j], d.Logprobs.TokenLogprobs[j])
			}
		}
	}
	if cpuAns[0].Choices[0].Text == cpuAns[1].Choices[0].Text {
		t.Log("the adapter changed nothing in 12 greedy tokens")
	}
}

// TestEngineDeviceSampling: on a device backend (base weights bf16, the
// default there) the engine draws tokens
// next to the logits (kernels.Sampler) when no host-only processor
// applies: a seeded request draws the same text again, alone or batched
// beside another, other seeds draw other text, and a request with a
// repetition penalty or a top_k over the device's cap goes through the
// downloaded logits instead.
func TestEngineDeviceSampling(t *testing.T) {
	dev, err := cuda.NewEmulated(cuda.VariantFast)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	opts := DefaultOptions()
	opts.ModelDir, opts.ServedModelName, opts.Device = tinyModelDir(t), "tiny", dev
	e, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e.Handler())
	defer func() { srv.Close(); e.Close() }()
	complete := func(seed int, extra map[string]any) string {
		req := map[string]any{"model": "tiny", "prompt": "Ann has", "max_tokens": 16, "temperature": 1, "top_k": 20,
			"top_p": 0.9, "seed": seed}
		for k, v := range extra {
			req[k] = v
		}
		st, body := post(t, srv.URL+"/v1/completions", req)
		if st != 200 {
			t.Fatalf("%d %s", st, body)
		}
		var a struct {
			Choices []struct{ Text string } `json:"choices"`
		}
		if err := json.Unmarshal(body, &a); err != nil || len(a.Choices) != 1 {
			t.Fatalf("%s", body)
		}
		return a.Choices[0].Text
	}
	lm := e.sched.lm.(*modelLM)
	for _, p := range lm.m.Params() {
		if want := p.Tensor.Shape(); len(want) == 2 && p.Tensor.DType() != kernels.BF16 {
			t.Fatalf("weight_dtype auto on a device: %s is %v, want bf16", p.Name, p.Tensor.DType())
		}
	}
	if !lm.m.Autocast() {
		t.Fatal("autocast auto with bf16 weights on a device: off, want on")
	}
	first := complete(7, nil)
	if again := complete(7, nil); again != first {
		t.Errorf("seed 7 drew %q, then %q", first, again)
	}
	others := map[string]bool{}
	for seed := 8; seed < 12; seed++ {
		others[complete(seed, nil)] = true
	}
	if len(others) < 2 {
		t.Errorf("four seeds drew %v", others)
	}
	done := make(chan string)
	go func() { done <- complete(99, map[string]any{"max_tokens": 40}) }()
	if batched := complete(7, nil); batched != first {
		t.Errorf("seed 7 beside another request drew %q, alone %q", batched, first)
	}
	<-done
	draws := e.sched.deviceDraws.Load()
	if draws == 0 {
		t.Fatal("no step drew on the device")
	}
	for _, extra := range []map[string]any{{"repetition_penalty": 1.3}, {"top_k": kernels.MaxSampleCandidates + 1}} {
		complete(7, extra)
		if e.sched.deviceDraws.Load() != draws {
			t.Errorf("a request with %v drew on the device", extra)
		}
	}
}
