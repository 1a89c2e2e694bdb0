package capture

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// madvPageout is Linux's MADV_PAGEOUT (5.4+): reclaim the range's pages,
// writing dirty file pages back first. On a file mapping the data stays on
// disk and is read again on the next access; on anonymous memory without
// swap it does nothing. So a range that changed under us (Badger unmaps a
// file and the address is reused) can never lose data.
const madvPageout = 21

// releaseMapped hands the kernel back the pages of Badger's files under dir
// that end in one of suffixes (.vlog, .mem, .sst). Badger writes and reads
// its value log, memtable logs and tables through shared mappings, and every
// page it ever touched stays in the process's RSS (as file-backed memory)
// until the kernel needs the memory: at 500 calls/s the value log alone
// added ~1 MB/s to RSS, and the tables (all of them, as compactions read
// them) grew with the store. Returns how many bytes of mappings were
// advised; false when the kernel does not support it.
func releaseMapped(dir string, suffixes ...string) (int64, bool) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return 0, true
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, true
	}
	prefix := []byte(abs + string(filepath.Separator))
	var total int64
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		start, end, path, ok := parseMapsLine(sc.Bytes())
		if !ok || !bytes.HasPrefix(path, prefix) || !hasSuffix(path, suffixes) {
			continue
		}
		_, _, errno := syscall.Syscall(syscall.SYS_MADVISE, uintptr(start), uintptr(end-start), madvPageout)
		if errno == syscall.EINVAL {
			return total, false // before Linux 5.4
		}
		if errno == 0 {
			total += int64(end - start)
		}
	}
	return total, true
}

// mappedRSS is the process's resident file-backed and shared memory
// (RssFile + RssShmem of /proc/self/status), in bytes; 0 when unknown.
func mappedRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	return statusRSSFile(b)
}

// statusRSSFile sums the RssFile and RssShmem lines (in kB) of a
// /proc/<pid>/status text.
func statusRSSFile(status []byte) int64 {
	var total int64
	for _, l := range bytes.Split(status, []byte("\n")) {
		k, v, ok := bytes.Cut(l, []byte(":"))
		if !ok || (!bytes.Equal(k, []byte("RssFile")) && !bytes.Equal(k, []byte("RssShmem"))) {
			continue
		}
		f := bytes.Fields(v)
		if len(f) == 0 {
			continue
		}
		if kb, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil {
			total += kb << 10
		}
	}
	return total
}

// parseMapsLine splits a /proc/self/maps line: "start-end perms offset dev
// inode path".
func parseMapsLine(l []byte) (start, end uint64, path []byte, ok bool) {
	f := bytes.Fields(l)
	if len(f) < 6 {
		return 0, 0, nil, false
	}
	lo, hi, found := bytes.Cut(f[0], []byte("-"))
	if !found {
		return 0, 0, nil, false
	}
	var err1, err2 error
	start, err1 = strconv.ParseUint(string(lo), 16, 64)
	end, err2 = strconv.ParseUint(string(hi), 16, 64)
	if err1 != nil || err2 != nil || end <= start {
		return 0, 0, nil, false
	}
	return start, end, bytes.Join(f[5:], []byte(" ")), true
}

func hasSuffix(path []byte, suffixes []string) bool {
	for _, s := range suffixes {
		if bytes.HasSuffix(path, []byte(s)) {
			return true
		}
	}
	return false
}
