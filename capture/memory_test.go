package capture

import "testing"

func TestSizesFor(t *testing.T) {
	for _, tc := range []struct {
		budget                  int64
		memtable, vlog, records int64
		memtables               int
	}{
		{64 << 20, 16 << 20, 32 << 20, 4096, 3},
		{384 << 20, 16 << 20, 64 << 20, 12288, 3},
		{1 << 30, (1 << 30) / 24, (1 << 30) / 6, 32768, 5},
		{16 << 30, 64 << 20, 256 << 20, 524288, 5},
	} {
		z := sizesFor(tc.budget)
		if z.memtable != tc.memtable || z.vlogFile != tc.vlog || int64(z.records) != tc.records || z.memtables != tc.memtables {
			t.Errorf("budget %d MiB: memtable %d, vlog file %d, records %d, memtables %d; want %d, %d, %d, %d",
				tc.budget>>20, z.memtable, z.vlogFile, z.records, z.memtables, tc.memtable, tc.vlog, tc.records, tc.memtables)
		}
	}
}
