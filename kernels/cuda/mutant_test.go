//go:build cgo && !cuda

package cuda

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// mutant is a deliberately broken kernel: one edit of a source file, and
// the conformance subtest that must catch it.
type mutant struct {
	name, file, from, to, test string
	asan                       bool // run under AddressSanitizer (the wrong write is outside every checked value)
	// race, when set, is a test run with the shim's racecheck that must
	// fail with a racecheck report (a hazard, not a wrong value). test may
	// then be empty: racecheck alone catches the mutant. raceHooks builds
	// it with the store hooks (global memory; see TestRacecheckGlobal).
	race      string
	raceHooks bool
	// long: only with HONE_TEST_LONG set (make test-long). make test keeps
	// one mutant per way of catching one (a value, the eager-warps
	// schedule with racecheck on shared memory, racecheck on global
	// memory, AddressSanitizer, cuBLASLt's argument checks): each costs a
	// build of the package.
	long bool
}

var mutants = []mutant{
	{
		// cuBLASLt's A is our B: its transpose must come from trans_b.
		name: "wrong transpose flag in the cuBLASLt descriptor",
		file: "csrc/bf16.cu",
		from: "const int32_t op_a = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;",
		to:   "const int32_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;",
		test: "TestConformanceEmulated/fast/passes/BF16",
		long: true,
	},
	{
		// The heuristic assumes 256-byte aligned operands unless told.
		name: "operand alignment not told to the cuBLASLt heuristic",
		file: "csrc/bf16.cu",
		from: "for (int i = 0; i < 4 && s == CUBLAS_STATUS_SUCCESS; i++) {",
		to:   "for (int i = 0; i < 0 && s == CUBLAS_STATUS_SUCCESS; i++) {",
		test: "TestConformanceEmulated/fast/passes/Convert",
	},
	{
		name: "missing __syncthreads in block_sum",
		file: "csrc/common.cuh",
		from: "  v = warp_sum(v);\n  if (lane == 0) partial[warp] = v;\n  __syncthreads();\n",
		to:   "  v = warp_sum(v);\n  if (lane == 0) partial[warp] = v;\n",
		test: "TestConformanceEmulated/fast/passes/RMSNorm",
		race: "TestConformanceRacecheck/fast/RMSNorm",
		long: true,
	},
	{
		// Caught only when a warp runs ahead (the eager-warps schedule):
		// warp 0 starts the next block_sum and overwrites the partials
		// before the other warps have read them.
		name: "missing trailing __syncthreads in block_sum",
		file: "csrc/common.cuh",
		from: "  v = lane < warps ? partial[lane] : T(0);\n  v = warp_sum(v);\n  __syncthreads();\n",
		to:   "  v = lane < warps ? partial[lane] : T(0);\n  v = warp_sum(v);\n",
		test: "TestConformanceEmulated/fast/eager-warps/RMSNorm",
		race: "TestConformanceRacecheck/fast/RMSNorm",
	},
	{
		// No kernel of csrc/ calls block_max twice, so neither schedule
		// nor any value shows this barrier missing; racecheck does, in the
		// self-test kernel that calls block_max twice.
		name: "missing trailing __syncthreads in block_max",
		file: "csrc/common.cuh",
		from: "  v = lane < warps ? partial[lane] : -INFINITY;\n  v = warp_max(v);\n  __syncthreads();\n",
		to:   "  v = lane < warps ? partial[lane] : -INFINITY;\n  v = warp_max(v);\n",
		race: "TestRacecheckSelftest/block_max_twice",
		long: true,
	},
	{
		name: "off-by-one block index in rmsnorm_kernel2",
		file: "csrc/rmsnorm.cu",
		from: "__global__ void rmsnorm_kernel2(float* out, const float* x, const float* w, long rows, long width, float eps) {\n  const long row = blockIdx.x;\n",
		to:   "__global__ void rmsnorm_kernel2(float* out, const float* x, const float* w, long rows, long width, float eps) {\n  const long row = blockIdx.x + 1;\n",
		test: "TestConformanceEmulated/fast/passes/RMSNorm",
	},
	{
		name: "missing __syncthreads before the next key tile in attention_kernel2",
		file: "csrc/attention.cu",
		from: "        for (int d = 0; d < D; d++) acc[d] += p * vs[jj * D + d];\n      }\n    }\n    __syncthreads();\n",
		to:   "        for (int d = 0; d < D; d++) acc[d] += p * vs[jj * D + d];\n      }\n    }\n",
		test: "TestConformanceEmulated/fast/passes/Attention",
		race: "TestConformanceRacecheck/fast/Attention",
		long: true,
	},
	{
		name: "off-by-one causal mask in attention_bwd_dkdv_kernel",
		file: "csrc/attention.cu",
		from: "if (a.past + i0 + ii < j) continue;",
		to:   "if (a.past + i0 + ii <= j) continue;",
		test: "TestConformanceEmulated/fast/passes/Attention",
		long: true,
	},
	{
		// The tensor-core attention (attention_flash.cu). A tile stored
		// without its padding where the fragment loads expect it: every
		// second word of a row lands in the wrong place.
		name: "broken shared-memory tile layout in the flash attention kernels",
		file: "csrc/attention_flash.cu",
		from: "copy16(tile, r * SW + 4 * c, src + 8 * c);",
		to:   "copy16(tile, r * (SW - 4) + 4 * c, src + 8 * c);",
		test: "TestConformanceEmulated/fast/passes/AttentionBF16",
		long: true,
	},
	{
		// Each query also sees the key after it.
		name: "off-by-one causal mask in attention_flash_fwd",
		file: "csrc/attention_flash.cu",
		from: "sv = diag && (qi[x] < 0 || j > a.past + qi[x]) ? -INFINITY : sv * a.scale_log2;",
		to:   "sv = diag && (qi[x] < 0 || j > a.past + qi[x] + 1) ? -INFINITY : sv * a.scale_log2;",
		test: "TestConformanceEmulated/fast/passes/AttentionBF16",
		long: true,
	},
	{
		// The online softmax's rescale of the output accumulators dropped
		// (the running sum still rescaled): keys of earlier tiles keep the
		// weight they had under an older, smaller maximum.
		name: "missing online-softmax rescale in attention_flash_fwd",
		file: "csrc/attention_flash.cu",
		from: "        o[nt][2 * x] *= corr;\n        o[nt][2 * x + 1] *= corr;\n",
		to:   "",
		test: "TestConformanceEmulated/fast/passes/AttentionBF16",
	},
	{
		// The dK/dV pass skips 8 rows of every row tile.
		name: "row tiles that skip rows in attention_flash_dkdv",
		file: "csrc/attention_flash.cu",
		from: "for (long R0 = r_begin, it = 0; R0 < r_end; R0 += kTile, it++) {",
		to:   "for (long R0 = r_begin, it = 0; R0 < r_end; R0 += kTile + 8, it++) {",
		test: "TestConformanceEmulated/fast/passes/AttentionBF16",
		long: true,
	},
	{
		// Blocks overlap by one element: for out-of-place ops both writers
		// store the same value (only racecheck's global-memory check sees
		// it); in-place AXPY adds twice, which the values show.
		name:      "overlapping blocks in the elementwise grid-stride loop",
		file:      "csrc/elementwise.cu",
		from:      "  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += long(gridDim.x) * blockDim.x)",
		to:        "  for (long i = long(blockIdx.x) * (blockDim.x - 1) + threadIdx.x; i < (n); i += long(gridDim.x) * blockDim.x)",
		test:      "TestConformanceEmulated/readable/passes/Elementwise",
		race:      "TestConformanceRacecheck/readable/Elementwise",
		raceHooks: true,
	},
	{
		// The walk down the bins starts one low: the top bin of a digit is
		// never taken and its weight is missing from what lies above.
		name: "off-by-one bucket in the sampling radix select",
		file: "csrc/sample.cu",
		from: "    int b = kRadixBins - 1;\n",
		to:   "    int b = kRadixBins - 2;\n",
		test: "TestConformanceEmulated/fast/passes/Sample",
		long: true,
	},
	{
		// One tie too many at the k-th key: it overwrites the first
		// candidate of the next thread's slice.
		name: "a tie too many at the sampling threshold",
		file: "csrc/sample.cu",
		from: "return k > key || (k == key && seen++ < keep);",
		to:   "return k > key || (k == key && seen++ <= keep);",
		test: "TestConformanceEmulated/fast/passes/Sample",
		long: true,
	},
	{
		// Thread j == width adds a column past the end of dst: every value
		// the suite reads stays right, only AddressSanitizer sees the write.
		name: "off-by-one bound in sum_rows_kernel writes past dst",
		file: "csrc/reduce.cu",
		from: "  if (j >= width) return;\n  float s = 0;\n  for (long i = 0; i < rows; i++) s += x[i * width + j];",
		to:   "  if (j > width) return;\n  float s = 0;\n  for (long i = 0; i < rows; i++) s += x[i * width + j];",
		test: "TestConformanceEmulated/readable/passes/Reductions",
		asan: true,
	},
}

