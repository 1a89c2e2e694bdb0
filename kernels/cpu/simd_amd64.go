//go:build amd64

package cpu

import "golang.org/x/sys/cpu"

//go:noescape
func kern6x16AVX2(k int, a, b, c *float32, ldc int, alpha float32)

//go:noescape
func dot3x4AVX2(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, alpha float32)

//go:noescape
func dot1x4AVX2(k int, a, b *float32, ldb int, c *float32, alpha float32)

//go:noescape
func packNT8AVX2(dst, src *float32, lds, k int)

var avx2Kernels = &simdKernels{
	name:     VariantAVX2,
	kern6x16: kern6x16AVX2,
	dot3x4:   dot3x4AVX2,
	dot1x4:   dot1x4AVX2,
	packNT8:  packNT8AVX2,
}

// archKernels lists the assembly variants this CPU and OS support (x/sys/cpu
// checks that the OS saves the YMM state), fastest first.
func archKernels() []*simdKernels {
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		return []*simdKernels{avx2Kernels}
	}
	return nil
}
