// Package gpu_test checks the GPU bundle's packaging and its run.sh without
// a GPU or a CUDA build: scripts/gpu/bundle.sh --fake-binaries packs
// placeholder binaries (seconds, no nvcc), and run.sh is run from the
// unpacked tarball against fake nvidia-smi, libcuda and CUDA libraries.
// The real bundle (nvcc, three cuda-tagged builds: minutes) is built by
// make gpu-bundle, which .ci/run runs after make test-long; it checks its
// own unpacked run.sh's refusal the same way.
package gpu_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// fakeBundle builds the bundle with placeholder binaries into a temporary
// folder and returns the unpacked bundle's folder.
func fakeBundle(t *testing.T) (dir, tarball string) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	out := t.TempDir()
	cmd := exec.Command("bash", "bundle.sh", "-o", out, "--fake-binaries")
	cmd.Env = append(os.Environ(), "VERSION=test")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	t.Logf("bundle.sh --fake-binaries:\n%s", stderr.String())
	if err != nil {
		t.Fatalf("bundle.sh: %v", err)
	}
	tarball = strings.TrimSpace(string(stdout))
	if filepath.Base(tarball) != "hone-gpu-test-linux-amd64.tar.gz" {
		t.Fatalf("tarball %q", tarball)
	}
	dir = t.TempDir()
	if out, err := exec.Command("tar", "-C", dir, "-xzf", tarball).CombinedOutput(); err != nil {
		t.Fatalf("untar: %v\n%s", err, out)
	}
	return filepath.Join(dir, "hone-gpu-test-linux-amd64"), tarball
}

// TestBundleLayout: the tarball holds one folder with the scripts, the
// binaries, the runtime fallback, the anchor and VERSION, nothing else.
func TestBundleLayout(t *testing.T) {
	dir, tarball := fakeBundle(t)
	out, err := exec.Command("tar", "-tzf", tarball).Output()
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !strings.HasSuffix(l, "/") {
			files = append(files, strings.TrimPrefix(l, "hone-gpu-test-linux-amd64/"))
		}
	}
	sort.Strings(files)
	want := []string{"README.md", "VERSION", "bin/cuda.test", "bin/gpu-bench", "bin/hone-cuda", "env.sh",
		"lib/libcudart.so.13", "python/peft_anchor.py", "run.sh"}
	if strings.Join(files, " ") != strings.Join(want, " ") {
		t.Errorf("tarball holds %v, want %v", files, want)
	}
	for _, f := range []string{"run.sh", "env.sh", "bin/hone-cuda", "bin/cuda.test", "bin/gpu-bench"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Mode()&0o111 == 0 {
			t.Errorf("%s not executable (%v)", f, err)
		}
	}
	v, err := os.ReadFile(filepath.Join(dir, "VERSION"))
	if err != nil || !strings.HasPrefix(string(v), "hone test\ncommit ") {
		t.Errorf("VERSION %q (%v)", v, err)
	}
}

// host is a fake GPU host: a bin folder first on PATH (nvidia-smi), a
// folder for the driver's library, one for the CUDA libraries.
type host struct {
	bin, driver, cuda string
	env               []string
}

func newHost(t *testing.T) *host {
	d := t.TempDir()
	h := &host{bin: filepath.Join(d, "bin"), driver: filepath.Join(d, "driver"), cuda: filepath.Join(d, "cuda")}
	for _, p := range []string{h.bin, h.driver, filepath.Join(h.cuda, "lib64")} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "PATH", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "PYTHON":
			continue
		}
		env = append(env, kv)
	}
	h.env = append(env, "PATH="+h.bin+":"+os.Getenv("PATH"), "PYTHON=/nonexistent/python3")
	return h
}

func (h *host) file(t *testing.T, path, body string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
}

// nvidiaSMI installs a fake nvidia-smi: with gpu, one H100; without, the
// driver's "couldn't communicate" failure.
func (h *host) nvidiaSMI(t *testing.T, gpu bool) {
	body := "#!/bin/sh\necho 'NVIDIA-SMI has failed because it couldn'\"'\"'t communicate with the NVIDIA driver.'\nexit 9\n"
	if gpu {
		body = "#!/bin/sh\ncase \"$1\" in\n-L) echo 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-fake)';;\n" +
			"*) echo 'NVIDIA H100 80GB HBM3, 580.159.04, 81559 MiB';;\nesac\n"
	}
	h.file(t, filepath.Join(h.bin, "nvidia-smi"), body, 0o755)
}

func (h *host) run(t *testing.T, dir string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(dir, "run.sh"), args...)
	cmd.Env, cmd.Dir = h.env, t.TempDir()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	case err != nil:
		t.Fatal(err)
	}
	return 0, string(out)
}

// systemHas reports whether this machine has name where env.sh would find
// it anyway (a real GPU host): those cases cannot be faked here.
func systemHas(name string) bool {
	if out, err := exec.Command("sh", "-c", "ldconfig -p 2>/dev/null").Output(); err == nil &&
		bytes.Contains(out, []byte(name+" ")) {
		return true
	}
	for _, d := range []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/nvidia/lib64",
		"/usr/lib/wsl/lib", "/usr/local/cuda/lib64"} {
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			return true
		}
	}
	return false
}

