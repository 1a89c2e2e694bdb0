//go:build cgo && !cuda

package engine

import (
	"context"
	"encoding/json"
	"math"
	"net/http/httptest"
	"testing"

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
		opts.ModelDir, opts.ServedModelName = dir, "tiny"
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
