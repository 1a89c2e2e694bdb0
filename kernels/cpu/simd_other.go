//go:build !amd64

package cpu

// archKernels: no assembly kernels off x86-64; the generic Go ones run.
func archKernels() []*simdKernels { return nil }
