package cuda

import "embed"

// csrc holds the kernel sources. Embedding them makes them inputs of this
// package's build, so the go command rebuilds the emulated backend (whose
// emu.cc includes them) whenever a .cu or header changes; the compile check
// hashes and compiles the same bytes.
//
//go:embed csrc/*.cu csrc/*.cuh csrc/*.h csrc/emu/*.h csrc/emu/*.cuh
var csrc embed.FS
