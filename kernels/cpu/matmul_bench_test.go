package cpu

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
)

// cpuSeconds is the CPU time this process has used. Benchmarks report work
// per CPU-second beside work per wall-second because the machine is shared:
// per CPU-second is what a core does when it runs, unaffected by waiting
// for one.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// BenchmarkMatMul reports GFLOP/s for the linear-layer layout C = A*W^T on
// shapes the models use (m tokens, k inputs, n outputs), per kernel variant;
// bench/kernels compares them with OpenBLAS and PyTorch.
func BenchmarkMatMul(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, sh := range [][3]int{{1, 1024, 3072}, {16, 1024, 3072}, {128, 128, 384}, {512, 1024, 1024}, {256, 256, 256}} {
		m, k, n := sh[0], sh[1], sh[2]
		for _, workers := range []int{1, 2} {
			for _, be := range variants(b, workers) {
				b.Run(fmt.Sprintf("m%d_k%d_n%d/%s/workers=%d", m, k, n, be.Variant(), workers), func(b *testing.B) {
					g := gemm{m: m, n: n, k: k, a: randSlice(rng, m*k), b: randSlice(rng, n*k), c: make([]float32, m*n), transB: true, alpha: 1}
					c0 := cpuSeconds()
					for b.Loop() {
						be.gemmFast(g)
					}
					flops := 2 * float64(m*n*k) * float64(b.N)
					b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
					b.ReportMetric(flops/(cpuSeconds()-c0)/1e9, "GFLOP/cpu-s")
				})
			}
		}
	}
}
