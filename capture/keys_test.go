package capture

import (
	"testing"

	"github.com/google/uuid"
)

// TestNewIDOrdered holds NewID to what the memtable's locality rests on:
// ids sort in the order they were made, even within one millisecond, and
// each is a valid UUID.
func TestNewIDOrdered(t *testing.T) {
	prev := NewID()
	for range 10000 {
		id := NewID()
		if id <= prev {
			t.Fatalf("NewID() = %s after %s: not ascending", id, prev)
		}
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 7 {
			t.Fatalf("NewID() = %s: version %d, err %v; want a UUIDv7", id, u.Version(), err)
		}
		prev = id
	}
}
