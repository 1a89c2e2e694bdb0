//go:build cgo && !cuda

package cuda

// The emulated backend: emu.cc compiles csrc/*.cu with g++ against the
// CUDA-semantics shim in csrc/emu (HONE_CUDA_EMU).

/*
#cgo CXXFLAGS: -std=c++20 -O2 -DHONE_CUDA_EMU -Wall -Wno-unused-function
#include <stddef.h>
#include <stdlib.h>
#include "csrc/hone_cuda.h"
int hone_emu_selftest(int which, int racecheck, const char* drop_file, int drop_line, float* out, char* err, size_t errlen);
void hone_emu_eager_warps(hone_ctx* c, int on);
void hone_emu_racecheck(hone_ctx* c, int on);
int hone_emu_lt_check(int which);
long hone_emu_lt_heuristics(hone_ctx* c);
void hone_emu_drop_barrier(hone_ctx* c, const char* file, int line);
int hone_emu_store_hooks(void);
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

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

// emuSelftest runs one of the shim's self-test kernels (csrc/emu/selftest.cuh)
// on host memory and returns what it wrote, or the launch error.
func emuSelftest(which int) ([]float32, error) { return emuSelftestWith(which, false, "", 0) }

// emuSelftestWith is emuSelftest with racecheck on or off and, when
// dropLine > 0, the __syncthreads at dropFile:dropLine dropped.
func emuSelftestWith(which int, racecheck bool, dropFile string, dropLine int) ([]float32, error) {
	out := (*[320]C.float)(C.calloc(320, 4))
	defer C.free(unsafe.Pointer(out))
	file := C.CString(dropFile)
	defer C.free(unsafe.Pointer(file))
	var msg [512]C.char
	if C.hone_emu_selftest(C.int(which), cbool(racecheck), file, C.int(dropLine), &out[0], &msg[0], C.size_t(len(msg))) != 0 {
		return nil, errors.New(C.GoString(&msg[0]))
	}
	res := make([]float32, 320)
	for i := range res {
		res[i] = float32(out[i])
	}
	return res, nil
}

// Schedules of the shim (csrc/emu/cuda_emu.h, run_block): how the threads
// of a block take turns. Each catches a different missing barrier; the
// conformance suite runs under both.
const (
	SchedulePasses     = "passes"      // every ready thread in turn until it blocks (default)
	ScheduleEagerWarps = "eager-warps" // a warp runs ahead as far as it can
)

// Schedules lists the shim's schedules.
func Schedules() []string { return []string{SchedulePasses, ScheduleEagerWarps} }

// SetSchedule picks the shim's schedule for the backend's later launches.
func (b *Backend) SetSchedule(s string) error {
	on := 0
	switch s {
	case SchedulePasses:
	case ScheduleEagerWarps:
		on = 1
	default:
		return fmt.Errorf("kernels/cuda: unknown schedule %q (have %v)", s, Schedules())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	C.hone_emu_eager_warps(b.ctx, C.int(on))
	return nil
}

// SetRacecheck turns the shim's racecheck on or off for the backend's later
// launches (csrc/emu/cuda_emu.h): every access of shared memory is
// recorded, and two threads of a block touching the same word between two
// barriers, one of them writing (not both atomically, not ordered by their
// warp's __syncwarp or shuffles), fail the launch: Err() then names the
// hazard (RAW, WAR or WAW), the kernel, the block, the two threads and the
// word.
func (b *Backend) SetRacecheck(on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	C.hone_emu_racecheck(b.ctx, cbool(on))
}

// dropBarrier makes the __syncthreads at file:line (file's base name, e.g.
// "common.cuh") return at once in later launches, as if deleted; line 0
// restores it. The mutation tests use it to remove barriers one at a time
// without recompiling.
func (b *Backend) dropBarrier(file string, line int) {
	cf := C.CString(file)
	defer C.free(unsafe.Pointer(cf))
	b.mu.Lock()
	defer b.mu.Unlock()
	C.hone_emu_drop_barrier(b.ctx, cf, C.int(line))
}

// storeHooks reports whether this build checks global memory under
// racecheck too (csrc/emu/store_hooks.h: the C++ compiled with every store
// instrumented; TestRacecheckGlobal builds it).
func storeHooks() bool { return C.hone_emu_store_hooks() != 0 }

// emuLtCheck runs the shim's cuBLASLt argument-check case which
// (csrc/emu/selftest.cuh, hone_emu_lt_check) and returns its status.
func emuLtCheck(which int) int { return int(C.hone_emu_lt_check(C.int(which))) }

// ltHeuristics is how many cuBLASLt heuristic queries the backend made.
func (b *Backend) ltHeuristics() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return int(C.hone_emu_lt_heuristics(b.ctx))
}
