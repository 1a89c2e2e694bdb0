package capture

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// residentKiB sums the Rss of this process's mappings of files under dir
// with the suffix, from /proc/self/smaps.
func residentKiB(t *testing.T, dir, suffix string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	abs, _ := filepath.Abs(dir)
	var total int64
	in := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := sc.Bytes()
		if _, _, path, ok := parseMapsLine(l); ok {
			in = bytes.HasPrefix(path, []byte(abs)) && bytes.HasSuffix(path, []byte(suffix))
			continue
		}
		if in && bytes.HasPrefix(l, []byte("Rss:")) {
			f := bytes.Fields(l)
			n, _ := strconv.ParseInt(string(f[1]), 10, 64)
			total += n
		}
	}
	return total
}

// The value log's pages leave the process's RSS when released, and what
// they hold is read back intact.
func TestReleaseMapped(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, testOptions())
	defer s.Close()
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 400; i++ {
		c := benchCall(r, fmt.Sprintf("m%d", i), fmt.Sprintf("ms%d", i/4), 768, 256)
		s.Record(c)
	}
	s.syncQueue(t)
	before := residentKiB(t, dir, ".vlog")
	if before < 1024 {
		t.Fatalf("value log resident %d KiB before release: the test writes too little", before)
	}
	n, ok := releaseMapped(dir, ".vlog")
	if !ok {
		t.Skip("MADV_PAGEOUT not supported")
	}
	after := residentKiB(t, dir, ".vlog")
	if n == 0 || after > before/4 {
		t.Fatalf("value log resident %d KiB before, %d KiB after releasing %d bytes of mappings", before, after, n)
	}
	_, calls, err := s.GetSession(context.Background(), "ms7")
	if err != nil || len(calls) != 4 || calls[3].ID != "m31" || len(calls[3].PromptIDs) != 768 {
		t.Fatalf("reading released calls: %v", err)
	}
}

func TestParseMapsLine(t *testing.T) {
	start, end, path, ok := parseMapsLine([]byte("7f1c2a000000-7f1c4a000000 rw-s 00000000 fd:01 1234 /data/capture/000001.vlog"))
	if !ok || start != 0x7f1c2a000000 || end != 0x7f1c4a000000 || string(path) != "/data/capture/000001.vlog" {
		t.Fatalf("%x %x %q %v", start, end, path, ok)
	}
	if _, _, path, ok = parseMapsLine([]byte("7f-80 rw-s 0 fd:01 1 /my dir/x.vlog")); !ok || string(path) != "/my dir/x.vlog" {
		t.Fatalf("path with a space: %q %v", path, ok)
	}
	for _, l := range []string{"", "7f-80 rw-p 0 0:0 0", "zz-80 r 0 0 0 /x", "80-7f r 0 0 0 /x"} {
		if _, _, _, ok := parseMapsLine([]byte(l)); ok {
			t.Errorf("%q parsed", l)
		}
	}
}

func TestStatusRSSFile(t *testing.T) {
	for _, tc := range []struct {
		status string
		want   int64
	}{
		{"VmRSS:\t  300 kB\nRssAnon:\t  100 kB\nRssFile:\t  150 kB\nRssShmem:\t  50 kB\n", 200 << 10},
		{"RssFile:\t7 kB\n", 7 << 10},
		{"RssAnon:\t9 kB\n", 0},
		{"RssFile:\n RssFile: x kB\n", 0},
		{"", 0},
	} {
		if got := statusRSSFile([]byte(tc.status)); got != tc.want {
			t.Errorf("%q: %d, want %d", tc.status, got, tc.want)
		}
	}
	if mappedRSS() <= 0 {
		t.Error("mappedRSS of this process is 0: the test binary itself is a mapped file")
	}
}
