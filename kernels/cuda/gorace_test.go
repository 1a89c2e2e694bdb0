//go:build cgo && !cuda

package cuda

import (
	"os"
	"os/exec"
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
	cmd := exec.Command("go", "test", "-race", "-count=1", "-run", "^(TestConformanceRacecheck|TestErrorsAreStickyAndNamed|TestLoRAStepMatchesCPU)$", ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("under the race detector: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "WARNING: DATA RACE") || !strings.Contains(string(out), "ok ") {
		t.Fatalf("under the race detector:\n%s", out)
	}
}
