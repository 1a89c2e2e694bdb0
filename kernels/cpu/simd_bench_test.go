package cpu

import (
	"testing"
)

// BenchmarkMicroKernels reports the assembly micro-kernels' GFLOP per
// CPU-second on operands that stay in L1 (compare with bench/kernels' FMA
// peak: the 6x16 kernel measured 96% of it).
func BenchmarkMicroKernels(b *testing.B) {
	for _, s := range archKernels() {
		a, bb, c := make([]float32, 256*mr), make([]float32, 256*nr), make([]float32, mr*nr)
		b.Run(s.name+"/6x16_k256", func(b *testing.B) {
			c0 := cpuSeconds()
			for b.Loop() {
				s.kern6x16(256, &a[0], &bb[0], &c[0], nr, 1)
			}
			b.ReportMetric(float64(b.N)*2*mr*nr*256/(cpuSeconds()-c0)/1e9, "GFLOP/cpu-s")
		})
		x, y, z := make([]float32, 3*512), make([]float32, 4*512), make([]float32, 12)
		b.Run(s.name+"/dot3x4_k512", func(b *testing.B) {
			c0 := cpuSeconds()
			for b.Loop() {
				s.dot3x4(512, &x[0], 512, &y[0], 512, &z[0], 4, 1)
			}
			b.ReportMetric(float64(b.N)*2*12*512/(cpuSeconds()-c0)/1e9, "GFLOP/cpu-s")
		})
		b.Run(s.name+"/dot1x4_k512", func(b *testing.B) {
			c0 := cpuSeconds()
			for b.Loop() {
				s.dot1x4(512, &x[0], &y[0], 512, &z[0], 1)
			}
			b.ReportMetric(float64(b.N)*2*4*512/(cpuSeconds()-c0)/1e9, "GFLOP/cpu-s")
		})
	}
}
