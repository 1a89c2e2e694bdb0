// Command kernels measures hone's CPU matmul (kernels/cpu) on the shapes
// hone's models run, beside numpy with Debian's OpenBLAS and PyTorch on the
// same shapes and thread count, in interleaved rounds of one run, and the
// machine's register-only FMA peak. It prints a markdown table of medians:
// GFLOP per wall second and per CPU-second (all threads of the process; the
// machine is shared, and per CPU-second is what the cores do while they run).
//
//	go run ./bench/kernels [-count 3] [-seconds 0.4] [-threads 2] [-torch PYTHON] [-blas DIR] [-generic]
//
// numpy runs under /usr/bin/python3 (python3-numpy, libopenblas0-pthread)
// with OPENBLAS_NUM_THREADS=threads; PyTorch under -torch (default: the
// peers virtualenv, ${HONE_PEERS_DIR:-~/.cache/hone/peers}/venv, when it exists),
// with torch.set_num_threads(threads). A library that is missing is skipped.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/hone-rl/hone/bench/internal/machine"

	"github.com/hone-rl/hone/kernels"
	"github.com/hone-rl/hone/kernels/cpu"
)

// shape is one matmul: op nt (C = A*W^T, a linear layer), nn (A*B: its
// input gradient) or tn (A^T*B: its weight gradient), C is m x n, k deep.
type shape struct {
	op      string
	m, k, n int
	what    string
}

func (s shape) key() string { return fmt.Sprintf("%s:%d:%d:%d", s.op, s.m, s.k, s.n) }

// shapes: tiny (hidden 128, MLP 384), small (512, 1536) and
// qwen3-0.6b-shape (1024, q 2048, MLP 3072) layers at decode (1 and 16
// tokens), prefill and training (128..4096 tokens), and their backward.
var shapes = []shape{
	{"nt", 1, 1024, 3072, "0.6b decode b1, gate/up"},
	{"nt", 16, 1024, 3072, "0.6b decode b16, gate/up"},
	{"nt", 1, 3072, 1024, "0.6b decode b1, down"},
	{"nt", 16, 512, 1536, "small decode b16, gate/up"},
	{"nt", 128, 128, 384, "tiny prefill 128, gate/up"},
	{"nt", 1024, 128, 384, "tiny train 8x128, gate/up"},
	{"nt", 512, 512, 1536, "small prefill 512, gate/up"},
	{"nt", 512, 1024, 1024, "issue 14's shape"},
	{"nt", 512, 1024, 3072, "0.6b prefill 512, gate/up"},
	{"nt", 4096, 1024, 1024, "0.6b prefill 4096, o-proj"},
	{"nn", 1024, 384, 128, "tiny train, down dx"},
	{"nn", 512, 3072, 1024, "0.6b train 512, gate dx"},
	{"tn", 384, 1024, 128, "tiny train, gate dW"},
	{"tn", 1024, 512, 1024, "0.6b train 512, o-proj dW"},
}

type result struct{ wall, cpu []float64 }

