//go:build !cgo

package backends

import (
	"fmt"

	"github.com/hone-rl/hone/kernels"
)

const cudaBuilt = false

func openCUDA(string) (kernels.Backend, func(), error) {
	return nil, nil, fmt.Errorf("%w: this hone was built without cgo (CGO_ENABLED=0) and without CUDA support "+
		"(it needs go build -tags cuda, with cgo, linked against the CUDA runtime and cuBLAS)", ErrUnavailable)
}

func openEmulated(string) (kernels.Backend, func(), error) {
	return nil, nil, fmt.Errorf("%w: the emulated CUDA backend is C++ reached through cgo, and this hone was "+
		"built with CGO_ENABLED=0", ErrUnavailable)
}
