//go:build cgo && !cuda

package cuda

import (
	"math"
	"testing"

	"github.com/hone-rl/hone/kernels/cpu"
	"github.com/hone-rl/hone/model"
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
// there; the test logs both numbers.
func TestLoRAStepMatchesCPU(t *testing.T) {
	for _, arch := range []string{model.ArchQwen3, model.ArchLlama} {
		ref, err := cpu.NewVariant(1, cpu.VariantGeneric)
		if err != nil {
			t.Fatal(err)
		}
		want := runLoRAStep(t, ref, arch)
		// The noise floor: how far the CPU's other variants land from it.
		floor := map[string]float64{}
		for _, v := range cpu.Variants() {
			be, err := cpu.NewVariant(1, v)
			if err != nil {
				t.Fatal(err)
			}
			other := runLoRAStep(t, be, arch)
			for name, w := range want.grads {
				floor["grad "+name] = math.Max(floor["grad "+name], relErr(other.grads[name], w))
				floor["param "+name] = math.Max(floor["param "+name], relErr(other.params[name], want.params[name]))
			}
		}
		tol := func(key string) float64 { return math.Max(1e-5, 3*floor[key]) }
		for _, v := range Variants() {
			t.Run(arch+"/"+v, func(t *testing.T) {
				be, err := NewEmulated(v)
				if err != nil {
					t.Fatal(err)
				}
				defer be.Close()
				got := runLoRAStep(t, be, arch)
				if e := math.Abs(got.loss-want.loss) / math.Abs(want.loss); !(e <= 1e-5) {
					t.Errorf("loss %g, cpu %g (relative %.2g)", got.loss, want.loss, e)
				}
				if len(got.grads) != len(want.grads) || len(want.grads) == 0 {
					t.Fatalf("%d gradients, cpu %d", len(got.grads), len(want.grads))
				}
				worst, worstFloor, over := 0.0, 0.0, 0
				for name, w := range want.grads {
					e := relErr(got.grads[name], w)
					worst = math.Max(worst, e)
					worstFloor = math.Max(worstFloor, floor["grad "+name])
					if e > 1e-5 {
						over++
					}
					if !(e <= tol("grad "+name)) {
						t.Errorf("gradient %s: relative error %.2g (cpu variants among themselves: %.2g)", name, e, floor["grad "+name])
					}
					if e := relErr(got.params[name], want.params[name]); !(e <= tol("param "+name)) {
						t.Errorf("%s after AdamW: relative error %.2g (cpu variants among themselves: %.2g)", name, e, floor["param "+name])
					}
				}
				t.Logf("loss %.8g (cpu %.8g); %d LoRA gradients, worst relative error %.2g (%d over 1e-5); cpu variants among themselves: worst %.2g",
					got.loss, want.loss, len(want.grads), worst, over, worstFloor)
			})
		}
	}
}
