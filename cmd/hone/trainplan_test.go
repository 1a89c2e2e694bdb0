package main

import (
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/hone-rl/hone/kernels/backends"
	"github.com/hone-rl/hone/trainer"
)

// TestFitMicroBatches: on a GPU backend the trainer's micro-batch budget
// follows the memory plan (bf16 or float32 base weights, the engines' share): a
// budget the plan allows stays, one above it is lowered, a GPU too small
// for the weights refuses with the numbers; the CPU backend is left alone.
func TestFitMicroBatches(t *testing.T) {
	dir := writeModel(t, "qwen3-8b")
	defer func(f func() (int64, error)) { gpuMemory = f }(gpuMemory)
	for _, tc := range []struct {
		name      string
		dtype     string // trainer.weight_dtype; "" = auto (bfloat16 on the GPU); "off": auto, trainer.autocast off
		be        backends.Opened
		gpu       int64
		share     float64
		tokens    int
		want, err string
	}{
		{"cpu untouched", "", backends.Opened{Name: backends.CPU}, 0, 0.45, 8192, "8192", ""},
		{"80 GB keeps 8192", "", backends.Opened{Name: "cuda"}, 80e9, 0.45, 8192, "8192", ""},
		{"80 GB lowers 65536", "", backends.Opened{Name: "cuda"}, 80e9, 0.3, 65536, "<65536", ""},
		{"80 GB lowers 32768", "", backends.Opened{Name: "cuda"}, 80e9, 0.45, 32768, "<32768", ""},
		{"16 GB refuses", "", backends.Opened{Name: "cuda"}, 16e9, 0.45, 8192, "", "refusing to train"},
		{"float32 weights on 80 GB lower 16384", "float32", backends.Opened{Name: "cuda"}, 80e9, 0.45, 16384, "<16384", ""},
		// Exact mode counts the widened weight, autocast its bf16 activation
		// copy; either way 8192 tokens fit on 80 GB.
		{"autocast off keeps 8192", "off", backends.Opened{Name: "cuda"}, 80e9, 0.45, 8192, "8192", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gpuMemory = func() (int64, error) { return tc.gpu, nil }
			o := trainer.DefaultOptions()
			o.MicroBatchTokens, o.EngineGPUShare, o.LoRA.Rank = tc.tokens, tc.share, 16
			switch tc.dtype {
			case "":
			case "off":
				o.Autocast = "off"
			default:
				o.WeightDType = tc.dtype
			}
			err := fitMicroBatches(&o, tc.be, dir, slog.New(slog.DiscardHandler))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "GB") {
					t.Fatalf("err %v, want %q with the numbers", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want[0] == '<':
				if o.MicroBatchTokens >= tc.tokens || o.MicroBatchTokens <= 0 {
					t.Errorf("micro_batch_tokens %d, want lowered below %d", o.MicroBatchTokens, tc.tokens)
				}
			case tc.want != "" && strconv.Itoa(o.MicroBatchTokens) != tc.want:
				t.Errorf("micro_batch_tokens %d, want %s", o.MicroBatchTokens, tc.want)
			}
		})
	}
}

// TestFitMicroBatchesCheckpointing: auto checkpointing stays selective
// where a micro-batch fits with it (Qwen3-8B, 2048 tokens, a whole 80 GB
// GPU) and becomes full where it would not (8192 tokens beside an engine at
// 0.45); an explicit selective is never changed.
func TestFitMicroBatchesCheckpointing(t *testing.T) {
	dir := writeModel(t, "qwen3-8b")
	defer func(f func() (int64, error)) { gpuMemory = f }(gpuMemory)
	gpuMemory = func() (int64, error) { return 80e9, nil }
	for _, tc := range []struct {
		setting string
		share   float64
		tokens  int
		want    string
	}{
		{"auto", 0, 2048, "auto"},
		{"auto", 0.45, 8192, "on"},
		{"selective", 0.45, 4096, "selective"},
	} {
		o := trainer.DefaultOptions()
		o.MicroBatchTokens, o.EngineGPUShare, o.LoRA.Rank, o.ActivationCheckpointing = tc.tokens, tc.share, 16, tc.setting
		if err := fitMicroBatches(&o, backends.Opened{Name: "cuda"}, dir, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
		if o.ActivationCheckpointing != tc.want {
			t.Errorf("%s, %d tokens, engine %.2f: activation_checkpointing %q, want %q", tc.setting, tc.tokens, tc.share,
				o.ActivationCheckpointing, tc.want)
		}
	}
}
