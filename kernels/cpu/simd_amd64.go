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

//go:noescape
func packA6AVX2(dst, src *float32, lds, k int)

//go:noescape
func expAVX2(dst, src *float32, n int, shift float32) float32

//go:noescape
func maxAVX2(x *float32, n int) float32

//go:noescape
func scaleAVX2(x *float32, n int, s float32)

//go:noescape
func siluAVX2(dst, x *float32, n int)

//go:noescape
func swigluAVX2(dst, gate, up *float32, n int)

//go:noescape
func swigluBackAVX2(dgate, dup, dout, gate, up *float32, n int)

//go:noescape
func weightedRowsAVX2(o *float32, hd int, p *float32, rows int, v *float32, ldv int)

var avx2Kernels = &simdKernels{
	name:     VariantAVX2,
	kern6x16: kern6x16AVX2,
	dot3x4:   dot3x4AVX2,
	dot1x4:   dot1x4AVX2,
	packNT8:  packNT8AVX2,
	packA6:   packA6AVX2,

	exp:          expAVX2,
	max:          maxAVX2,
	scale:        scaleAVX2,
	silu:         siluAVX2,
	swiglu:       swigluAVX2,
	swigluBack:   swigluBackAVX2,
	weightedRows: weightedRowsAVX2,
}

// archKernels lists the assembly variants this CPU and OS support (x/sys/cpu
// checks that the OS saves the YMM and ZMM state), fastest first.
func archKernels() []*simdKernels {
	var ks []*simdKernels
	if hasAVX512() {
		ks = append(ks, avx512Kernels)
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ks = append(ks, avx2Kernels)
	}
	return ks
}
