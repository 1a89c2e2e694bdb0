//go:build cuda

package cuda

import (
	"testing"

	"github.com/hone-rl/hone/kernels/conformance"
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
