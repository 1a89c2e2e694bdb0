//go:build cgo && !cuda

package cuda

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hone-rl/hone/kernels/conformance"
)

// TestRacecheckSelftest: the shim's racecheck reports each deliberately
// racy kernel of csrc/emu/selftest.cuh with the right kind of hazard and
// leaves the race-free ones (atomics between barriers, warp-synchronous
// exchange after __syncwarp, block_max called twice) alone. With racecheck
// off the racy kernels run without an error: it is the switch that finds
// them.
func TestRacecheckSelftest(t *testing.T) {
	cases := []struct {
		which int
		name  string
		want  string // the report's start; "" for race-free
	}{
		{4, "write then read without a barrier", "racecheck: RAW hazard on shared memory in raw_kernel, block (0,0,0): thread (0,0,0) wrote and thread (1,0,0) read buf word 0"},
		{5, "read then overwrite without a barrier", "racecheck: WAR hazard on shared memory in war_kernel, block (0,0,0): thread (0,0,0) read and thread (1,0,0) wrote buf word 1"},
		{6, "two threads write one word", "racecheck: WAW hazard on shared memory in waw_kernel, block (0,0,0): thread (0,0,0) wrote and thread (1,0,0) wrote buf word 0"},
		{7, "atomics between barriers", ""},
		// Thread 0 reads after its own atomic; thread 1's atomic then
		// overwrites what thread 0 read.
		{8, "plain read beside other threads' atomics", "racecheck: WAR hazard on shared memory in atomic_read_kernel, block (0,0,0): thread (0,0,0) read and thread (1,0,0) atomically updated buf word 0"},
		{9, "exchange within a warp after __syncwarp", ""},
		{10, "exchange across warps after __syncwarp", "racecheck: RAW hazard on shared memory in cross_warp_kernel, block (0,0,0): thread (32,0,0) wrote and thread (0,0,0) read buf word 32"},
		{11, "block_max twice", ""},
		{12, "dynamic shared memory out of bounds", "racecheck: dynamic_oob_kernel, thread (63,0,0): access of 4 bytes at byte 256 of dynamic shared memory (256 bytes)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := emuSelftestWith(c.which, true, "", 0)
			if c.want == "" {
				if err != nil {
					t.Fatalf("race-free kernel reported: %v", err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("err %v\nwant %s...", err, c.want)
			}
			if c.which == 12 {
				return // writes past the buffer without racecheck
			}
			if _, err := emuSelftestWith(c.which, false, "", 0); err != nil {
				t.Fatalf("without racecheck: %v", err)
			}
		})
	}
	out, err := emuSelftestWith(7, true, "", 0)
	if err != nil || out[0] != 64*63/2 || out[63] != 64*63/2 {
		t.Fatalf("atomics on shared memory: %v %v", out[:2], err)
	}
	out, err = emuSelftestWith(11, true, "", 0)
	if err != nil || out[0] != 63+1000 {
		t.Fatalf("block_max twice: %v %v", out[:2], err)
	}
}

// TestConformanceRacecheck runs the conformance suite on every kernel
// variant with racecheck on: no hazard in any kernel, the sampling one
// included (a report is a backend error, which fails the group), and
// results as without it.
func TestConformanceRacecheck(t *testing.T) {
	for _, v := range Variants() {
		t.Run(v, func(t *testing.T) {
			be, err := NewEmulated(v)
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			be.SetRacecheck(true)
			for _, g := range conformance.Groups(be) {
				t.Run(g.Name, func(t *testing.T) { g.Run(t) })
			}
		})
	}
}

// barrier is one __syncthreads call site of csrc/.
type barrier struct {
	file string // base name
	line int
}

// barriers lists every __syncthreads call site of the kernels (csrc/, not
// the shim), skipping comments.
func barriers(t *testing.T) []barrier {
	t.Helper()
	var bs []barrier
	for _, pat := range []string{"csrc/*.cu", "csrc/*.cuh"} {
		files, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			fh, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(fh)
			for n := 1; sc.Scan(); n++ {
				code, _, _ := strings.Cut(sc.Text(), "//")
				if strings.Contains(code, "__syncthreads()") {
					bs = append(bs, barrier{filepath.Base(f), n})
				}
			}
			fh.Close()
		}
	}
	sort.Slice(bs, func(i, j int) bool {
		return bs[i].file < bs[j].file || bs[i].file == bs[j].file && bs[i].line < bs[j].line
	})
	return bs
}

