//go:build cgo && !cuda

package cuda

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAddressSanitizer reruns the emulated conformance suite (one schedule),
// the LoRA step, the bf16, allocator, empty-shape and head-dimension tests
// with the kernels built under AddressSanitizer (go test -asan): a
// kernel reading or writing outside a buffer it was given (cudaMalloc in the
// shim allocates exactly the bytes asked for) fails here, where on a GPU it
// would fault or corrupt a neighbour silently. Leak checking is off: the
// conformance suite leaves tensors to the garbage collector, as the CPU
// backend allows.
func TestAddressSanitizer(t *testing.T) {
	// Parallel: a rebuild and run in a subprocess, mostly waiting on one
	// core; the package's other subprocess tests use the other.
	t.Parallel()
	if testing.Short() {
		t.Skip("rebuilds the package with -asan")
	}
	if out, err := exec.Command("g++", "-print-file-name=libasan.so").Output(); err != nil || !filepath.IsAbs(strings.TrimSpace(string(out))) {
		t.Skip("g++ has no libasan")
	}
	// One schedule: an access outside a buffer does not depend on the order
	// the shim runs a block's threads in, and the second schedule doubled
	// the package's slowest test.
	out := rebuildAndTest(t, "under AddressSanitizer", []string{"ASAN_OPTIONS=detect_leaks=0"}, "-asan", "-v",
		"-run", "^(TestConformanceEmulated|TestLoRAStepMatchesCPU|TestBF16Conversion|TestMatMulBF16|TestCachingAllocator|TestEmptyShapes|TestMatMulEmptyK|TestAttentionHeadDimBoundary)$",
		"-skip", "^TestConformanceEmulated$/.*/^"+ScheduleEagerWarps+"$")
	if !strings.Contains(out, "--- PASS: TestConformanceEmulated/") || strings.Contains(out, ScheduleEagerWarps) {
		t.Fatalf("not the conformance suite under one schedule:\n%s", out)
	}
}
