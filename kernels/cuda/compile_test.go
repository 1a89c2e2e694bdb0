package cuda

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// The CUDA toolkit comes from NVIDIA's PyPI wheels (scripts/cuda/ensure.sh,
// run by .ci/run, which exports HONE_CUDA_HOME and HONE_REQUIRE_CUDA=1).
// Without it these tests skip, unless HONE_REQUIRE_CUDA=1.

// nvccFlags: device code for Ampere (sm_80) and Hopper (sm_90) plus PTX for
// later GPUs, warnings as errors.
var nvccFlags = []string{
	"-ccbin", "g++", "-std=c++17", "-O2", "-Werror", "all-warnings", "-Xcompiler", "-Wall",
	"-gencode", "arch=compute_80,code=sm_80",
	"-gencode", "arch=compute_90,code=sm_90",
	"-gencode", "arch=compute_90,code=compute_90",
}

func toolkit(t *testing.T) string {
	t.Helper()
	root := os.Getenv("HONE_CUDA_HOME")
	if root == "" {
		if dir := os.Getenv("HONE_CUDA_DIR"); dir != "" {
			root = filepath.Join(dir, "toolkit")
		} else if home, err := os.UserHomeDir(); err == nil {
			root = filepath.Join(home, ".cache", "hone", "cuda", "toolkit")
		}
	}
	if _, err := os.Stat(filepath.Join(root, "bin", "nvcc")); err != nil {
		if os.Getenv("HONE_REQUIRE_CUDA") == "1" {
			t.Fatalf("HONE_REQUIRE_CUDA=1 and no CUDA toolkit at %q (HONE_CUDA_HOME; bash scripts/cuda/ensure.sh installs it)", root)
		}
		t.Skipf("no CUDA toolkit at %q (bash scripts/cuda/ensure.sh; HONE_CUDA_HOME)", root)
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Skipf("the toolkit wheels are for linux/amd64, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	return root
}

// kernelSources lists csrc/*.cu.
func kernelSources(t *testing.T) []string {
	t.Helper()
	cu, err := filepath.Glob("csrc/*.cu")
	if err != nil || len(cu) == 0 {
		t.Fatalf("no csrc/*.cu (%v)", err)
	}
	sort.Strings(cu)
	return cu
}

// buildLibrary compiles every csrc/*.cu with nvcc and archives them as
// libhonecuda.a, in ~/.cache/hone/cuda/obj/<hash of compiler, flags and
// sources> (compiles are slow: a cache hit does nothing). It returns the
// archive's directory.
func buildLibrary(t *testing.T, root string) string {
	t.Helper()
	cu := kernelSources(t)
	nvcc := filepath.Join(root, "bin", "nvcc")
	version, err := exec.Command(nvcc, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("nvcc --version: %v\n%s", err, version)
	}
	digest, err := sourcesDigest("csrc/emu")
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	h.Write(version)
	h.Write([]byte(strings.Join(nvccFlags, " ")))
	h.Write([]byte(digest)) // the embedded sources are the files nvcc reads (same build)
	cache := os.Getenv("HONE_CUDA_DIR")
	if cache == "" {
		cache = filepath.Join(filepath.Dir(root))
	}
	dir := filepath.Join(cache, "obj", hex.EncodeToString(h.Sum(nil))[:20])
	lib := filepath.Join(dir, "libhonecuda.a")
	if _, err := os.Stat(lib); err == nil {
		t.Logf("nvcc objects cached in %s", dir)
		return dir
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "build-")
	if err != nil {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if tmp, err = os.MkdirTemp(filepath.Dir(dir), "build-"); err != nil {
			t.Fatal(err)
		}
	}
	defer os.RemoveAll(tmp)
	var objs []string
	for _, f := range cu {
		obj := filepath.Join(tmp, strings.TrimSuffix(filepath.Base(f), ".cu")+".o")
		args := append(append([]string(nil), nvccFlags...), "-c", f, "-o", obj)
		out, err := exec.Command(nvcc, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("nvcc %s: %v\n%s", f, err, out)
		}
		if len(bytes.TrimSpace(out)) > 0 {
			t.Logf("nvcc %s:\n%s", f, out)
		}
		objs = append(objs, obj)
	}
	// The objects stay beside the archive for TestNvccCompiles to read.
	if out, err := exec.Command("ar", append([]string{"rcs", filepath.Join(tmp, "libhonecuda.a")}, objs...)...).CombinedOutput(); err != nil {
		t.Fatalf("ar: %v\n%s", err, out)
	}
	if err := os.Rename(tmp, dir); err != nil && !os.IsExist(err) {
		if _, serr := os.Stat(lib); serr != nil { // a concurrent build may have won the rename
			t.Fatal(err)
		}
	}
	pruneObjects(filepath.Dir(dir), 4)
	return dir
}

// pruneObjects keeps the keep most recent object directories under obj/
// (each source change makes a new one).
func pruneObjects(obj string, keep int) {
	entries, err := os.ReadDir(obj)
	if err != nil {
		return
	}
	type built struct {
		path string
		mod  int64
	}
	var dirs []built
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !e.IsDir() || strings.HasPrefix(e.Name(), "build-") {
			continue
		}
		dirs = append(dirs, built{filepath.Join(obj, e.Name()), info.ModTime().UnixNano()})
	}
	sort.Slice(dirs, func(i, j int) bool { return dirs[i].mod > dirs[j].mod })
	for i := keep; i < len(dirs); i++ {
		os.RemoveAll(dirs[i].path)
	}
}

// fatbinTargets lists what the fat binary of an nvcc object carries:
// "sm_XY" for a cubin, "compute_XY" for PTX. The .nv_fatbin section is a
// sequence of fat binaries (magic 0xBA55ED50, a 16-byte header with its
// payload size), each a sequence of entries whose header gives the kind
// (1 PTX, 2 ELF cubin) at byte 0, its own size at 4, the padded payload
// size at 8 and the SM version at 28.
func fatbinTargets(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s := f.Section(".nv_fatbin")
	if s == nil {
		return nil, fmt.Errorf("%s: no .nv_fatbin section", path)
	}
	b, err := s.Data()
	if err != nil {
		return nil, err
	}
	var out []string
	for off := 0; off+16 <= len(b); {
		if binary.LittleEndian.Uint32(b[off:]) != 0xBA55ED50 {
			return nil, fmt.Errorf("%s: bad fatbin magic at %d", path, off)
		}
		hs, size := int(binary.LittleEndian.Uint16(b[off+6:])), int(binary.LittleEndian.Uint64(b[off+8:]))
		end := off + hs + size
		if end > len(b) {
			return nil, fmt.Errorf("%s: fatbin overruns its section", path)
		}
		for p := off + hs; p+32 <= end; {
			kind, ehs := binary.LittleEndian.Uint16(b[p:]), int(binary.LittleEndian.Uint32(b[p+4:]))
			pad, sm := int(binary.LittleEndian.Uint64(b[p+8:])), binary.LittleEndian.Uint32(b[p+28:])
			switch kind {
			case 1:
				out = append(out, fmt.Sprintf("compute_%d", sm))
			case 2:
				out = append(out, fmt.Sprintf("sm_%d", sm))
			}
			if ehs+pad <= 0 {
				break
			}
			p += ehs + pad
		}
		off = end
	}
	sort.Strings(out)
	return out, nil
}

// TestNvccCompiles compiles every kernel file for sm_80 and sm_90 plus PTX
// (warnings as errors) and checks each object's fat binary carries exactly
// those.
func TestNvccCompiles(t *testing.T) {
	root := toolkit(t)
	dir := buildLibrary(t, root)
	cu := kernelSources(t)
	for _, f := range cu {
		obj := filepath.Join(dir, strings.TrimSuffix(filepath.Base(f), ".cu")+".o")
		got, err := fatbinTargets(obj)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"compute_90", "sm_80", "sm_90"}; strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s carries %v, want %v", filepath.Base(obj), got, want)
		}
	}
}

// TestCudaTagLinks builds the real backend (go test -c -tags cuda) against
// libhonecuda.a, libcudart and libcublas from the wheels, then runs the
// linked test binary: with a GPU it runs the conformance suite on the
// device; here it must load the runtime, find no device, and say so.
func TestCudaTagLinks(t *testing.T) {
	root := toolkit(t)
	dir := buildLibrary(t, root)
	bin := filepath.Join(t.TempDir(), "cuda.test")
	lib := filepath.Join(root, "lib")
	build := exec.Command("go", "test", "-c", "-tags", "cuda", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=1",
		"CGO_LDFLAGS=-L"+dir+" -L"+lib+" -Wl,-rpath,"+lib)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go test -c -tags cuda: %v\n%s", err, out)
	}
	run := exec.Command(bin, "-test.run", "TestDevice", "-test.v")
	out, err := run.CombinedOutput()
	t.Logf("the linked backend on this machine:\n%s", out)
	if err != nil {
		t.Fatalf("running the cuda-tagged test binary: %v", err)
	}
	if !bytes.Contains(out, []byte("no CUDA device")) && !bytes.Contains(out, []byte("--- PASS: TestDevice")) {
		t.Fatalf("the cuda-tagged test binary neither found a device nor reported its absence")
	}
}