func main() {
	count := flag.Int("count", 3, "interleaved rounds (medians are reported)")
	seconds := flag.Float64("seconds", 0.4, "time per measurement")
	threads := flag.Int("threads", 2, "hone workers, OpenBLAS and torch threads")
	python := flag.String("python", "/usr/bin/python3", "python with numpy (Debian's, OpenBLAS); empty skips")
	blasDir := flag.String("blas", "", "directory prepended to numpy's LD_LIBRARY_PATH, e.g. libopenblas0-pthread's openblas-pthread\n"+
		"folder extracted with dpkg-deb -x (numpy then loads its libblas.so.3); the table names the BLAS numpy loaded")
	torchPy := flag.String("torch", defaultTorch(), "python with torch; empty skips")
	generic := flag.Bool("generic", false, "also measure the generic Go kernels")
	flag.Parse()

	fmt.Printf("bench/kernels %s, %d threads, %d rounds of %.2fs, load average %s\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), *threads, *count, *seconds, machine.Loadavg())
	fmt.Printf("CPU: %s; kernel variants %v\n", machine.CPUModel(), cpu.Variants())

	variants := cpu.Variants()[:1]
	if *generic && variants[0] != cpu.VariantGeneric {
		variants = append(variants, cpu.VariantGeneric)
	}
	script := scriptPath()
	libs := map[string]string{}
	var libOrder []string
	res := map[string]map[string]*result{} // column -> shape key
	add := func(col, key string, wall, cpu float64) {
		if res[col] == nil {
			res[col] = map[string]*result{}
		}
		r := res[col][key]
		if r == nil {
			r = &result{}
			res[col][key] = r
		}
		r.wall = append(r.wall, wall)
		r.cpu = append(r.cpu, cpu)
	}
	var peakWall, peakCPU []float64
	for round := 0; round < *count; round++ {
		w, c := peak(*threads, *seconds)
		peakWall, peakCPU = append(peakWall, w), append(peakCPU, c)
		for _, v := range variants {
			be, err := cpu.NewVariant(*threads, v)
			if err != nil {
				fatal(err)
			}
			for _, s := range shapes {
				w, c := honeMatMul(be, s, *seconds)
				add("hone "+v, s.key(), w, c)
			}
		}
		for _, lib := range []struct{ name, py string }{{"numpy", *python}, {"torch", *torchPy}} {
			if lib.py == "" {
				continue
			}
			libDir := ""
			if lib.name == "numpy" {
				libDir = *blasDir
			}
			out, err := runPython(lib.py, script, lib.name, libDir, *threads, *seconds)
			if err != nil {
				if round == 0 {
					fmt.Printf("%s skipped: %v\n", lib.name, err)
				}
				continue
			}
			for _, o := range out {
				col := o.Lib
				if _, ok := libs[lib.name]; !ok {
					libs[lib.name] = col
					libOrder = append(libOrder, col)
				}
				add(col, fmt.Sprintf("%s:%d:%d:%d", o.Op, o.M, o.K, o.N), o.Wall, o.CPU)
			}
		}
	}
	pc := machine.Median(peakCPU)
	fmt.Printf("FMA peak (%s), %d threads: %.1f GFLOP/s wall, %.1f per CPU-second (per core)\n",
		peakName, *threads, machine.Median(peakWall), pc)
	fmt.Printf("load average at the end: %s\n\n", machine.Loadavg())

	cols := []string{}
	for _, v := range variants {
		cols = append(cols, "hone "+v)
	}
	cols = append(cols, libOrder...)
	fmt.Printf("GFLOP per CPU-second (GFLOP/s wall in brackets), medians of %d rounds:\n\n", *count)
	fmt.Printf("| shape | what | %s | hone %s / peak per core |\n", strings.Join(cols, " | "), variants[0])
	fmt.Printf("|---|---|%s---|\n", strings.Repeat("---|", len(cols)))
	for _, s := range shapes {
		fmt.Printf("| %s m%d k%d n%d | %s |", s.op, s.m, s.k, s.n, s.what)
		for _, col := range cols {
			r := res[col][s.key()]
			if r == nil {
				fmt.Printf(" - |")
				continue
			}
			fmt.Printf(" %.1f (%.1f) |", machine.Median(r.cpu), machine.Median(r.wall))
		}
		if r := res[cols[0]][s.key()]; r != nil && pc > 0 {
			fmt.Printf(" %.0f%% |", 100*machine.Median(r.cpu)/pc)
		} else {
			fmt.Printf(" - |")
		}
		fmt.Println()
	}
}

// honeMatMul times one shape through kernels.Backend.MatMul.
func honeMatMul(be *cpu.Backend, s shape, seconds float64) (wall, cpuRate float64) {
	rng := rand.New(rand.NewPCG(1, 2))
	up := func(r, c int) kernels.Tensor {
		x := make([]float32, r*c)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return be.Upload(x, r, c)
	}
	c := be.New(s.m, s.n)
	var a, b kernels.Tensor
	var ta, tb bool
	switch s.op {
	case "nt":
		a, b, tb = up(s.m, s.k), up(s.n, s.k), true
	case "nn":
		a, b = up(s.m, s.k), up(s.k, s.n)
	case "tn":
		a, b, ta = up(s.k, s.m), up(s.k, s.n), true
	}
	fn := func() { be.MatMul(c, a, b, ta, tb, 1, 0) }
	w, cp := timeit(fn, seconds)
	flop := 2 * float64(s.m) * float64(s.n) * float64(s.k)
	return flop / w / 1e9, flop / cp / 1e9
}

// timeit returns wall and process CPU seconds per call after a warm-up.
func timeit(fn func(), seconds float64) (wall, cpuSec float64) {
	fn()
	runtime.GC()
	n, t0, c0 := 0, time.Now(), machine.CPUSeconds()
	for {
		fn()
		n++
		if el := time.Since(t0).Seconds(); el >= seconds {
			return el / float64(n), (machine.CPUSeconds() - c0) / float64(n)
		}
	}
}

// peak runs the register-only FMA loop on threads goroutines at once and
// returns GFLOP/s wall and per CPU-second (per core).
func peak(threads int, seconds float64) (wall, perCPU float64) {
	if peakLoop(1) == 0 {
		return 0, 0
	}
	const chunk = 1 << 20
	var flop float64
	var mu sync.Mutex
	t0, c0 := time.Now(), machine.CPUSeconds()
	var wg sync.WaitGroup
	for range threads {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var f float64
			for time.Since(t0).Seconds() < seconds {
				f += peakLoop(chunk)
			}
			mu.Lock()
			flop += f
			mu.Unlock()
		})
	}
	wg.Wait()
	return flop / time.Since(t0).Seconds() / 1e9, flop / (machine.CPUSeconds() - c0) / 1e9
}

