//go:build cgo

package cuda

/*
#include "csrc/hone_cuda.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/hone-rl/hone/kernels"
)

// Sampling is one row's sampling parameters: Temperature <= 0 is greedy,
// TopK <= 0 and TopP >= 1 are off, Seed picks the draw (the same seed and
// row give the same token).
type Sampling struct {
	Temperature, TopP float32
	TopK              int32
	Seed              uint64
}

// SampleOut is what Sample returns per row: the token, its log-probability
// under the raw logits, and the TopN best raw log-probabilities with their
// ids ([rows*TopN], best first).
type SampleOut struct {
	Tokens  []int32
	Logp    []float32
	TopIDs  []int32
	TopLogp []float32
}

// Sample draws one token per row of logits ([rows, vocab]) on the device
// (csrc/sample.cu) and brings back only rows*(2+2*topN) numbers. It is the
// device-side sampling of DESIGN.md, not yet part of kernels.Backend.
func (b *Backend) Sample(logits kernels.Tensor, params []Sampling, topN int) SampleOut {
	rows, vocab := kernels.Rows(logits)
	if len(params) != rows || topN < 0 || topN > 256 || topN > vocab {
		panic(fmt.Sprintf("kernels/cuda: sample %v with %d parameter rows, top %d", logits.Shape(), len(params), topN))
	}
	// One spare element so that &TopIDs[0] exists when topN is 0.
	out := SampleOut{Tokens: make([]int32, rows), Logp: make([]float32, rows),
		TopIDs: make([]int32, rows*topN+1), TopLogp: make([]float32, rows*topN+1)}
	if rows == 0 {
		out.TopIDs, out.TopLogp = out.TopIDs[:0], out.TopLogp[:0]
		return out
	}
	cp := make([]C.hone_sampling, rows)
	for i, p := range params {
		cp[i] = C.hone_sampling{temperature: C.float(p.Temperature), top_p: C.float(p.TopP), top_k: C.int32_t(p.TopK),
			seed: C.uint64_t(p.Seed)}
	}
	b.call("sample", func(c *C.hone_ctx) C.int {
		return C.hone_sample(c, fp(logits), C.long(rows), C.long(vocab), &cp[0], C.int(topN),
			(*C.int32_t)(unsafe.Pointer(&out.Tokens[0])), (*C.float)(&out.Logp[0]),
			(*C.int32_t)(unsafe.Pointer(&out.TopIDs[0])), (*C.float)(&out.TopLogp[0]))
	})
	out.TopIDs, out.TopLogp = out.TopIDs[:rows*topN], out.TopLogp[:rows*topN]
	return out
}
