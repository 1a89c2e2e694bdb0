//go:build cgo && !cuda

package cuda

import (
	"strings"
	"testing"
)

// TestGoRaceDetector reruns the emulated conformance suite (both variants,
// under racecheck; the schedules change nothing on the Go side), the
// sticky-error test and the LoRA step with the package built under Go's
// race detector (go test -race). It checks the Go side of the cgo backend: the mutex around the C
// context, tensors freed by finalizers on the finalizer goroutine, the
// sticky error. It does not see inside a kernel: the C++ is not
// instrumented (the shim's fibers share one OS thread, which
// ThreadSanitizer could not tell apart anyway); racecheck is what checks
// the kernels' shared memory.
func TestGoRaceDetector(t *testing.T) {
	// Parallel: a rebuild and run in a subprocess, mostly waiting on one
	// core; the package's other subprocess tests use the other.
	t.Parallel()
	if testing.Short() {
		t.Skip("rebuilds the package with -race")
	}
	out := rebuildAndTest(t, "under the race detector", nil, "-race",
		"-run", "^(TestConformanceRacecheck|TestErrorsAreStickyAndNamed|TestLoRAStepMatchesCPU)$")
	if strings.Contains(out, "WARNING: DATA RACE") || !strings.Contains(out, "ok ") {
		t.Fatalf("under the race detector:\n%s", out)
	}
}
