//go:build !linux

package capture

// releaseMapped is Linux-only (mapped_linux.go).
func releaseMapped(string, ...string) (int64, bool) { return 0, false }

// mappedRSS is Linux-only (mapped_linux.go).
func mappedRSS() int64 { return 0 }
