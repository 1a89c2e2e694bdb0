// Package cpu is the float32 kernels backend for the CPU, parallel across
// cores with goroutines. Hot loops come in variants picked at run time from
// the CPU's features (see Variants): Go assembly for x86-64 with AVX2+FMA
// (packed, cache-blocked 6x16 matmul micro-kernels, BLIS-style) and generic
// Go (a register-tiled matmul) everywhere else, so one binary runs on any
// x86-64 or arm64. HONE_KERNELS=generic|avx2 forces one. Every variant is
// held to plain reference loops (gemmPlain) and to the conformance suite.
package cpu

import (
	"fmt"
	"runtime"

	"github.com/hone-rl/hone/kernels"
)

// tensor is host memory with a shape: float32 in data, or bf16 in half
// (widened on load).
type tensor struct {
	data  []float32
	half  []uint16
	dt    kernels.DType
	shape []int
	view  bool
}

func (t *tensor) Shape() []int { return t.shape }
func (t *tensor) Len() int {
	if t.dt == kernels.BF16 {
		return len(t.half)
	}
	return len(t.data)
}
func (t *tensor) DType() kernels.DType { return t.dt }

// Backend is the CPU backend. The zero value is not usable; call New.
type Backend struct {
	workers int
	simd    *simdKernels // nil: the generic Go kernels
}

var _ kernels.Backend = (*Backend)(nil)

// New returns a CPU backend using up to workers goroutines per operation
// (workers <= 0 means GOMAXPROCS) with the DefaultVariant kernels.
func New(workers int) *Backend {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	be := &Backend{workers: workers}
	if err := be.setVariant(DefaultVariant()); err != nil {
		panic(err)
	}
	return be
}

// Name implements kernels.Backend.
func (b *Backend) Name() string { return "cpu" }

// Err implements kernels.Backend: host memory has no device errors (an
// allocation failure is the Go runtime's), so it is always nil.
func (b *Backend) Err() error { return nil }

// ClearErr implements kernels.Backend.
func (b *Backend) ClearErr() {}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		if d < 0 {
			panic(fmt.Sprintf("kernels/cpu: negative dimension in %v", shape))
		}
		n *= d
	}
	return n
}

func cloneShape(shape []int) []int { return append([]int(nil), shape...) }

// cpuTensor returns t as a cpu tensor, panicking on a foreign one.
func cpuTensor(t kernels.Tensor) *tensor {
	ct, ok := t.(*tensor)
	if !ok {
		panic(fmt.Sprintf("kernels/cpu: tensor of type %T is not a cpu tensor", t))
	}
	return ct
}

// data returns t's float32 storage, panicking on a foreign or bf16 tensor.
func data(t kernels.Tensor) []float32 {
	ct := cpuTensor(t)
	if ct.dt != kernels.F32 {
		panic(fmt.Sprintf("kernels/cpu: a %v tensor %v where float32 is expected", ct.dt, ct.shape))
	}
	return ct.data
}

// widened returns t's values as float32: its storage, or for bf16 a new
// widened copy.
func widened(t kernels.Tensor) []float32 {
	ct := cpuTensor(t)
	if ct.dt == kernels.F32 {
		return ct.data
	}
	return widenInto(make([]float32, len(ct.half)), ct.half)
}

// widenInto sets dst[i] = src[i] widened and returns dst.
func widenInto(dst []float32, src []uint16) []float32 {
	for i, h := range src {
		dst[i] = kernels.FromBF16(h)
	}
	return dst
}

// rowsOf returns rows [r0, r0+n) of width w of t as float32: a slice of t's
// storage, or for bf16 those rows widened into scratch (grown as needed).
func rowsOf(t kernels.Tensor, r0, n, w int, scratch *[]float32) []float32 {
	ct := cpuTensor(t)
	if ct.dt == kernels.F32 {
		return ct.data[r0*w : (r0+n)*w]
	}
	if cap(*scratch) < n*w {
		*scratch = make([]float32, n*w)
	}
	return widenInto((*scratch)[:n*w], ct.half[r0*w:(r0+n)*w])
}

func checkDType(dt kernels.DType) {
	if dt != kernels.F32 && dt != kernels.BF16 {
		panic(fmt.Sprintf("kernels/cpu: unknown dtype %v", dt))
	}
}

// New implements kernels.Backend.
func (b *Backend) New(shape ...int) kernels.Tensor { return b.NewT(kernels.F32, shape...) }

