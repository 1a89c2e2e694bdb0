//go:build amd64

package main

import "golang.org/x/sys/cpu"

//go:noescape
func fmaLoopAVX2(n int)

// peakLoop runs n iterations of a register-only FMA loop and returns the
// FLOP it did, or 0 when the CPU has no AVX2+FMA.
func peakLoop(n int) float64 {
	if !cpu.X86.HasAVX2 || !cpu.X86.HasFMA {
		return 0
	}
	fmaLoopAVX2(n)
	return float64(n) * 12 * 8 * 2
}

// peakName says what peakLoop measures.
const peakName = "AVX2 FMA (12 chains of 8-lane VFMADD231PS)"
