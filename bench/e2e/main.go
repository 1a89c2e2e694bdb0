// Command e2e measures the embedded engine's prefill and decode tokens/s
// and LoRA training tokens/s (forward, backward, AdamW) on the tiny, small
// and qwen3-0.6b-shape presets, beside PyTorch (CPU, float32, same
// threads) running the same Qwen3 shapes and workloads, interleaved in one
// run. Random weights; no files are read.
//
//	go run ./bench/e2e [-presets tiny,small,qwen3-0.6b-shape] [-rounds 2] [-seconds 2] [-threads 2] [-torch PYTHON] [-cpuprofile FILE]
//
// hone's side calls model.Forward (what the engine's scheduler runs each
// step) and model.ForwardTrain/Backward with a LoRA on all seven
// projections plus AdamW on it (the trainer's step without its
// bookkeeping). PyTorch runs bench/e2e/torch_e2e.py under -torch (default:
// the peers virtualenv's python when it exists).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/hone-rl/hone/bench/internal/machine"

	"github.com/hone-rl/hone/kernels/cpu"
)

// workloads per preset: the 0.6B shape trains on fewer tokens so a step
// stays within seconds.
var workloads = map[string]workload{
	"tiny":             {Prompt: 128, TrainSeqs: 8, TrainLen: 128, Rank: 16},
	"small":            {Prompt: 128, TrainSeqs: 8, TrainLen: 128, Rank: 16},
	"qwen3-0.6b-shape": {Prompt: 128, TrainSeqs: 1, TrainLen: 128, Rank: 16},
}

func main() {
	presets := flag.String("presets", "tiny,small,qwen3-0.6b-shape", "model presets, comma-separated")
	rounds := flag.Int("rounds", 2, "interleaved rounds (medians are reported)")
	seconds := flag.Float64("seconds", 2, "time per measurement")
	threads := flag.Int("threads", 2, "hone workers and torch threads")
	torchPy := flag.String("torch", defaultTorch(), "python with torch; empty skips PyTorch")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of hone's side to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	ctx := context.Background()

	fmt.Printf("bench/e2e %s, %d threads, %d rounds of %.1fs, load average %s\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), *threads, *rounds, *seconds, machine.Loadavg())
	fmt.Printf("CPU: %s; kernel variants %v\n", machine.CPUModel(), cpu.Variants())
	type key struct{ preset, who, phase string }
	wall, cpuT := map[key][]float64{}, map[key][]float64{}
	var order []key
	record := func(preset, who string, ms []measurement) {
		for _, m := range ms {
			k := key{preset, who, m.Phase}
			if _, ok := wall[k]; !ok {
				order = append(order, k)
			}
			wall[k], cpuT[k] = append(wall[k], m.Tokens), append(cpuT[k], m.CPUToks)
		}
	}
	var torchVersion string
	for _, preset := range strings.Split(*presets, ",") {
		w, ok := workloads[preset]
		if !ok {
			fmt.Fprintf(os.Stderr, "e2e: unknown preset %q\n", preset)
			os.Exit(2)
		}
		for r := 0; r < *rounds; r++ {
			ms, err := benchHone(ctx, preset, w, *threads, *seconds)
			if err != nil {
				fmt.Fprintln(os.Stderr, "e2e:", err)
				os.Exit(1)
			}
			record(preset, "hone", ms)
			runtime.GC()
			if *torchPy != "" {
				v, ms, err := benchTorch(*torchPy, preset, w, *threads, *seconds)
				if err != nil {
					fmt.Fprintln(os.Stderr, "e2e: torch:", err)
					*torchPy = ""
				} else {
					torchVersion = v
					record(preset, "torch", ms)
				}
			}
		}
	}
	if torchVersion != "" {
		fmt.Printf("PyTorch %s\n", torchVersion)
	}
	fmt.Printf("end load average %s\n\n", machine.Loadavg())
	fmt.Println("| preset | phase | hone tokens/s | PyTorch tokens/s | hone tokens/CPU-s | PyTorch tokens/CPU-s |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, k := range order {
		if k.who != "hone" {
			continue
		}
		tk := key{k.preset, "torch", k.phase}
		fmt.Printf("| %s | %s | %.1f | %s | %.1f | %s |\n", k.preset, k.phase, machine.Median(wall[k]), orDash(wall[tk]),
			machine.Median(cpuT[k]), orDash(cpuT[tk]))
	}
}

func orDash(x []float64) string {
	if len(x) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", machine.Median(x))
}

// benchTorch runs torch_e2e.py for one preset and parses its JSON lines.
func benchTorch(py, preset string, w workload, threads int, seconds float64) (string, []measurement, error) {
	cmd := exec.Command(py, scriptPath(), "--preset", preset, "--prompt", fmt.Sprint(w.Prompt),
		"--train-seqs", fmt.Sprint(w.TrainSeqs), "--train-len", fmt.Sprint(w.TrainLen), "--rank", fmt.Sprint(w.Rank),
		"--threads", fmt.Sprint(threads), "--seconds", fmt.Sprint(seconds))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w: %s", preset, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var version string
	var ms []measurement
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var line struct {
			Torch string `json:"torch"`
			measurement
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return "", nil, fmt.Errorf("%s: parse %q: %w", preset, sc.Text(), err)
		}
		if line.Torch != "" {
			version = line.Torch
			continue
		}
		ms = append(ms, line.measurement)
	}
	return version, ms, nil
}

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

// scriptPath finds torch_e2e.py beside this source file.
func scriptPath() string {
	for _, p := range []string{"bench/e2e/torch_e2e.py", "torch_e2e.py"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "bench/e2e/torch_e2e.py"
}
