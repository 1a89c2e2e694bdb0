package peers

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// vllm is the one vLLM the package's tests share (nil when skipped: see
// skipReason).
var (
	vllm       *VLLM
	skipReason string
)

// needVLLM skips a test (fails it under HONE_REQUIRE_PEERS=1) when vLLM did
// not start.
func needVLLM(t *testing.T) *VLLM {
	t.Helper()
	if vllm == nil {
		if Required() && !testing.Short() {
			t.Fatalf("HONE_REQUIRE_PEERS=1: %s", skipReason)
		}
		t.Skip(skipReason)
	}
	return vllm
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		skipReason = "-short: no vLLM"
		return m.Run()
	}
	py, err := Python()
	if err != nil {
		return noPeers(m, err)
	}
	tokDir, err := Qwen3TokenizerDir()
	if err != nil {
		return noPeers(m, err)
	}
	dir, err := os.MkdirTemp("", "hone-peers-")
	if err != nil {
		return noPeers(m, err)
	}
	defer os.RemoveAll(dir)
	modelDir := filepath.Join(dir, "qwen3-tiny")
	if err := WriteQwen3Folder(modelDir, tokDir, "tiny", 1); err != nil {
		return noPeers(m, fmt.Errorf("model folder: %w", err))
	}
	v, err := StartVLLM(VLLMOptions{Python: py, ModelDir: modelDir, LogDir: dir})
	if err != nil {
		// A peers environment that is there but cannot serve is a failure
		// whatever HONE_REQUIRE_PEERS says.
		fmt.Fprintf(os.Stderr, "peers: %v\n", err)
		return 1
	}
	defer v.Stop()
	warm := time.Now()
	if err := v.Warm(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "peers: %v\n%s\n", err, Tail(v.Log, 40))
		return 1
	}
	fmt.Fprintf(os.Stderr, "peers: vLLM (%s) up at %s in %s, first requests %s\n", py, v.URL, v.Startup.Round(time.Second), time.Since(warm).Round(100*time.Millisecond))
	vllm = v
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "peers: last lines of %s:\n%s\n", v.Log, Tail(v.Log, 40))
	}
	return code
}

func noPeers(m *testing.M, err error) int {
	skipReason = err.Error()
	if Required() {
		fmt.Fprintf(os.Stderr, "peers: HONE_REQUIRE_PEERS=1 but %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "peers: skipping (%v)\n", err)
	return m.Run()
}
