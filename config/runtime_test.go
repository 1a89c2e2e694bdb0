package config

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestRuntimeMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		m    memoryInfo
		want int64
		grow bool
		bad  bool
	}{
		{"auto", memoryInfo{cgroup: 8 << 30, machine: 64 << 30}, 6 << 30, false, false},     // a container's limit
		{"auto", memoryInfo{cgroup: 512 << 20, machine: 64 << 30}, 384 << 20, false, false}, // a 512 MiB sidecar
		{"auto", memoryInfo{machine: 64 << 30}, 384 << 20, true, false},                     // no limit: a sidecar's budget, growing
		{"auto", memoryInfo{cgroup: 128 << 30, machine: 64 << 30}, 384 << 20, true, false},  // a limit above the machine is none
		{"auto", memoryInfo{machine: 256 << 20}, 192 << 20, true, false},                    // a machine smaller than the budget
		{"auto", memoryInfo{}, 384 << 20, true, false},
		{"off", memoryInfo{machine: 8 << 30}, 0, false, false},
		{"", memoryInfo{}, 0, false, false},
		{"4GiB", memoryInfo{cgroup: 1 << 30}, 4 << 30, false, false},
		{"512 MiB", memoryInfo{}, 512 << 20, false, false},
		{"lots", memoryInfo{}, 0, false, true},
	} {
		got, grow, err := RuntimeOptions{MemoryLimit: tc.in}.memoryLimit(tc.m)
		if (err != nil) != tc.bad || got != tc.want || grow != tc.grow {
			t.Errorf("memory_limit %q with %+v: %d grow %v, %v; want %d grow %v (error %v)", tc.in, tc.m, got, grow, err, tc.want, tc.grow, tc.bad)
		}
	}
}

func TestCgroupLimit(t *testing.T) {
	dir := t.TempDir()
	write := func(name, v string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		files []string
		want  int64
	}{
		{[]string{write("v2", "536870912\n")}, 512 << 20},
		{[]string{write("v2max", "max\n")}, 0},
		{[]string{filepath.Join(dir, "none"), write("v1", "1073741824\n")}, 1 << 30},
		{[]string{write("v1unlimited", "9223372036854771712\n")}, 0},
		{[]string{filepath.Join(dir, "none")}, 0},
	} {
		if got := cgroupLimit(tc.files); got != tc.want {
			t.Errorf("cgroupLimit(%v) = %d, want %d", tc.files, got, tc.want)
		}
	}
}

// The governor raises the limit to twice a live heap past half of it, up
// to the ceiling, and never lowers it.
func TestRaiseLimit(t *testing.T) {
	old := debug.SetMemoryLimit(384 << 20)
	defer debug.SetMemoryLimit(old)
	if got := raiseLimit(100<<20, 8<<30); got != 384<<20 {
		t.Errorf("small live heap: limit %d", got)
	}
	if got := raiseLimit(1<<30, 8<<30); got != 2<<30 {
		t.Errorf("live 1 GiB: limit %d, want 2 GiB", got)
	}
	if got := raiseLimit(6<<30, 8<<30); got != 8<<30 {
		t.Errorf("live 6 GiB: limit %d, want the 8 GiB ceiling", got)
	}
	if got := raiseLimit(10<<20, 8<<30); got != 8<<30 {
		t.Errorf("the limit went down: %d", got)
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
