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

// The governor keeps the limit at twice a persistent live heap, within the
// base limit and the ceiling.
func TestSetGoverned(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(old)
	const base, ceiling = 384 << 20, 8 << 30
	for _, tc := range []struct{ live, want int64 }{
		{100 << 20, base},
		{1 << 30, 2 << 30},
		{6 << 30, ceiling},
		{300 << 20, 600 << 20}, // the live heap shrank: the limit follows it down
		{10 << 20, base},
	} {
		if got := setGoverned(tc.live, base, ceiling); got != tc.want || debug.SetMemoryLimit(-1) != tc.want {
			t.Errorf("live %d: limit %d, want %d", tc.live, got, tc.want)
		}
	}
}
