//go:build cuda

package cuda

import (
	"math"
	"testing"

	"github.com/hone-rl/hone/kernels/conformance"
	"github.com/hone-rl/hone/kernels/cpu"
	"github.com/hone-rl/hone/model"
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
// variants' own disagreement where larger, as TestLoRAStepMatchesCPU).
func TestDeviceLoRAStep(t *testing.T) {
	for _, arch := range []string{model.ArchQwen3, model.ArchLlama} {
		ref, err := cpu.NewVariant(1, cpu.VariantGeneric)
		if err != nil {
			t.Fatal(err)
		}
		want := runLoRAStep(t, ref, arch)
		floor := map[string]float64{}
		for _, v := range cpu.Variants() {
			be, err := cpu.NewVariant(1, v)
			if err != nil {
				t.Fatal(err)
			}
			other := runLoRAStep(t, be, arch)
			for name, w := range want.grads {
				floor[name] = math.Max(floor[name], relErr(other.grads[name], w))
			}
		}
		for _, v := range Variants() {
			be, err := New(0, v)
			if err != nil {
				t.Skipf("no CUDA device: %v", err)
			}
			t.Run(arch+"/"+v, func(t *testing.T) {
				defer be.Close()
				got := runLoRAStep(t, be, arch)
				if e := math.Abs(got.loss-want.loss) / math.Abs(want.loss); !(e <= 1e-5) {
					t.Errorf("loss %g, cpu %g (relative %.2g)", got.loss, want.loss, e)
				}
				worst := 0.0
				for name, w := range want.grads {
					e := relErr(got.grads[name], w)
					worst = math.Max(worst, e)
					if !(e <= math.Max(1e-5, 3*floor[name])) {
						t.Errorf("gradient %s: relative error %.2g (cpu variants among themselves: %.2g)", name, e, floor[name])
					}
				}
				t.Logf("loss %.8g (cpu %.8g); worst LoRA gradient relative error %.2g", got.loss, want.loss, worst)
			})
		}
	}
}
