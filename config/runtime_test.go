package config

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestRuntimeMemoryLimit(t *testing.T) {
	total := func() int64 { return 8 << 30 }
	for _, tc := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{"auto", 6 << 30, false},
		{"off", 0, false},
		{"", 0, false},
		{"4GiB", 4 << 30, false},
		{"512 MiB", 512 << 20, false},
		{"lots", 0, true},
	} {
		got, err := RuntimeOptions{MemoryLimit: tc.in}.memoryLimit(total)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("memory_limit %q: %d, %v; want %d (error %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

func TestRuntimeValidate(t *testing.T) {
	if err := (RuntimeOptions{GCPercent: -2, MemoryLimit: "auto"}).validate(); err == nil {
		t.Error("gc_percent -2 accepted")
	}
	if err := (RuntimeOptions{GCPercent: 400, MemoryLimit: "x"}).validate(); err == nil {
		t.Error("memory_limit x accepted")
	}
	if err := DefaultRuntime().validate(); err != nil {
		t.Error(err)
	}
}

// Apply sets the collector, unless the environment already did.
func TestRuntimeApply(t *testing.T) {
	old := debug.SetGCPercent(100)
	oldLimit := debug.SetMemoryLimit(-1)
	defer debug.SetGCPercent(old)
	defer debug.SetMemoryLimit(oldLimit)

	o := RuntimeOptions{GCPercent: 250, MemoryLimit: "3GiB"}
	gc, limit, err := o.Apply(func(string) string { return "" })
	if err != nil || gc != 250 || limit != 3<<30 {
		t.Fatalf("Apply: %d %d %v", gc, limit, err)
	}
	if got := debug.SetGCPercent(100); got != 250 {
		t.Errorf("GC percent %d, want 250", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 3<<30 {
		t.Errorf("memory limit %d, want 3GiB", got)
	}
	env := map[string]string{"GOGC": "100", "GOMEMLIMIT": "1GiB"}
	gc, limit, _ = o.Apply(func(k string) string { return env[k] })
	if gc != -2 || limit != -1 {
		t.Errorf("with GOGC and GOMEMLIMIT set, Apply changed the collector: %d %d", gc, limit)
	}
}

func TestMemTotal(t *testing.T) {
	p := filepath.Join(t.TempDir(), "meminfo")
	if err := os.WriteFile(p, []byte("MemFree: 10 kB\nMemTotal:       24683520 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := memTotal(p); got != 24683520<<10 {
		t.Errorf("MemTotal %d", got)
	}
	if memTotal(filepath.Join(t.TempDir(), "none")) != 0 {
		t.Error("missing file")
	}
}
