//go:build !amd64

package main

func peakLoop(n int) float64 { return 0 }

const peakName = "none on this architecture"
