package engine

import (
	"context"
	"testing"

	"github.com/hone-rl/hone/kernels"
)

// TestLoadModelAutocast: engine_embedded.autocast on the CPU backend: auto
// leaves it off (float32 weights, and bf16 ones too: auto autocasts on a
// GPU only), on turns it on, off keeps it off.
func TestLoadModelAutocast(t *testing.T) {
	dir := tinyModelDir(t)
	for _, tc := range []struct {
		weights, autocast string
		wantDType         kernels.DType
		want              bool
	}{
		{"auto", "auto", kernels.F32, false},
		{"bfloat16", "auto", kernels.BF16, false},
		{"bfloat16", "on", kernels.BF16, true},
		{"bfloat16", "off", kernels.BF16, false},
	} {
		t.Run(tc.weights+"/"+tc.autocast, func(t *testing.T) {
			parts, err := loadModel(context.Background(), dir, 1, nil, tc.weights, tc.autocast)
			if err != nil {
				t.Fatal(err)
			}
			m := parts.lm.(*modelLM).m
			if got := m.Autocast(); got != tc.want {
				t.Errorf("autocast %v, want %v", got, tc.want)
			}
			if p := m.Params()[0]; p.Tensor.DType() != tc.wantDType {
				t.Errorf("%s is %v, want %v", p.Name, p.Tensor.DType(), tc.wantDType)
			}
		})
	}
}
