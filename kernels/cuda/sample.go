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

// Sampling and SampleOut are kernels.Sampler's.
type (
	Sampling  = kernels.Sampling
	SampleOut = kernels.SampleOut
)

var _ kernels.Sampler = (*Backend)(nil)

// Sample implements kernels.Sampler: one token per row of logits ([rows,
// vocab]) drawn on the device (csrc/sample.cu), bringing back only
// rows*(2+2*topN) numbers.
func (b *Backend) Sample(logits kernels.Tensor, params []Sampling, topN int) SampleOut {
	rows, vocab := kernels.Rows(logits)
	if len(params) != rows || topN < 0 || topN > kernels.MaxSampleCandidates || topN > vocab {
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
