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

// tensor is host memory with a shape.
type tensor struct {
	data  []float32
	shape []int
	view  bool
}

func (t *tensor) Shape() []int { return t.shape }
func (t *tensor) Len() int     { return len(t.data) }

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

// data returns t's storage, panicking on a foreign tensor.
func data(t kernels.Tensor) []float32 {
	ct, ok := t.(*tensor)
	if !ok {
		panic(fmt.Sprintf("kernels/cpu: tensor of type %T is not a cpu tensor", t))
	}
	return ct.data
}

// New implements kernels.Backend.
func (b *Backend) New(shape ...int) kernels.Tensor {
	return &tensor{data: make([]float32, numel(shape)), shape: cloneShape(shape)}
}

// Upload implements kernels.Backend.
func (b *Backend) Upload(src []float32, shape ...int) kernels.Tensor {
	if numel(shape) != len(src) {
		panic(fmt.Sprintf("kernels/cpu: upload of %d values as %v", len(src), shape))
	}
	return &tensor{data: append([]float32(nil), src...), shape: cloneShape(shape)}
}

// Download implements kernels.Backend.
func (b *Backend) Download(dst []float32, t kernels.Tensor) {
	src := data(t)
	mustLen("download", len(dst), len(src))
	copy(dst, src)
}

// View implements kernels.Backend.
func (b *Backend) View(t kernels.Tensor, offset int, shape ...int) kernels.Tensor {
	src := data(t)
	n := numel(shape)
	if offset < 0 || offset+n > len(src) {
		panic(fmt.Sprintf("kernels/cpu: view [%d,%d) of %d elements", offset, offset+n, len(src)))
	}
	return &tensor{data: src[offset : offset+n : offset+n], shape: cloneShape(shape), view: true}
}

// Free implements kernels.Backend. CPU memory is garbage collected; Free drops
// the reference so later use fails loudly.
func (b *Backend) Free(t kernels.Tensor) {
	if ct, ok := t.(*tensor); ok && !ct.view {
		ct.data = nil
	}
}

// Copy implements kernels.Backend.
func (b *Backend) Copy(dst, src kernels.Tensor) {
	d, s := data(dst), data(src)
	mustLen("copy", len(d), len(s))
	copy(d, s)
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