// Empty implements kernels.Backend: a zeroed tensor (Go's allocation
// clears it anyway).
func (b *Backend) Empty(dt kernels.DType, shape ...int) kernels.Tensor { return b.NewT(dt, shape...) }

// NewT implements kernels.Backend.
func (b *Backend) NewT(dt kernels.DType, shape ...int) kernels.Tensor {
	checkDType(dt)
	t := &tensor{dt: dt, shape: cloneShape(shape)}
	if dt == kernels.BF16 {
		t.half = make([]uint16, numel(shape))
	} else {
		t.data = make([]float32, numel(shape))
	}
	return t
}

// Upload implements kernels.Backend.
func (b *Backend) Upload(src []float32, shape ...int) kernels.Tensor {
	return b.UploadT(kernels.F32, src, shape...)
}

// UploadT implements kernels.Backend: bf16 is rounded to nearest even.
func (b *Backend) UploadT(dt kernels.DType, src []float32, shape ...int) kernels.Tensor {
	checkDType(dt)
	if numel(shape) != len(src) {
		panic(fmt.Sprintf("kernels/cpu: upload of %d values as %v", len(src), shape))
	}
	t := &tensor{dt: dt, shape: cloneShape(shape)}
	if dt == kernels.BF16 {
		t.half = make([]uint16, len(src))
		for i, v := range src {
			t.half[i] = kernels.ToBF16(v)
		}
	} else {
		t.data = append([]float32(nil), src...)
	}
	return t
}

// Download implements kernels.Backend.
func (b *Backend) Download(dst []float32, t kernels.Tensor) {
	ct := cpuTensor(t)
	mustLen("download", len(dst), ct.Len())
	if ct.dt == kernels.BF16 {
		widenInto(dst, ct.half)
		return
	}
	copy(dst, ct.data)
}

// View implements kernels.Backend.
func (b *Backend) View(t kernels.Tensor, offset int, shape ...int) kernels.Tensor {
	src := cpuTensor(t)
	n := numel(shape)
	if offset < 0 || offset+n > src.Len() {
		panic(fmt.Sprintf("kernels/cpu: view [%d,%d) of %d elements", offset, offset+n, src.Len()))
	}
	v := &tensor{dt: src.dt, shape: cloneShape(shape), view: true}
	if src.dt == kernels.BF16 {
		v.half = src.half[offset : offset+n : offset+n]
	} else {
		v.data = src.data[offset : offset+n : offset+n]
	}
	return v
}

// Free implements kernels.Backend. CPU memory is garbage collected; Free drops
// the reference so later use fails loudly.
func (b *Backend) Free(t kernels.Tensor) {
	if ct, ok := t.(*tensor); ok && !ct.view {
		ct.data, ct.half = nil, nil
	}
}

// Copy implements kernels.Backend (bf16 to bf16 copies the bits).
func (b *Backend) Copy(dst, src kernels.Tensor) {
	if d, s := cpuTensor(dst), cpuTensor(src); d.dt == kernels.BF16 && s.dt == kernels.BF16 {
		mustLen("copy", len(d.half), len(s.half))
		copy(d.half, s.half)
		return
	}
	d, s := data(dst), data(src)
	mustLen("copy", len(d), len(s))
	copy(d, s)
}

// Convert implements kernels.Backend: kernels.ToBF16 to bf16 (round to
// nearest even), kernels.FromBF16 to float32, a copy between equal types.
func (b *Backend) Convert(dst, src kernels.Tensor) {
	d, s := cpuTensor(dst), cpuTensor(src)
	mustLen("convert", d.Len(), s.Len())
	switch {
	case d.dt == s.dt:
		b.Copy(dst, src)
	case d.dt == kernels.BF16:
		for i, v := range s.data {
			d.half[i] = kernels.ToBF16(v)
		}
	default:
		widenInto(d.data, s.half)
	}
}

// Fill implements kernels.Backend.
func (b *Backend) Fill(t kernels.Tensor, v float32) {
	d := data(t)
	for i := range d {
		d[i] = v
	}
}

// must panics with err (a shape error: a programming error) under the
// backend's prefix.
func must(err error) {
	if err != nil {
		panic("kernels/cpu: " + err.Error())
	}
}

func mustLen(op string, got, want int) { must(kernels.CheckLen(op, got, want)) }