// recorder is a conformance.T that keeps the messages.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// raceReport returns the first racecheck report among the messages.
func (r *recorder) raceReport() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.msgs {
		if i := strings.Index(m, "racecheck: "); i >= 0 {
			return m[i:]
		}
	}
	return ""
}

// findRace runs, with the barrier b dropped and racecheck on, what may
// reach it until racecheck reports a hazard: the block_max-twice self-test,
// then for each variant the sampling kernel and the other conformance
// groups. It returns where it was caught and the report, or "" if nothing
// reported.
func findRace(t *testing.T, b barrier) (where, report string) {
	t.Helper()
	if _, err := emuSelftestWith(11, true, b.file, b.line); err != nil {
		return "block_max twice (selftest.cuh)", err.Error()
	}
	if f, ok := raceFirst[b.file]; ok {
		// Straight to the group that runs the file's kernels.
		if where, report := raceInGroup(t, b, f[0], f[1]); report != "" {
			return where, report
		}
	}
	for _, v := range Variants() {
		be, err := NewEmulated(v)
		if err != nil {
			t.Fatal(err)
		}
		be.SetRacecheck(true)
		be.dropBarrier(b.file, b.line)
		if err := sampleEveryPath(be); err != nil {
			be.Close()
			return v + "/Sample", err.Error()
		}
		for _, g := range conformance.Groups(be) {
			if g.Name == "Sample" {
				continue // the sampling kernel ran above
			}
			rec := &recorder{}
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				g.Run(rec)
			}()
			wg.Wait()
			if r := rec.raceReport(); r != "" {
				be.Close()
				return v + "/" + g.Name, r
			}
		}
		be.Close()
	}
	return "", ""
}

// sampleEveryPath runs the sampling kernel down each of its paths (the
// whole-row draw, top-k, greedy, top-p alone; without and with top-N
// log-probabilities) and returns the backend's error.
func sampleEveryPath(be *Backend) error {
	rng := rand.New(rand.NewPCG(3, 4))
	x := make([]float32, 4*300)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	lt := be.Upload(x, 4, 300)
	defer be.Free(lt)
	params := []Sampling{{Temperature: 1, TopP: 1}, {Temperature: 0.7, TopK: 5, TopP: 1}, {TopP: 1}, {Temperature: 1, TopP: 0.9}}
	be.Sample(lt, params, 0)
	be.Sample(lt, params, 3)
	return be.Err()
}

// raceFirst names, for a kernel file only some variant and group reach,
// that variant and conformance group (findRace tries them first).
var raceFirst = map[string][2]string{"attention_flash.cu": {VariantFast, "AttentionBF16"}}

// raceInGroup runs one conformance group of one variant with the barrier b
// dropped and racecheck on, and returns the report ("" if none).
func raceInGroup(t *testing.T, b barrier, variant, group string) (where, report string) {
	t.Helper()
	be, err := NewEmulated(variant)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	be.SetRacecheck(true)
	be.dropBarrier(b.file, b.line)
	for _, g := range conformance.Groups(be) {
		if g.Name != group {
			continue
		}
		rec := &recorder{}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.Run(rec)
		}()
		wg.Wait()
		return variant + "/" + group, rec.raceReport()
	}
	return "", ""
}

// TestRacecheckCatchesEveryMissingBarrier removes each __syncthreads of
// csrc/ in turn (dropped at run time by the shim, the same as deleting the
// line) and requires racecheck to report a hazard, including block_max's
// trailing barrier, which the schedules miss because no kernel calls
// block_max twice (the block_max-twice self-test kernel does).
func TestRacecheckCatchesEveryMissingBarrier(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the conformance suite under racecheck once per barrier")
	}
	bs := barriers(t)
	if len(bs) < 17 {
		t.Fatalf("found %d __syncthreads call sites, want at least 17: %v", len(bs), bs)
	}
	for _, b := range bs {
		t.Run(fmt.Sprintf("%s:%d", b.file, b.line), func(t *testing.T) {
			start := time.Now()
			where, report := findRace(t, b)
			if report == "" {
				t.Fatalf("dropping the __syncthreads at %s:%d: no hazard reported", b.file, b.line)
			}
			t.Logf("caught in %s (%.1fs): %s", where, time.Since(start).Seconds(), report)
		})
	}
}

