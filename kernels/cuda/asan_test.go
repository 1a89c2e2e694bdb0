//go:build cgo && !cuda

package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAddressSanitizer reruns the emulated conformance suite, the LoRA step,
// the bf16, allocator, empty-shape and head-dimension tests with the kernels
// built under
// AddressSanitizer (go test -asan): a
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
	cmd := exec.Command("go", "test", "-asan", "-count=1", "-run", "^(TestConformanceEmulated|TestLoRAStepMatchesCPU|TestBF16Conversion|TestMatMulBF16|TestCachingAllocator|TestEmptyShapes|TestMatMulEmptyK|TestAttentionHeadDimBoundary)$", ".")
	cmd.Env = append(os.Environ(), "ASAN_OPTIONS=detect_leaks=0", "CGO_ENABLED=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("under AddressSanitizer: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "ok ") {
		t.Fatalf("no test ran under AddressSanitizer:\n%s", out)
	}
}
