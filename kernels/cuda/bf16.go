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

// bf16 storage (kernels.BF16): upload with rounding on the device, raw
// bits, widening, and MatMul with bf16 operands.

// uploadBF16 uploads src and rounds it to bf16 on the device.
func (b *Backend) uploadBF16(src []float32, shape ...int) *tensor {
	f := b.Upload(src, shape...).(*tensor)
	defer b.Free(f)
	t := &tensor{shape: append([]int(nil), shape...), n: len(src), bf16: true}
	b.call("upload bf16", func(c *C.hone_ctx) C.int {
		if rc := C.hone_malloc(c, &t.ptr, C.size_t(2*len(src))); rc != 0 {
			return rc
		}
		return C.hone_f32_to_bf16(c, (*C.uint16_t)(t.ptr), (*C.float)(dev(f).ptr), C.long(len(src)))
	})
	t.failed = t.ptr == nil && len(src) > 0
	return t
}

// bf16Bits downloads a bf16 tensor's raw storage.
func (b *Backend) bf16Bits(t *tensor) []uint16 {
	if !t.bf16 {
		panic("kernels/cuda: not a bf16 tensor")
	}
	out := make([]uint16, t.n)
	if t.n > 0 {
		b.call("download bf16", func(c *C.hone_ctx) C.int {
			return C.hone_download(c, unsafe.Pointer(&out[0]), t.ptr, C.size_t(2*t.n))
		})
	}
	return out
}

// widenBF16 converts a bf16 tensor to a new float32 one on the device.
func (b *Backend) widenBF16(t *tensor) kernels.Tensor {
	out := b.New(t.shape...)
	b.call("bf16 to f32", func(c *C.hone_ctx) C.int {
		return C.hone_bf16_to_f32(c, fp(out), (*C.uint16_t)(t.ptr), C.long(t.n))
	})
	return out
}

// bfp returns a bf16 tensor's device pointer (inside call, as fp).
func bfp(t kernels.Tensor) *C.uint16_t {
	d := dev(t)
	if !d.bf16 {
		panic("kernels/cuda: a float32 tensor where bf16 is expected")
	}
	return (*C.uint16_t)(d.ptr)
}

// anyp returns a tensor's device pointer of either type and whether it is
// bf16 (inside call).
func anyp(t kernels.Tensor) (unsafe.Pointer, C.int) {
	d := dev(t)
	return d.ptr, cbool(d.bf16)
}

// matMulBF16 is MatMul with bf16 A and B, float32 C, float32 accumulation.
func (b *Backend) matMulBF16(c kernels.Tensor, a, bm *tensor, transA, transB bool, alpha, beta float32) {
	if !a.bf16 || !bm.bf16 {
		panic(fmt.Sprintf("kernels/cuda: matmul bf16 with A bf16=%v B bf16=%v", a.bf16, bm.bf16))
	}
	p := planMatMul(c, a, bm, transA, transB)
	b.call("matmul bf16", func(x *C.hone_ctx) C.int {
		return C.hone_gemm_bf16(x, cbool(transA), cbool(transB), C.long(p.m), C.long(p.n), C.long(p.k), C.float(alpha),
			(*C.uint16_t)(a.ptr), C.long(p.m*p.k), (*C.uint16_t)(bm.ptr), C.long(p.strideB), C.float(beta), fp(c),
			C.long(p.m*p.n), C.long(p.batch))
	})
}

// ltAlgos is how many GEMM shapes the context's cuBLASLt heuristic cache
// holds.
func (b *Backend) ltAlgos() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return int(C.hone_lt_algos(b.ctx))
}
