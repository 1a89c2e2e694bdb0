//go:build cuda

package cuda

// The real backend: csrc/*.cu compiled by nvcc into libhonecuda.a, linked
// with the CUDA runtime and cuBLAS. The library and toolkit directories come
// from CGO_LDFLAGS (scripts/cuda/build.sh and the compile check set them):
//
//	CGO_LDFLAGS="-L$obj -L$HONE_CUDA_HOME/lib -Wl,-rpath,$HONE_CUDA_HOME/lib" go build -tags cuda

// #cgo LDFLAGS: -lhonecuda -lcublas -lcublasLt -lcudart -lstdc++ -lm
import "C"

// New returns the CUDA backend on device (0 is the first GPU) running the
// given kernel variant (one of Variants). It fails when there is no device
// or driver.
func New(device int, variant string) (*Backend, error) {
	return newBackend("cuda", device, variant)
}
