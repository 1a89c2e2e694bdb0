package config

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
)

// RuntimeOptions tune Go's garbage collector for a data plane. hone's heap
// is mostly Badger's memtable arenas, which hold no pointers: a collection
// costs little but, with Go's default GOGC=100, comes every ~100 MB of
// allocation, and on a small machine each one is a burst of CPU that the
// calls in flight queue behind (bench/RESULTS.md: the slowest 1% of calls
// through hone with capture on at 5k req/s fall in those bursts). A larger
// percent makes them rarer; the memory limit keeps the heap in bounds (the
// collector runs earlier as the heap nears it), and the capture store sizes
// its memtables and caches from it (capture.MemoryBudget).
type RuntimeOptions struct {
	// GCPercent is GOGC: the heap grows by this percent of the live heap
	// between collections. -1 turns the collector off (not advised). A GOGC
	// environment variable wins.
	GCPercent int `yaml:"gc_percent"`
	// MemoryLimit is the soft memory limit (GOMEMLIMIT): "auto", "off", or a
	// size such as 4GiB. auto: 75% of the cgroup's memory.max when the
	// container has a limit; without one, 75% of 512 MiB (a sidecar's
	// budget), raised while hone runs when a live heap that persists needs
	// it (an embedded engine's weights): to twice that live heap (the lowest
	// over 30 s), at most 75% of the machine, and back when it shrinks. A
	// GOMEMLIMIT environment variable wins.
	MemoryLimit string `yaml:"memory_limit"`
}

// DefaultRuntime returns the runtime defaults.
func DefaultRuntime() RuntimeOptions { return RuntimeOptions{GCPercent: 400, MemoryLimit: "auto"} }

// sidecarBudget is the memory "auto" assumes without a cgroup limit.
const sidecarBudget = 512 << 20

// validate checks the options without applying them.
func (o RuntimeOptions) validate() error {
	if o.GCPercent < -1 {
		return fmt.Errorf("runtime.gc_percent: %d: want -1 (off) or a percent >= 0", o.GCPercent)
	}
	if _, _, err := o.memoryLimit(memoryInfo{}); err != nil {
		return err
	}
	return nil
}

// memoryInfo is what "auto" sizes from: the cgroup's limit (0: none) and
// the machine's memory.
type memoryInfo struct{ cgroup, machine int64 }

// memoryLimit returns the limit in bytes (0: none) and whether it may grow
// with the live heap (auto without a cgroup limit).
func (o RuntimeOptions) memoryLimit(m memoryInfo) (limit int64, grow bool, err error) {
	switch strings.ToLower(strings.TrimSpace(o.MemoryLimit)) {
	case "", "off", "0":
		return 0, false, nil
	case "auto":
		if m.cgroup > 0 && (m.machine == 0 || m.cgroup < m.machine) {
			return m.cgroup / 4 * 3, false, nil
		}
		budget := int64(sidecarBudget)
		if m.machine > 0 {
			budget = min(budget, m.machine)
		}
		return budget / 4 * 3, true, nil
	}
	n, err := humanize.ParseBytes(o.MemoryLimit)
	if err != nil || n > math.MaxInt64 {
		return 0, false, fmt.Errorf("runtime.memory_limit: %q: want auto, off or a size like 4GiB", o.MemoryLimit)
	}
	return int64(n), false, nil
}

// Apply sets the collector's percent and memory limit unless GOGC or
// GOMEMLIMIT are set in env, and returns what it set (for the log). With
// memory_limit auto and no cgroup limit it also starts the goroutine that
// raises the limit when the live heap needs it.
func (o RuntimeOptions) Apply(env func(string) string) (gcPercent int, limit int64, err error) {
	gcPercent, limit = -2, -1 // -2 / -1: left to the environment
	if env("GOGC") == "" {
		gcPercent = o.GCPercent
		debug.SetGCPercent(gcPercent)
	}
	if env("GOMEMLIMIT") == "" {
		m := memoryInfo{cgroup: cgroupLimit(cgroupFiles), machine: memTotal("/proc/meminfo")}
		var grow bool
		if limit, grow, err = o.memoryLimit(m); err != nil {
			return gcPercent, limit, err
		}
		if limit > 0 {
			debug.SetMemoryLimit(limit)
		}
		if grow && m.machine > 0 {
			governorOnce.Do(func() { go governLimit(m.machine/4*3, 5*time.Second) })
		}
	}
	return gcPercent, limit, nil
}

var governorOnce sync.Once

// governWindow is how many samples the governor takes the lowest live heap
// of: a backlog of calls or a burst of requests raises the live heap for a
// moment, an embedded engine's weights for good.
const governWindow = 6

// governLimit keeps the memory limit at twice the live heap that persists
// (the lowest of the last governWindow samples), never below the limit auto
// started with nor above ceiling: a process whose live heap nears a soft
// limit spends up to half its CPU collecting.
func governLimit(ceiling int64, every time.Duration) {
	base := debug.SetMemoryLimit(-1)
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var window []int64
	for range time.Tick(every) {
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return
		}
		window = append(window, int64(sample[0].Value.Uint64()))
		if len(window) > governWindow {
			window = window[1:]
		}
		if len(window) == governWindow {
			setGoverned(slices.Min(window), base, ceiling)
		}
	}
}

// setGoverned sets the limit for a persistent live heap and returns it:
// 2 x live, within [base, ceiling].
func setGoverned(live, base, ceiling int64) int64 {
	limit := max(base, min(2*live, ceiling))
	if limit != debug.SetMemoryLimit(-1) {
		debug.SetMemoryLimit(limit)
	}
	return limit
}

// cgroupFiles hold the container's memory limit (cgroup v2, then v1).
var cgroupFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// cgroupLimit is the cgroup's memory limit, 0 when there is none ("max",
// or v1's huge number for unlimited) or none can be read.
func cgroupLimit(files []string) int64 {
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
		if err != nil || n <= 0 || n >= 1<<60 {
			return 0 // "max", or v1's page-rounded MaxInt64
		}
		return n
	}
	return 0
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
