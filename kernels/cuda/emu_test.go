//go:build cgo && !cuda

package cuda

import (
	"strings"
	"testing"

	"github.com/hone-rl/hone/kernels/conformance"
)

// TestConformanceEmulated runs the kernels conformance suite, with the CPU
// backend's tolerances, against the CUDA kernels compiled for the host
// against the shim, for every kernel variant.
func TestConformanceEmulated(t *testing.T) {
	for _, v := range Variants() {
		t.Run(v, func(t *testing.T) {
			be, err := NewEmulated(v)
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			conformance.Run(t, be)
		})
	}
}

// TestShimSemantics checks the shim against what CUDA documents: shuffle
// sources and out-of-range lanes, ballots, atomics across blocks, and the
// launch errors for a barrier split across a warp and for a shuffle whose
// mask names lanes that exited.
func TestShimSemantics(t *testing.T) {
	out, err := emuSelftest(0)
	if err != nil {
		t.Fatal(err)
	}
	var ballot uint32
	for l := 0; l < 32; l += 3 {
		ballot |= 1 << l
	}
	for tid := 0; tid < 64; tid++ {
		lane, base := tid%32, tid-tid%32
		down := tid + 3
		if lane+3 >= 32 {
			down = tid
		}
		up := tid - 2
		if lane < 2 {
			up = tid
		}
		// Warp 1's lanes 0, 3, ... are threads 32, 35, ...: t%3 == 0 at lanes 1, 4, ...
		wb := ballot
		if base == 32 {
			wb = 0
			for l := 1; l < 32; l += 3 {
				wb |= 1 << l
			}
		}
		want := []float32{float32(tid ^ 1), float32(down), float32(base + 5), float32(up), float32(wb)}
		for i, w := range want {
			if got := out[5*tid+i]; got != w {
				t.Errorf("thread %d value %d = %g, want %g", tid, i, got, w)
			}
		}
	}
	out, err = emuSelftest(1)
	if err != nil {
		t.Fatal(err)
	}
	if want := float32(511 * 512 / 2); out[0] != want {
		t.Errorf("atomicAdd over 512 threads: %g, want %g", out[0], want)
	}
	if _, err := emuSelftest(2); err == nil || !strings.Contains(err.Error(), "deadlock") {
		t.Errorf("a barrier split across a warp: err %v, want a deadlock", err)
	}
	if _, err := emuSelftest(3); err == nil || !strings.Contains(err.Error(), "exited") {
		t.Errorf("a shuffle naming exited lanes: err %v, want an error", err)
	}
}
