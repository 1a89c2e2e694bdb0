package main

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// procCPU is the CPU time process pid has used so far: the sum of its
// threads' run time from /proc/PID/task/*/schedstat (nanoseconds; every
// server here keeps its threads for its life, so none is lost to a thread's
// exit), or user+system time from /proc/PID/stat (clock ticks of 10 ms,
// coarse for a short run) where schedstat is missing; 0 without /proc.
func procCPU(pid int) time.Duration {
	if d, ok := schedCPU(pid); ok {
		return d
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	_, cpu, _ := parseStat(b)
	return cpu
}

// schedCPU sums the first field (time on a CPU, ns) of pid's threads'
// schedstat files.
func schedCPU(pid int) (time.Duration, bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, err := os.ReadDir(dir)
	if err != nil || len(tasks) == 0 {
		return 0, false
	}
	var total int64
	for _, t := range tasks {
		b, err := os.ReadFile(dir + t.Name() + "/schedstat")
		if err != nil {
			if os.IsNotExist(err) && t.Name() == strconv.Itoa(pid) {
				return 0, false // no schedstat in this kernel
			}
			continue // a thread that just exited
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return 0, false
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, false
		}
		total += ns
	}
	return time.Duration(total), true
}