// TestRunRefuses: without a GPU, run.sh stops before any step with exit 2
// and the reason (no nvidia-smi, nvidia-smi failing, no libcuda.so.1); with
// a GPU but no CUDA 13 libraries, exit 3 naming them and how to get them.
func TestRunRefuses(t *testing.T) {
	dir, _ := fakeBundle(t)
	t.Run("no nvidia-smi", func(t *testing.T) {
		if _, err := exec.LookPath("nvidia-smi"); err == nil {
			t.Skip("this machine has nvidia-smi")
		}
		h := newHost(t)
		code, out := h.run(t, dir)
		if code != 2 || !strings.Contains(out, "no NVIDIA GPU here: nvidia-smi is not installed") ||
			!strings.Contains(out, "refusing to run (exit 2): nothing was measured") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})
	t.Run("nvidia-smi fails", func(t *testing.T) {
		h := newHost(t)
		h.nvidiaSMI(t, false)
		code, out := h.run(t, dir)
		if code != 2 || !strings.Contains(out, "nvidia-smi -L lists none (NVIDIA-SMI has failed") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})
	t.Run("no libcuda", func(t *testing.T) {
		if systemHas("libcuda.so.1") {
			t.Skip("this machine has libcuda.so.1")
		}
		h := newHost(t)
		h.nvidiaSMI(t, true)
		code, out := h.run(t, dir, "--check")
		if code != 2 || !strings.Contains(out, "the driver's libcuda.so.1 is nowhere the loader looks") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})
	t.Run("no cublas", func(t *testing.T) {
		if systemHas("libcublas.so.13") {
			t.Skip("this machine has libcublas.so.13")
		}
		h := newHost(t)
		h.nvidiaSMI(t, true)
		h.file(t, filepath.Join(h.driver, "libcuda.so.1"), "", 0o644)
		h.env = append(h.env, "LD_LIBRARY_PATH="+h.driver)
		code, out := h.run(t, dir)
		if code != 3 || !strings.Contains(out, "not the CUDA 13 libraries: libcublas.so.13 libcublasLt.so.13 not found") ||
			!strings.Contains(out, "pip install nvidia-cublas==13.*") {
			t.Fatalf("exit %d:\n%s", code, out)
		}
	})
}

// TestRunSteps: on a (fake) GPU host run.sh finds the libraries, runs each
// step with its own log, skips what the host lacks (ncu, torch), writes the
// summary, and exits 1 when a step fails.
func TestRunSteps(t *testing.T) {
	dir, _ := fakeBundle(t)
	h := newHost(t)
	h.nvidiaSMI(t, true)
	h.file(t, filepath.Join(h.driver, "libcuda.so.1"), "", 0o644)
	for _, l := range []string{"libcublas.so.13", "libcublasLt.so.13"} {
		h.file(t, filepath.Join(h.cuda, "lib64", l), "", 0o644)
	}
	h.env = append(h.env, "LD_LIBRARY_PATH="+h.driver, "CUDA_HOME="+h.cuda)
	if _, err := exec.LookPath("ncu"); err == nil {
		t.Skip("this machine has ncu: the profile step would run it on the placeholder")
	}
	logs := t.TempDir()
	code, out := h.run(t, dir, "--out", logs, "--quick")
	t.Logf("run.sh --quick:\n%s", out)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	sum, err := os.ReadFile(filepath.Join(logs, "summary.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		"bundle: hone test", "gpu: NVIDIA H100 80GB HBM3, 580.159.04",
		"LD_LIBRARY_PATH=" + filepath.Join(h.cuda, "lib64") + ":" + dir + "/lib:" + h.driver,
		"selftest       pass", "device-tests   pass", "bench          pass",
		"profile        skipped: no ncu", "peft-anchor    skipped: /nonexistent/python3 lacks torch",
		"gpu-bench (placeholder of the packaging test) -compare -lora-autocast both -shapes qwen3-0.6b -steps 1",
	} {
		if !strings.Contains(string(sum), w) {
			t.Errorf("summary lacks %q:\n%s", w, sum)
		}
	}
	for _, l := range []string{"selftest", "device-tests", "bench"} {
		b, err := os.ReadFile(filepath.Join(logs, l+".log"))
		if err != nil || !strings.Contains(string(b), "placeholder of the packaging test") {
			t.Errorf("%s.log: %q %v", l, b, err)
		}
	}
	// A failing step fails the run, and the others still run.
	h.file(t, filepath.Join(dir, "bin", "cuda.test"), "#!/bin/sh\necho 'FAIL: TestDevice'\nexit 1\n", 0o755)
	code, out = h.run(t, dir, "--out", t.TempDir(), "--quick", "--skip", "selftest")
	if code != 1 || !strings.Contains(out, "device-tests: FAIL (exit 1)") || !strings.Contains(out, "bench: pass") ||
		!strings.Contains(out, "selftest       skipped (--skip)") {
		t.Fatalf("with a failing step: exit %d\n%s", code, out)
	}
	// Device tests that skip (the runtime could not open the GPU env.sh
	// found) fail the step.
	h.file(t, filepath.Join(dir, "bin", "cuda.test"), "#!/bin/sh\necho '--- SKIP: TestDevice (0.00s)'\necho PASS\n", 0o755)
	code, out = h.run(t, dir, "--out", t.TempDir(), "--quick", "--only", "device-tests")
	if code != 1 || !strings.Contains(out, "device-tests: FAIL (log: --- SKIP: TestDevice)") || strings.Contains(out, "bench") {
		t.Fatalf("with skipped device tests: exit %d\n%s", code, out)
	}
}
