//go:build amd64

package jsonwalk

import "golang.org/x/sys/cpu"

// hasAVX2: specialAVX2 can run (x/sys/cpu checks the OS saves the YMM
// registers too).
var hasAVX2 = cpu.X86.HasAVX2

// specialAVX2 returns the index of the first quote, backslash or control
// byte in s from i on, 32 bytes at a time (scan_amd64.s), or where fewer
// than 32 bytes are left when none comes before them.
//
//go:noescape
func specialAVX2(s string, i int) int
