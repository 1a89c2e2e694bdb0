//go:build cgo && !cuda

package cuda

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// rebuildAndTest runs `go test -count=1 args... .` in a subprocess that
// rebuilds this package (under a sanitizer, the race detector or other
// C++ flags in env) and returns its combined output; a failed run fails t,
// naming what. The subprocess gets the parent's remaining time as its
// -timeout, less a minute to report, instead of go test's default 10
// minutes, which a loaded machine has exceeded.
func rebuildAndTest(t *testing.T, what string, env []string, args ...string) string {
	t.Helper()
	timeout := 30 * time.Minute
	if d, ok := t.Deadline(); ok {
		timeout = time.Until(d) - time.Minute
	}
	full := append([]string{"test", "-count=1", "-timeout", timeout.Round(time.Second).String()}, args...)
	cmd := exec.Command("go", append(full, ".")...)
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=1"), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, out)
	}
	return string(out)
}
