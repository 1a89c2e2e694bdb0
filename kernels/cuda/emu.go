//go:build cgo && !cuda

package cuda

// The emulated backend: emu.cc compiles csrc/*.cu with g++ against the
// CUDA-semantics shim in csrc/emu (HONE_CUDA_EMU).

// #cgo CXXFLAGS: -std=c++20 -O2 -DHONE_CUDA_EMU -Wall -Wno-unused-function
import "C"

// emuChunk is the emulated backend's TokenLogProbs chunk (logits per
// chunk): small, so that the conformance suite's larger shape is split
// over several vocabulary chunks and the online log-sum-exp merge runs.
const emuChunk = 1 << 20

// NewEmulated returns the CUDA backend running on the host through the
// shim: the same kernels and cuBLAS calls, no GPU. variant is one of
// Variants.
func NewEmulated(variant string) (*Backend, error) {
	b, err := newBackend("cuda-emu", 0, variant)
	if err != nil {
		return nil, err
	}
	b.setChunk(emuChunk)
	return b, nil
}