type pyResult struct {
	Lib       string
	Op        string
	M, K, N   int
	Wall, CPU float64
}

// runPython runs blas_bench.py for lib; libDir, when set, is prepended to
// LD_LIBRARY_PATH.
func runPython(py, script, lib, libDir string, threads int, seconds float64) ([]pyResult, error) {
	args := []string{script, "--lib", lib, "--threads", fmt.Sprint(threads), "--seconds", fmt.Sprint(seconds)}
	for _, s := range shapes {
		args = append(args, s.key())
	}
	cmd := exec.Command(py, args...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("OPENBLAS_NUM_THREADS=%d", threads), fmt.Sprintf("OMP_NUM_THREADS=%d", threads))
	if libDir != "" {
		cmd.Env = append(cmd.Env, "LD_LIBRARY_PATH="+strings.TrimSuffix(libDir+":"+os.Getenv("LD_LIBRARY_PATH"), ":"))
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndex(msg, "\n"); i >= 0 {
			msg = msg[i+1:]
		}
		return nil, fmt.Errorf("%s: %v: %s", py, err, msg)
	}
	var rs []pyResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r pyResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s: %v", py, err)
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// defaultTorch is the peers venv's python when it exists.
func defaultTorch() string {
	dir := os.Getenv("HONE_PEERS_DIR")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "hone", "peers")
	}
	for _, py := range []string{filepath.Join(dir, "venv", "bin", "python"), filepath.Join(dir, "bin", "python")} {
		if _, err := os.Stat(py); err == nil {
			return py
		}
	}
	return ""
}

// scriptPath finds blas_bench.py beside this source file.
func scriptPath() string {
	for _, p := range []string{"bench/kernels/blas_bench.py", "blas_bench.py"} {
		if _, err := os.Stat(p); err == nil {
			abs, _ := filepath.Abs(p)
			return abs
		}
	}
	fatal(fmt.Errorf("blas_bench.py not found: run from the repository root"))
	return ""
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench/kernels:", err)
	os.Exit(1)
}
