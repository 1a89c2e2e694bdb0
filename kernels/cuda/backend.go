//go:build cgo

package cuda

/*
#include <stdlib.h>
#include "csrc/hone_cuda.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/hone-rl/hone/kernels"
)

// Variants of the kernels: the readable ones, or the faster ones beside them.
const (
	VariantReadable = "readable"
	VariantFast     = "fast"
)

// Variants lists the kernel variants, readable first.
func Variants() []string { return []string{VariantReadable, VariantFast} }

// Backend is the CUDA backend (or its emulation). Calls are serialised: one
// context holds one stream and one workspace.
type Backend struct {
	mu      sync.Mutex
	ctx     *C.hone_ctx
	name    string
	variant string
	err     error // the first device error (sticky until ClearErr)
	// events is the pool of CUDA events kernels/profile times with
	// (profile_device.go, the real build only).
	events []unsafe.Pointer
}

// closeEvents releases b.events at Close (set by profile_device.go).
var closeEvents func(b *Backend)

var _ kernels.Backend = (*Backend)(nil)

// tensor is device memory with a shape.
type tensor struct {
	ptr   unsafe.Pointer
	shape []int
	n     int
	view  bool
	// failed marks a tensor made while an error was recorded: it has no
	// storage.
	failed bool
	bf16   bool // bfloat16 storage (bf16.go): 2 bytes per element
}

func (t *tensor) Shape() []int { return t.shape }
func (t *tensor) Len() int     { return t.n }

// DType implements kernels.Tensor.
func (t *tensor) DType() kernels.DType {
	if t.bf16 {
		return kernels.BF16
	}
	return kernels.F32
}

// size is the bytes per element.
func (t *tensor) size() int { return t.DType().Size() }

func newBackend(name string, device int, variant string) (*Backend, error) {
	v := C.int(C.hone_variant_readable)
	switch variant {
	case VariantReadable:
	case VariantFast:
		v = C.hone_variant_fast
	default:
		return nil, fmt.Errorf("kernels/cuda: unknown variant %q (have %v)", variant, Variants())
	}
	var ctx *C.hone_ctx
	var msg [256]C.char
	if C.hone_create(&ctx, C.int(device), v, &msg[0], C.size_t(len(msg))) != 0 {
		return nil, fmt.Errorf("kernels/cuda: %s", C.GoString(&msg[0]))
	}
	return &Backend{ctx: ctx, name: name, variant: variant}, nil
}

// Name implements kernels.Backend.
func (b *Backend) Name() string { return b.name }

// Variant is the kernel variant the backend runs.
func (b *Backend) Variant() string { return b.variant }

// Close releases the device context (stream, cuBLAS handle, workspace).
// Tensors must be freed before.
func (b *Backend) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if closeEvents != nil {
		closeEvents(b)
	}
	if b.ctx != nil {
		C.hone_destroy(b.ctx)
		b.ctx = nil
	}
}

// setChunk sets how many logits one TokenLogProbs chunk may hold.
func (b *Backend) setChunk(elems int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	C.hone_set_chunk(b.ctx, C.long(elems))
}

// call runs one C call under the lock unless an error is recorded, and
// records the context's error (naming the backend and op) if the call fails.
// It reports whether the call ran and succeeded.
func (b *Backend) call(op string, fn func(*C.hone_ctx) C.int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return false
	}
	if fn(b.ctx) != 0 {
		b.err = fmt.Errorf("kernels/%s: %s: %s", b.name, op, C.GoString(C.hone_last_error(b.ctx)))
		return false
	}
	return true
}

// Err implements kernels.Backend.
func (b *Backend) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// ClearErr implements kernels.Backend: it also clears the context's sticky
// error on the C side.
func (b *Backend) ClearErr() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.err = nil
	C.hone_clear_error(b.ctx)
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		if d < 0 {
			panic(fmt.Sprintf("kernels/cuda: negative dimension in %v", shape))
		}
		n *= d
	}
	return n
}

// dev returns t's device tensor, panicking on a foreign or freed one, or
// one whose allocation failed. Operations call it (through fp) inside call,
// so a tensor made while an error is recorded is never reached.
func dev(t kernels.Tensor) *tensor {
	ct, ok := t.(*tensor)
	if !ok {
		panic(fmt.Sprintf("kernels/cuda: tensor of type %T is not a cuda tensor", t))
	}
	if ct.ptr == nil && ct.n > 0 {
		if ct.failed {
			panic("kernels/cuda: use of a tensor made while the backend's Err was set")
		}
		panic("kernels/cuda: use of a freed tensor")
	}
	return ct
}

// host returns t as a cuda tensor, panicking on a foreign one; unlike dev it
// accepts a tensor without storage (for shape checks outside call).
func host(t kernels.Tensor) *tensor {
	ct, ok := t.(*tensor)
	if !ok {
		panic(fmt.Sprintf("kernels/cuda: tensor of type %T is not a cuda tensor", t))
	}
	return ct
}

func fp(t kernels.Tensor) *C.float {
	d := dev(t)
	if d.bf16 {
		panic("kernels/cuda: a bf16 tensor where float32 is expected")
	}
	return (*C.float)(d.ptr)
}

// optFP is fp, or NULL for a nil tensor (an optional gradient).
func optFP(t kernels.Tensor) *C.float {
	if t == nil {
		return nil
	}
	return fp(t)
}

// must panics with err (a shape error: a programming error) under the
// backend's prefix.
func must(err error) {
	if err != nil {
		panic("kernels/cuda: " + err.Error())
	}
}

func mustLen(op string, got, want int) { must(kernels.CheckLen(op, got, want)) }

func checkDType(dt kernels.DType) {
	if dt != kernels.F32 && dt != kernels.BF16 {
		panic(fmt.Sprintf("kernels/cuda: unknown dtype %v", dt))
	}
}

// New implements kernels.Backend.
func (b *Backend) New(shape ...int) kernels.Tensor { return b.NewT(kernels.F32, shape...) }

// NewT implements kernels.Backend.
func (b *Backend) NewT(dt kernels.DType, shape ...int) kernels.Tensor {
	checkDType(dt)
	n := numel(shape)
	t := &tensor{shape: append([]int(nil), shape...), n: n, bf16: dt == kernels.BF16}
	bytes := C.size_t(dt.Size() * n)
	b.call("new", func(c *C.hone_ctx) C.int {
		if rc := C.hone_malloc(c, &t.ptr, bytes); rc != 0 {
			return rc
		}
		return C.hone_zero(c, t.ptr, bytes)
	})
	t.failed = t.ptr == nil && n > 0
	return t
}

// Empty implements kernels.Backend: no fill on the device (the emulated
// build fills NaN bytes, so a read before a write shows in its tests).
func (b *Backend) Empty(dt kernels.DType, shape ...int) kernels.Tensor {
	checkDType(dt)
	n := numel(shape)
	t := &tensor{shape: append([]int(nil), shape...), n: n, bf16: dt == kernels.BF16}
	b.call("empty", func(c *C.hone_ctx) C.int { return C.hone_malloc_empty(c, &t.ptr, C.size_t(dt.Size()*n)) })
	t.failed = t.ptr == nil && n > 0
	return t
}

// UploadT implements kernels.Backend: bf16 is rounded to nearest even on
// the device.
func (b *Backend) UploadT(dt kernels.DType, src []float32, shape ...int) kernels.Tensor {
	checkDType(dt)
	if dt == kernels.BF16 {
		if numel(shape) != len(src) {
			panic(fmt.Sprintf("kernels/cuda: upload of %d values as %v", len(src), shape))
		}
		return b.uploadBF16(src, shape...)
	}
	return b.Upload(src, shape...)
}

// Upload implements kernels.Backend.
func (b *Backend) Upload(src []float32, shape ...int) kernels.Tensor {
	if numel(shape) != len(src) {
		panic(fmt.Sprintf("kernels/cuda: upload of %d values as %v", len(src), shape))
	}
	t := &tensor{shape: append([]int(nil), shape...), n: len(src)}
	b.call("upload", func(c *C.hone_ctx) C.int {
		if rc := C.hone_malloc(c, &t.ptr, C.size_t(4*len(src))); rc != 0 || len(src) == 0 {
			return rc
		}
		return C.hone_upload(c, t.ptr, unsafe.Pointer(&src[0]), C.size_t(4*len(src)))
	})
	t.failed = t.ptr == nil && len(src) > 0
	return t
}

// Download implements kernels.Backend (bf16: the bits, widened on the host).
func (b *Backend) Download(dst []float32, t kernels.Tensor) {
	d := host(t)
	mustLen("download", len(dst), d.n)
	if d.n == 0 {
		return
	}
	if d.bf16 {
		for i, h := range b.bf16Bits(d) {
			dst[i] = kernels.FromBF16(h)
		}
		return
	}
	b.call("download", func(c *C.hone_ctx) C.int {
		return C.hone_download(c, unsafe.Pointer(&dst[0]), dev(d).ptr, C.size_t(4*d.n))
	})
}

// View implements kernels.Backend.
func (b *Backend) View(t kernels.Tensor, offset int, shape ...int) kernels.Tensor {
	d := host(t)
	n := numel(shape)
	if offset < 0 || offset+n > d.n {
		panic(fmt.Sprintf("kernels/cuda: view [%d,%d) of %d elements", offset, offset+n, d.n))
	}
	if d.failed {
		return &tensor{shape: append([]int(nil), shape...), n: n, view: true, failed: true, bf16: d.bf16}
	}
	return &tensor{ptr: unsafe.Add(dev(d).ptr, d.size()*offset), shape: append([]int(nil), shape...), n: n, view: true,
		bf16: d.bf16}
}

// Free implements kernels.Backend.
func (b *Backend) Free(t kernels.Tensor) {
	d, ok := t.(*tensor)
	if !ok || d.view || d.ptr == nil {
		return
	}
	// A failed free (or one skipped under an error) keeps the pointer, so
	// the tensor can be freed again after ClearErr.
	if b.call("free", func(c *C.hone_ctx) C.int { return C.hone_free(c, d.ptr) }) {
		d.ptr = nil
	}
}

// Copy implements kernels.Backend (same types only: bf16 to bf16 copies the
// bits).
func (b *Backend) Copy(dst, src kernels.Tensor) {
	d, s := host(dst), host(src)
	mustLen("copy", s.n, d.n)
	if d.bf16 != s.bf16 {
		panic(fmt.Sprintf("kernels/cuda: copy of a %v tensor into a %v one", s.DType(), d.DType()))
	}
	b.call("copy", func(c *C.hone_ctx) C.int {
		return C.hone_copy(c, dev(d).ptr, dev(s).ptr, C.size_t(d.size()*d.n))
	})
}

// Convert implements kernels.Backend on the device: float32 to bf16 with
// __float2bfloat16_rn (round to nearest even), bf16 to float32 exactly, a
// copy between equal types.
func (b *Backend) Convert(dst, src kernels.Tensor) {
	d, s := host(dst), host(src)
	mustLen("convert", s.n, d.n)
	switch {
	case d.bf16 == s.bf16:
		b.Copy(dst, src)
	case d.bf16:
		b.call("convert f32 to bf16", func(c *C.hone_ctx) C.int {
			return C.hone_f32_to_bf16(c, bfp(dst), fp(src), C.long(d.n))
		})
	default:
		b.call("convert bf16 to f32", func(c *C.hone_ctx) C.int {
			return C.hone_bf16_to_f32(c, fp(dst), bfp(src), C.long(d.n))
		})
	}
}

// Fill implements kernels.Backend.
func (b *Backend) Fill(t kernels.Tensor, v float32) {
	b.call("fill", func(c *C.hone_ctx) C.int { return C.hone_fill(c, fp(t), C.long(t.Len()), C.float(v)) })
}

// MemStats describes the backend's device memory: bytes held by live
// tensors (and their high-water mark since ResetPeak), bytes freed but
// cached for reuse, and how many allocations went to the device and how
// many were served from the cache.
type MemStats struct {
	LiveBytes, PeakLiveBytes, CachedBytes int64
	DeviceAllocs, Reuses                  int64
}

// MemStats reports the caching allocator's state.
func (b *Backend) MemStats() MemStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	var m C.hone_mem
	C.hone_mem_stats(b.ctx, &m)
	return MemStats{LiveBytes: int64(m.live_bytes), PeakLiveBytes: int64(m.peak_live_bytes),
		CachedBytes: int64(m.cached_bytes), DeviceAllocs: int64(m.device_allocs), Reuses: int64(m.reuses)}
}

// ResetPeak starts MemStats.PeakLiveBytes over from the live bytes now.
func (b *Backend) ResetPeak() {
	b.mu.Lock()
	defer b.mu.Unlock()
	C.hone_mem_reset_peak(b.ctx)
}

// PeakLiveBytes is MemStats().PeakLiveBytes: the most bytes live tensors
// held at once since ResetPeak.
func (b *Backend) PeakLiveBytes() int64 { return b.MemStats().PeakLiveBytes }

// Trim gives the memory of freed tensors back to the device.
func (b *Backend) Trim() {
	b.call("trim", func(c *C.hone_ctx) C.int { return C.hone_trim(c) })
}
