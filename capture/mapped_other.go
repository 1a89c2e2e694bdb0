//go:build !linux

package capture

// releaseMapped is Linux-only (mapped_linux.go).
func releaseMapped(string) (int64, bool) { return 0, false }