// storeHookFlags build the kernels with every store instrumented (GCC's
// kernel-address mode calling out to csrc/emu/store_hooks.h, no runtime
// library), so racecheck also sees global memory. Loads are not
// instrumented (asan-instrument-reads=0): racecheck ignores them, and a call
// per load cost a fifth of the instrumented run. Passed through
// CGO_CXXFLAGS: cgo's #cgo flag allowlist refuses --param.
const storeHookFlags = "-O2 -DHONE_EMU_STORE_HOOKS -fsanitize=kernel-address " +
	"--param=asan-instrumentation-with-call-threshold=0 --param=asan-stack=0 --param=asan-globals=0 " +
	"--param=asan-instrument-reads=0"

// TestRacecheckGlobal rebuilds the package with the store hooks and runs
// the global-memory self-tests, the shared-memory ones and the conformance
// suite under racecheck there: every launch's writes to device memory are
// checked for two threads writing one word (no false positive in any
// kernel).
func TestRacecheckGlobal(t *testing.T) {
	// Parallel: a rebuild and run in a subprocess, mostly waiting on one
	// core; the package's other subprocess tests use the other.
	t.Parallel()
	if testing.Short() {
		t.Skip("rebuilds the package with every store instrumented")
	}
	if storeHooks() {
		t.Skip("already the instrumented build")
	}
	out := rebuildAndTest(t, "with the store hooks", []string{"CGO_CXXFLAGS=" + storeHookFlags}, "-v",
		"-run", "^(TestRacecheckGlobalSelftest|TestRacecheckSelftest|TestConformanceRacecheck)$")
	for _, want := range []string{"--- PASS: TestRacecheckGlobalSelftest", "--- PASS: TestConformanceRacecheck", "--- PASS: TestRacecheckSelftest"} {
		if !strings.Contains(out, want) {
			t.Fatalf("no %q with the store hooks:\n%s", want, out)
		}
	}
}

// TestRacecheckGlobalSelftest (in the store-hook build only): two threads
// of a block or two blocks writing one word of device memory are reported
// as a WAW hazard with both writers; atomics among themselves and writes
// ordered by a barrier are not.
func TestRacecheckGlobalSelftest(t *testing.T) {
	if !storeHooks() {
		t.Skip("global memory is checked in the store-hook build (TestRacecheckGlobal)")
	}
	cases := []struct {
		which int
		name  string
		want  string
	}{
		{13, "two threads write one word", "racecheck: WAW hazard on global memory in global_waw_kernel: block (0,0,0) thread (0,0,0) wrote and block (0,0,0) thread (1,0,0) wrote byte 0 of a 1280-byte device allocation"},
		{14, "atomics", ""},
		{15, "writes ordered by a barrier", ""},
		{16, "two blocks write one word", "racecheck: WAW hazard on global memory in global_cross_block_kernel: block (1,0,0) thread (0,0,0) wrote and block (0,0,0) thread (0,0,0) wrote byte 0"},
		{17, "a plain write among atomics", "racecheck: WAW hazard on global memory in global_atomic_plain_kernel: block (0,0,0) thread (4,0,0) atomically updated and block (0,0,0) thread (5,0,0) wrote byte 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := emuSelftestWith(c.which, true, "", 0)
			if c.want == "" {
				if err != nil {
					t.Fatalf("race-free kernel reported: %v", err)
				}
				if c.which == 14 && out[0] != 128 {
					t.Fatalf("atomics: %g, want 128", out[0])
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("err %v\nwant %s...", err, c.want)
			}
			if _, err := emuSelftestWith(c.which, false, "", 0); err != nil {
				t.Fatalf("without racecheck: %v", err)
			}
		})
	}
}
