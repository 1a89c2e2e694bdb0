package cpu

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/hone-rl/hone/kernels"
)

// index is an Index over the caller's slice: host memory needs no copy, so
// an upload per decode step costs one pass for the range.
type index struct {
	ids    []int32
	lo, hi int32
	freed  bool
}

func (x *index) Len() int              { return len(x.ids) }
func (x *index) Range() (lo, hi int32) { return x.lo, x.hi }

// UploadIndex implements kernels.Backend: it keeps ids without copying
// them (the interface asks callers not to change them until FreeIndex).
func (b *Backend) UploadIndex(ids []int32) kernels.Index {
	lo, hi := kernels.IndexRange(ids)
	return &index{ids: ids, lo: lo, hi: hi}
}

// FreeIndex implements kernels.Backend: later use of ix panics.
func (b *Backend) FreeIndex(ix kernels.Index) {
	if x, ok := ix.(*index); ok {
		x.ids, x.freed = nil, true
	}
}

// ints returns ix's values, panicking on a foreign or freed index.
func ints(ix kernels.Index) []int32 {
	x, ok := ix.(*index)
	if !ok {
		panic(fmt.Sprintf("kernels/cpu: index of type %T is not a cpu index", ix))
	}
	if x.freed {
		panic("kernels/cpu: use of a freed index")
	}
	return x.ids
}

// ropeTable holds cos and sin rows for positions [0, n) (n grows on demand
// up to maxPos, so a model with a long context pays only for the positions
// it uses): row p is cos/sin of float32(p)*freqs[j], computed in float64 and
// rounded, as RoPE formed them before the table existed.
type ropeTable struct {
	freqs  []float32
	maxPos int
	mu     sync.Mutex // serialises growth
	rows   atomic.Pointer[ropeRows]
	freed  atomic.Bool
}

// ropeRows is an immutable prefix of a table: cos and sin of positions
// [0, n), half values each per position.
type ropeRows struct {
	n        int
	cos, sin []float32
}

func (r *ropeTable) Half() int   { return len(r.freqs) }
func (r *ropeTable) MaxPos() int { return r.maxPos }

// upTo returns rows covering position hi.
func (r *ropeTable) upTo(hi int) *ropeRows {
	if cur := r.rows.Load(); cur != nil && cur.n > hi {
		return cur
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.rows.Load()
	if cur != nil && cur.n > hi {
		return cur
	}
	old := 0
	if cur != nil {
		old = cur.n
	}
	n := min(r.maxPos, max(hi+1, 2*old, 256))
	half := len(r.freqs)
	next := &ropeRows{n: n, cos: make([]float32, n*half), sin: make([]float32, n*half)}
	if cur != nil {
		copy(next.cos, cur.cos)
		copy(next.sin, cur.sin)
	}
	for p := old; p < n; p++ {
		for j, f := range r.freqs {
			a := float64(float32(p) * f)
			next.cos[p*half+j] = float32(math.Cos(a))
			next.sin[p*half+j] = float32(math.Sin(a))
		}
	}
	r.rows.Store(next)
	return next
}

// NewRoPETable implements kernels.Backend.
func (b *Backend) NewRoPETable(freqs []float32, maxPos int) kernels.RoPETable {
	if len(freqs) == 0 || maxPos < 0 {
		panic(fmt.Sprintf("kernels/cpu: rope table of %d frequencies for %d positions", len(freqs), maxPos))
	}
	return &ropeTable{freqs: append([]float32(nil), freqs...), maxPos: maxPos}
}

// FreeRoPETable implements kernels.Backend: later use of rt panics.
func (b *Backend) FreeRoPETable(rt kernels.RoPETable) {
	if r, ok := rt.(*ropeTable); ok {
		r.freed.Store(true)
		r.rows.Store(nil)
	}
}

// rope returns rt as a cpu table, panicking on a foreign or freed one.
func rope(rt kernels.RoPETable) *ropeTable {
	r, ok := rt.(*ropeTable)
	if !ok {
		panic(fmt.Sprintf("kernels/cpu: rope table of type %T is not a cpu table", rt))
	}
	if r.freed.Load() {
		panic("kernels/cpu: use of a freed rope table")
	}
	return r
}
