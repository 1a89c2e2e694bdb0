package capture

import (
	"math"
	"runtime/debug"

	"github.com/dgraph-io/badger/v4"
)

// DefaultMemoryBudget is the memory the store sizes itself for when the
// process has no Go memory limit (runtime.memory_limit, GOMEMLIMIT): a
// sidecar's 512 MiB, of which the Go limit would be 75%.
const DefaultMemoryBudget = 384 << 20

// MemoryBudget is what Open sizes Badger for: the Go soft memory limit in
// effect (hone serve sets it from runtime.memory_limit before it opens the
// store), else DefaultMemoryBudget.
func MemoryBudget() int64 {
	if l := debug.SetMemoryLimit(-1); l > 0 && l < math.MaxInt64 {
		return l
	}
	return DefaultMemoryBudget
}

// storeSizes are Badger's memory-bound sizes for a budget.
type storeSizes struct {
	memtable   int64 // MemTableSize; a memtable's arena is ~1.3x this, on the Go heap
	memtables  int   // NumMemtables: the active one plus those waiting to flush
	blockCache int64 // BlockCacheSize
	indexCache int64 // IndexCacheSize: table indexes and bloom filters
	vlogFile   int64 // ValueLogFileSize
	records    int   // session records the writer keeps (at most capture.sessions_cache)
	queueBytes int64 // calls waiting to be written, in bytes (on_full: drop)
}

// sizesFor divides a budget: memtables up to ~1/6 of it (budget/24 each, 16
// to 64 MiB, 3 of them below 1 GiB of budget and 5 above), the block cache
// 1/16 (8 to 256 MiB), the index cache 1/32 (4 to 128 MiB), the writer's
// session records 1/32 (~1 KiB each with their cache entry; at least 4096),
// calls waiting for the writer 1/8 (at least 32 MiB: at 500 calls/s of 15 KB
// a few seconds of a writer that falls behind; past it calls are dropped
// and counted, as on a full queue), value-log files 1/6 (32 to 256 MiB: the
// value-log GC reads a whole file through its mapping, so its size is a
// burst of file-backed RSS). Badger's
// defaults (5 x 64 MiB memtables, a 256 MiB block cache, every table index
// in memory) want more than a 512 MiB sidecar has; hone's old 64 MiB
// memtables with GOGC 400 made a 2 GB heap.
func sizesFor(budget int64) storeSizes {
	clamp := func(v, lo, hi int64) int64 { return max(lo, min(hi, v)) }
	z := storeSizes{
		memtable:   clamp(budget/24, 16<<20, 64<<20),
		memtables:  3,
		blockCache: clamp(budget/16, 8<<20, 256<<20),
		indexCache: clamp(budget/32, 4<<20, 128<<20),
		vlogFile:   clamp(budget/6, 32<<20, 256<<20),
		records:    int(max(4096, budget/32/1024)),
		queueBytes: max(32<<20, budget/8),
	}
	if budget >= 1<<30 {
		z.memtables = 5
	}
	return z
}

// apply sets the sizes on Badger options.
func (z storeSizes) apply(o badger.Options) badger.Options {
	return o.WithMemTableSize(z.memtable).
		WithNumMemtables(z.memtables).
		WithNumLevelZeroTables(min(5, z.memtables+2)).
		WithBlockCacheSize(z.blockCache).
		WithIndexCacheSize(z.indexCache).
		WithValueLogFileSize(z.vlogFile)
}
