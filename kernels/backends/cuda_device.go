//go:build cuda

package backends

import (
	"fmt"

	"github.com/hone-rl/hone/kernels"
	"github.com/hone-rl/hone/kernels/cuda"
)

const cudaBuilt = true

// openCUDA opens the first GPU. cuda.New fails when the runtime finds no
// device or driver (cudaGetDeviceCount); that is ErrUnavailable.
func openCUDA(variant string) (kernels.Backend, func(), error) {
	be, err := cuda.New(0, variant)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: no usable GPU: %v", ErrUnavailable, err)
	}
	return be, be.Close, nil
}

func openEmulated(string) (kernels.Backend, func(), error) {
	return nil, nil, fmt.Errorf("%w: a binary built with -tags cuda has the real CUDA backend, not the emulated one "+
		"(build without the tag for it)", ErrUnavailable)
}
