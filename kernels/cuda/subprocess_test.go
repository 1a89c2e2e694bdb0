//go:build cgo && !cuda

package cuda

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// rebuildAndTest runs `go test -count=1 args... .` in a subprocess that
// rebuilds this package (under a sanitizer, the race detector or other
// C++ flags in env) and returns its combined output; a failed run fails t,
// naming what. The subprocess gets the parent's remaining time less a
// minute as its -timeout (instead of go test's default 10 minutes, which a
// loaded machine has exceeded), so it reports before the parent's deadline
// kills the parent; it is killed itself at that deadline, and not started
// with less than two minutes left.
func rebuildAndTest(t *testing.T, what string, env []string, args ...string) string {
	t.Helper()
	ctx, timeout := context.Background(), 30*time.Minute
	if d, ok := t.Deadline(); ok {
		left := time.Until(d)
		if left < 2*time.Minute {
			t.Fatalf("%s: %v left before the test deadline, too little to rebuild and run the package "+
				"(the package's other tests took the rest of -timeout: give go test a longer one)", what, left.Round(time.Second))
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d)
		defer cancel()
		timeout = left - time.Minute
	}
	full := append([]string{"test", "-count=1", "-timeout", timeout.Round(time.Second).String()}, args...)
	cmd := exec.CommandContext(ctx, "go", append(full, ".")...)
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=1"), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", what, err, out)
	}
	return string(out)
}
