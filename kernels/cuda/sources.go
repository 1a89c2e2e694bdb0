package cuda

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
)

// csrc holds the kernel sources. Embedding them makes them inputs of this
// package's build, so the go command rebuilds the emulated backend (whose
// emu.cc includes them) whenever a .cu or header changes; the compile check
// keys its cache of nvcc objects by their digest.
//
//go:embed csrc/*.cu csrc/*.cuh csrc/*.h csrc/emu/*.h csrc/emu/*.cuh
var csrc embed.FS

// sourcesDigest is the SHA-256 of the embedded kernel sources (names and
// contents, in walk order), in hex, leaving out the directory skip (the
// device build does not read the shim in csrc/emu).
func sourcesDigest(skip string) (string, error) {
	h := sha256.New()
	err := fs.WalkDir(csrc, "csrc", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == skip {
				return fs.SkipDir
			}
			return nil
		}
		b, err := csrc.ReadFile(p)
		if err != nil {
			return err
		}
		h.Write([]byte(p + "\x00"))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
