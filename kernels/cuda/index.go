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

// index is int32 device memory with the range of its values, found on the
// host at upload (so operations check ids in constant time).
type index struct {
	ptr    unsafe.Pointer
	n      int
	lo, hi int32
	failed bool // made while an error was recorded: no storage
}

func (x *index) Len() int              { return x.n }
func (x *index) Range() (lo, hi int32) { return x.lo, x.hi }

// UploadIndex implements kernels.Backend: one allocation and one copy.
func (b *Backend) UploadIndex(ids []int32) kernels.Index {
	lo, hi := kernels.IndexRange(ids)
	x := &index{n: len(ids), lo: lo, hi: hi}
	if len(ids) == 0 {
		return x
	}
	b.call("upload index", func(c *C.hone_ctx) C.int {
		if rc := C.hone_malloc(c, &x.ptr, C.size_t(4*len(ids))); rc != 0 {
			return rc
		}
		return C.hone_upload(c, x.ptr, unsafe.Pointer(&ids[0]), C.size_t(4*len(ids)))
	})
	x.failed = x.ptr == nil
	return x
}

// FreeIndex implements kernels.Backend.
func (b *Backend) FreeIndex(ix kernels.Index) {
	x, ok := ix.(*index)
	if !ok || x.ptr == nil {
		return
	}
	if b.call("free index", func(c *C.hone_ctx) C.int { return C.hone_free(c, x.ptr) }) {
		x.ptr = nil
	}
}

// ip returns ix's device pointer (NULL when empty), panicking on a foreign,
// freed or failed index. Like fp, it is called inside call.
func ip(ix kernels.Index) *C.int32_t {
	x, ok := ix.(*index)
	if !ok {
		panic(fmt.Sprintf("kernels/cuda: index of type %T is not a cuda index", ix))
	}
	if x.ptr == nil && x.n > 0 {
		if x.failed {
			panic("kernels/cuda: use of an index made while the backend's Err was set")
		}
		panic("kernels/cuda: use of a freed index")
	}
	return (*C.int32_t)(x.ptr)
}

// ropeTable is a device table [maxPos, 2*half]: per position the cos of its
// half angles, then their sin (csrc/rope.cu).
type ropeTable struct {
	ptr          unsafe.Pointer
	half, maxPos int
	failed       bool
}

func (r *ropeTable) Half() int   { return r.half }
func (r *ropeTable) MaxPos() int { return r.maxPos }

// NewRoPETable implements kernels.Backend: the table is computed on the
// device from the frequencies.
func (b *Backend) NewRoPETable(freqs []float32, maxPos int) kernels.RoPETable {
	if len(freqs) == 0 || maxPos < 0 {
		panic(fmt.Sprintf("kernels/cuda: rope table of %d frequencies for %d positions", len(freqs), maxPos))
	}
	r := &ropeTable{half: len(freqs), maxPos: maxPos}
	n := maxPos * 2 * len(freqs)
	if n == 0 {
		return r
	}
	b.call("rope table", func(c *C.hone_ctx) C.int {
		if rc := C.hone_malloc(c, &r.ptr, C.size_t(4*n)); rc != 0 {
			return rc
		}
		return C.hone_rope_table(c, (*C.float)(r.ptr), (*C.float)(&freqs[0]), C.long(maxPos), C.long(len(freqs)))
	})
	r.failed = r.ptr == nil
	return r
}

// FreeRoPETable implements kernels.Backend.
func (b *Backend) FreeRoPETable(rt kernels.RoPETable) {
	r, ok := rt.(*ropeTable)
	if !ok || r.ptr == nil {
		return
	}
	if b.call("free rope table", func(c *C.hone_ctx) C.int { return C.hone_free(c, r.ptr) }) {
		r.ptr = nil
	}
}

// rp returns rt's device pointer, panicking on a foreign, freed or failed
// table. Like fp, it is called inside call.
func rp(rt kernels.RoPETable) *C.float {
	r, ok := rt.(*ropeTable)
	if !ok {
		panic(fmt.Sprintf("kernels/cuda: rope table of type %T is not a cuda table", rt))
	}
	if r.ptr == nil && r.maxPos > 0 {
		if r.failed {
			panic("kernels/cuda: use of a rope table made while the backend's Err was set")
		}
		panic("kernels/cuda: use of a freed rope table")
	}
	return (*C.float)(r.ptr)
}