// TestMutantsFail shows the emulated conformance suite catches broken
// kernels: for each mutant it copies this package into a scratch module,
// applies the edit, and runs the conformance subtest, which must fail (and
// fail in the suite, not in the build); a missing barrier must also be
// reported by racecheck. (TestRacecheckCatchesEveryMissingBarrier drops
// every barrier in turn without recompiling; these are real edits.) make
// test runs five of them, one per way of catching a mutant; HONE_TEST_LONG=1
// (make test-long) runs all.
func TestMutantsFail(t *testing.T) {
	// Parallel: a rebuild and run in a subprocess, mostly waiting on one
	// core; the package's other subprocess tests use the other.
	t.Parallel()
	if testing.Short() {
		t.Skip("compiles the emulated backend once per mutant")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			if m.long && !longTests() {
				t.Skip("set HONE_TEST_LONG=1 (make test-long) to run every mutant")
			}
			mod := t.TempDir()
			pkg := filepath.Join(mod, "cuda")
			copyPackage(t, ".", pkg)
			src := filepath.Join(pkg, m.file)
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Count(b, []byte(m.from)) != 1 {
				t.Fatalf("%s: the text to mutate is not there exactly once; update the mutant", m.file)
			}
			if err := os.WriteFile(src, bytes.Replace(b, []byte(m.from), []byte(m.to), 1), 0o644); err != nil {
				t.Fatal(err)
			}
			gomod := "module mutant\n\ngo 1.22\n\nrequire github.com/hone-rl/hone v0.0.0\n\nreplace github.com/hone-rl/hone => " + repo + "\n"
			if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte(gomod), 0o644); err != nil {
				t.Fatal(err)
			}
			if sum, err := os.ReadFile(filepath.Join(repo, "go.sum")); err == nil {
				if err := os.WriteFile(filepath.Join(mod, "go.sum"), sum, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=1")
			if m.race != "" {
				cmd := exec.Command("go", "test", "-count=1", "-run", "^"+strings.ReplaceAll(m.race, "/", "$/^")+"$", "./cuda")
				cmd.Dir = mod
				cmd.Env = env
				if m.raceHooks {
					cmd.Env = append(env[:len(env):len(env)], "CGO_CXXFLAGS="+storeHookFlags)
				}
				out, err := cmd.CombinedOutput()
				i := bytes.Index(out, []byte("racecheck: "))
				if err == nil || !bytes.Contains(out, []byte("--- FAIL: "+m.race)) || i < 0 {
					t.Fatalf("racecheck did not report the mutant in %s:\n%s", m.race, out)
				}
				line, _, _ := bytes.Cut(out[i:], []byte("\n"))
				t.Logf("reported: %s", line)
			}
			if m.test == "" {
				return
			}
			args := []string{"test", "-count=1", "-run", "^" + strings.ReplaceAll(m.test, "/", "$/^") + "$", "./cuda"}
			if m.asan {
				args = append([]string{"test", "-asan"}, args[1:]...)
				env = append(env, "ASAN_OPTIONS=detect_leaks=0")
			}
			cmd := exec.Command("go", args...)
			cmd.Dir = mod
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the mutant passed %s:\n%s", m.test, out)
			}
			if m.asan {
				// An overrun past the block is a heap-buffer-overflow, one
				// into the caching allocator's rounding slack a
				// use-after-poison.
				i := bytes.Index(out, []byte("ERROR: AddressSanitizer: "))
				if i < 0 {
					t.Fatalf("AddressSanitizer did not report the overrun:\n%s", out)
				}
				line, _, _ := bytes.Cut(out[i:], []byte("\n"))
				t.Logf("caught: %s", line)
				return
			}
			if !bytes.Contains(out, []byte("--- FAIL: "+m.test)) {
				t.Fatalf("the mutant did not fail in %s:\n%s", m.test, out)
			}
			for _, l := range strings.Split(string(out), "\n") {
				if strings.Contains(l, ".go:") {
					t.Logf("caught: %s", strings.TrimSpace(l))
					break
				}
			}
		})
	}
}

// longTests reports whether HONE_TEST_LONG is set (make test-long): the
// tests then run in full what make test runs a representative part of.
func longTests() bool { return os.Getenv("HONE_TEST_LONG") != "" }

// copyPackage copies the package's Go files (tests but this one), emu.cc
// and csrc/ to dst.
func copyPackage(t *testing.T, from, dst string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			if rel != "." && rel != "csrc" && !strings.HasPrefix(rel, "csrc"+string(filepath.Separator)) {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		base := filepath.Base(p)
		keep := strings.HasPrefix(rel, "csrc") || base == "emu.cc" || (strings.HasSuffix(base, ".go") && base != "mutant_test.go")
		if !keep {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
