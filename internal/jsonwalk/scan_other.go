//go:build !amd64

package jsonwalk

// hasAVX2 is false off x86-64: plainRun's eight-byte scan reads it all.
const hasAVX2 = false

func specialAVX2(_ string, i int) int { return i }
