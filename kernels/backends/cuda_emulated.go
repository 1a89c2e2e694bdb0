//go:build cgo && !cuda

package backends

import (
	"fmt"

	"github.com/hone-rl/hone/kernels"
	"github.com/hone-rl/hone/kernels/cuda"
)

const cudaBuilt = false

func openCUDA(string) (kernels.Backend, func(), error) {
	return nil, nil, fmt.Errorf("%w: this hone was built without CUDA support (the cuda build tag; make build-cuda "+
		"builds bin/hone-cuda, linked against the CUDA runtime and cuBLAS); in this build the CUDA kernels run "+
		"only emulated on the CPU (backend emulated), for testing", ErrUnavailable)
}

func openEmulated(variant string) (kernels.Backend, func(), error) {
	be, err := cuda.NewEmulated(variant)
	if err != nil {
		return nil, nil, fmt.Errorf("emulated cuda: %w", err)
	}
	return be, be.Close, nil
}
