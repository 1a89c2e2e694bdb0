package config

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"
)

// RuntimeOptions tune Go's garbage collector for a data plane. hone's heap
// is mostly Badger's memtable arenas, which hold no pointers: a collection
// costs little but, with Go's default GOGC=100, comes every ~100 MB of
// allocation, and on a small machine each one is a burst of CPU that the
// calls in flight queue behind (bench/RESULTS.md: the slowest 1% of calls
// through hone with capture on at 5k req/s fall in those bursts). A larger
// percent makes them rarer; the memory limit keeps a growing heap in bounds
// (the collector runs earlier as the heap nears it).
type RuntimeOptions struct {
	// GCPercent is GOGC: the heap grows by this percent of the live heap
	// between collections. -1 turns the collector off (not advised). A GOGC
	// environment variable wins.
	GCPercent int `yaml:"gc_percent"`
	// MemoryLimit is the soft memory limit (GOMEMLIMIT): "auto" (75% of the
	// cgroup's memory.max, else of the machine's memory), "off", or a size
	// such as 4GiB. A GOMEMLIMIT environment variable wins.
	MemoryLimit string `yaml:"memory_limit"`
}

// DefaultRuntime returns the runtime defaults.
func DefaultRuntime() RuntimeOptions { return RuntimeOptions{GCPercent: 400, MemoryLimit: "auto"} }

// validate checks the options without applying them.
func (o RuntimeOptions) validate() error {
	if o.GCPercent < -1 {
		return fmt.Errorf("runtime.gc_percent: %d: want -1 (off) or a percent >= 0", o.GCPercent)
	}
	if _, err := o.memoryLimit(func() int64 { return 0 }); err != nil {
		return err
	}
	return nil
}

// memoryLimit returns the limit in bytes (0: none); total gives the memory
// "auto" takes 75% of.
func (o RuntimeOptions) memoryLimit(total func() int64) (int64, error) {
	switch strings.ToLower(strings.TrimSpace(o.MemoryLimit)) {
	case "", "off", "0":
		return 0, nil
	case "auto":
		return total() / 4 * 3, nil
	}
	n, err := humanize.ParseBytes(o.MemoryLimit)
	if err != nil || n > math.MaxInt64 {
		return 0, fmt.Errorf("runtime.memory_limit: %q: want auto, off or a size like 4GiB", o.MemoryLimit)
	}
	return int64(n), nil
}

// Apply sets the collector's percent and memory limit unless GOGC or
// GOMEMLIMIT are set in env, and returns what it set (for the log).
func (o RuntimeOptions) Apply(env func(string) string) (gcPercent int, limit int64, err error) {
	gcPercent, limit = -2, -1 // -2 / -1: left to the environment
	if env("GOGC") == "" {
		gcPercent = o.GCPercent
		debug.SetGCPercent(gcPercent)
	}
	if env("GOMEMLIMIT") == "" {
		if limit, err = o.memoryLimit(availableMemory); err != nil {
			return gcPercent, limit, err
		}
		if limit > 0 {
			debug.SetMemoryLimit(limit)
		}
	}
	return gcPercent, limit, nil
}

// availableMemory is the cgroup's memory limit, else the machine's memory;
// 0 when neither can be read.
func availableMemory() int64 {
	total := memTotal("/proc/meminfo")
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if b, err := os.ReadFile(p); err == nil {
			if n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64); err == nil && n > 0 && (total == 0 || n < total) {
				return n
			}
		}
	}
	return total
}

// memTotal reads MemTotal from a /proc/meminfo file, in bytes.
func memTotal(path string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			fields := strings.Fields(rest)
			if len(fields) > 0 {
				kb, _ := strconv.ParseInt(fields[0], 10, 64)
				return kb << 10
			}
		}
	}
	return 0
}
