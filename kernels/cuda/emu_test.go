//go:build cgo && !cuda

package cuda

import (
	"testing"

	"github.com/hone-rl/hone/kernels/conformance"
)

// TestConformanceEmulated runs the kernels conformance suite, with the CPU
// backend's tolerances, against the CUDA kernels compiled for the host
// against the shim, for every kernel variant.
func TestConformanceEmulated(t *testing.T) {
	for _, v := range Variants() {
		t.Run(v, func(t *testing.T) {
			be, err := NewEmulated(v)
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			conformance.Run(t, be)
		})
	}
}
