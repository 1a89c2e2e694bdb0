package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCUDABuild builds hone with the real CUDA backend (-tags cuda, by
// scripts/cuda/build.sh: nvcc, libcudart and cuBLAS from NVIDIA's wheels)
// and runs it. On this GPU-less machine hone selftest --backend cuda must
// exit 2 saying there is no usable GPU (never panic), auto must test cpu,
// and serve --train with trainer.backend cuda must refuse. On a GPU the
// selftest must pass instead. Skipped without the toolkit (unless
// HONE_REQUIRE_CUDA=1) and under -short: it takes a minute or two.
func TestCUDABuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds hone with -tags cuda")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("HONE_REQUIRE_CUDA") != "1" {
		if err := exec.Command("bash", filepath.Join(root, "scripts/cuda/ensure.sh"), "--print-only").Run(); err != nil {
			t.Skip("no CUDA toolkit (bash scripts/cuda/ensure.sh installs it; HONE_REQUIRE_CUDA=1 makes this fail)")
		}
	}
	bin := filepath.Join(t.TempDir(), "hone-cuda")
	build := exec.Command("bash", filepath.Join(root, "scripts/cuda/build.sh"), "-o", bin, "./cmd/hone")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("scripts/cuda/build.sh: %v\n%s", err, out)
	}
	runBin := func(args ...string) (int, string, string) {
		cmd := exec.Command(bin, args...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, o.String(), e.String()
	}
	code, out, errOut := runBin("selftest", "--backend", "cuda")
	t.Logf("hone-cuda selftest --backend cuda: exit %d\n%s%s", code, out, errOut)
	if code == 0 && strings.Contains(out, passLine) {
		t.Log("a GPU answered and passed the selftest")
		return
	}
	if code != 2 || !strings.Contains(errOut, "hone selftest: backend cuda: backend unavailable: no usable GPU: ") ||
		strings.Contains(errOut, "panic") {
		t.Fatalf("want exit 2 naming the missing GPU")
	}
	code, out, errOut = runBin("selftest", "--backend", "auto")
	if code != 0 || !strings.Contains(out, "auto: testing cpu (cuda unavailable: backend cuda: backend unavailable: no usable GPU") ||
		!strings.Contains(out, passLine) {
		t.Fatalf("auto: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runBin("selftest", "--backend", "emulated")
	if code != 2 || !strings.Contains(errOut, "has the real CUDA backend, not the emulated one") {
		t.Fatalf("emulated in a cuda build: exit %d\n%s%s", code, out, errOut)
	}
	dir := t.TempDir()
	cmd := exec.Command(bin, "serve", "--train", "--data", filepath.Join(dir, "data"), "--model", writeModel(t, "tiny"),
		"--engine", "http://127.0.0.1:9", "--listen", "127.0.0.1:0", "--control-listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "HONE_TRAINER_BACKEND=cuda")
	outb, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(outb), "trainer.backend cuda: refusing to train: backend cuda: backend unavailable: no usable GPU") {
		t.Fatalf("serve --train with cuda and no GPU: %v\n%s", err, outb)
	}
}
