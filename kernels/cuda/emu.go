//go:build cgo && !cuda

package cuda

// The emulated backend: emu.cc compiles csrc/*.cu with g++ against the
// CUDA-semantics shim in csrc/emu (HONE_CUDA_EMU).

/*
#cgo CXXFLAGS: -std=c++20 -O2 -DHONE_CUDA_EMU -Wall -Wno-unused-function
#include <stddef.h>
#include <stdlib.h>
#include "csrc/hone_cuda.h"
int hone_emu_selftest(int which, float* out, char* err, size_t errlen);
void hone_emu_eager_warps(hone_ctx* c, int on);
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
func emuSelftest(which int) ([]float32, error) {
	out := (*[320]C.float)(C.calloc(320, 4))
	defer C.free(unsafe.Pointer(out))
	var msg [256]C.char
	if C.hone_emu_selftest(C.int(which), &out[0], &msg[0], C.size_t(len(msg))) != 0 {
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
