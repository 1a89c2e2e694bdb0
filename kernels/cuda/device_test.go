//go:build cuda

package cuda

import (
	"context"
	"testing"

	"github.com/hone-rl/hone/kernels/conformance"
	"github.com/hone-rl/hone/kernels/selftest"
)

// TestDevice runs the conformance suite on the first GPU, for every kernel
// variant, when there is one; without a device or driver it checks that
// the backend reports that as an error (the runtime and cuBLAS loaded and
// answered) and skips.
func TestDevice(t *testing.T) {
	for _, v := range Variants() {
		be, err := New(0, v)
		if err != nil {
			t.Skipf("no CUDA device: %v", err)
		}
		t.Run(v, func(t *testing.T) {
			defer be.Close()
			conformance.Run(t, be)
		})
	}
}

// TestDeviceLoRAStep runs the LoRA-step parity on the first GPU: a step of
// a 2-layer Qwen3 and Llama on the device against the CPU backend's generic
// kernels, loss and every LoRA gradient within 1e-5 relative (3x the CPU
// variants' own disagreement where larger, as TestLoRAStepMatchesCPU), with
// kernels/selftest's step and tolerances (what hone selftest runs).
func TestDeviceLoRAStep(t *testing.T) {
	ctx := context.Background()
	for _, arch := range selftest.Archs {
		ref, err := selftest.CPUReference(ctx, arch)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range Variants() {
			be, err := New(0, v)
			if err != nil {
				t.Skipf("no CUDA device: %v", err)
			}
			t.Run(arch+"/"+v, func(t *testing.T) {
				defer be.Close()
				got, err := selftest.LoRAStep(ctx, be, arch)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range ref.Compare(got) {
					if !r.Pass {
						t.Errorf("%s: %s", r.Name, r.Failure)
					}
					t.Logf("%s: relative error %.2g (tolerance %.2g, worst %s)", r.Name, r.MaxErr, r.Tol, r.Worst)
				}
			})
		}
	}
}
