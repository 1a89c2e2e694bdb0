//go:build cgo && !cuda

package cuda

import (
	"context"
	"math"
	"testing"

	"github.com/hone-rl/hone/kernels/selftest"
)

// TestLoRAStepMatchesCPU: a LoRA step (forward, backward, AdamW) of a
// 2-layer transformer on the emulated CUDA backend equals the CPU
// backend's (its plain generic variant): the loss within 1e-5 relative, and
// every LoRA gradient and every adapter tensor after AdamW within 1e-5
// relative, or within 3 times the disagreement between the CPU backend's
// own kernel variants on that tensor when that is larger. That
// disagreement is the float32 noise floor of the problem: on the Llama
// problem the CPU's AVX2 and generic kernels already differ by up to ~2e-5
// on layer 0's attention LoRA gradients (sums in other orders, amplified
// through two layers), so no float32 implementation can be held to 1e-5
// there; the test logs both numbers. The step and the tolerances are
// kernels/selftest's, the same code hone selftest runs on a GPU.
func TestLoRAStepMatchesCPU(t *testing.T) {
	ctx := context.Background()
	for _, arch := range selftest.Archs {
		ref, err := selftest.CPUReference(ctx, arch)
		if err != nil {
			t.Fatal(err)
		}
		want := ref.Want
		for _, v := range Variants() {
			t.Run(arch+"/"+v, func(t *testing.T) {
				be, err := NewEmulated(v)
				if err != nil {
					t.Fatal(err)
				}
				defer be.Close()
				got, err := selftest.LoRAStep(ctx, be, arch)
				if err != nil {
					t.Fatal(err)
				}
				if e := math.Abs(got.Loss-want.Loss) / math.Abs(want.Loss); !(e <= selftest.ParityTol) {
					t.Errorf("loss %g, cpu %g (relative %.2g)", got.Loss, want.Loss, e)
				}
				if len(got.Grads) != len(want.Grads) || len(want.Grads) == 0 {
					t.Fatalf("%d gradients, cpu %d", len(got.Grads), len(want.Grads))
				}
				worst, worstFloor, over := 0.0, 0.0, 0
				for name, w := range want.Grads {
					e := selftest.RelErr(got.Grads[name], w)
					worst = math.Max(worst, e)
					worstFloor = math.Max(worstFloor, ref.Floor["grad "+name])
					if e > selftest.ParityTol {
						over++
					}
					if !(e <= ref.Tol("grad "+name)) {
						t.Errorf("gradient %s: relative error %.2g (cpu variants among themselves: %.2g)", name, e, ref.Floor["grad "+name])
					}
					if e := selftest.RelErr(got.Params[name], want.Params[name]); !(e <= ref.Tol("param "+name)) {
						t.Errorf("%s after AdamW: relative error %.2g (cpu variants among themselves: %.2g)", name, e, ref.Floor["param "+name])
					}
				}
				// The rows hone selftest prints agree with the checks above.
				for _, r := range ref.Compare(got) {
					if !r.Pass {
						t.Errorf("selftest row %s fails: %s", r.Name, r.Failure)
					}
				}
				t.Logf("loss %.8g (cpu %.8g); %d LoRA gradients, worst relative error %.2g (%d over 1e-5); cpu variants among themselves: worst %.2g",
					got.Loss, want.Loss, len(want.Grads), worst, over, worstFloor)
			})
		}
	}
}
