package capture

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
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

// TestResponseIDLookup: a call whose response id the engine made from its
// call id (chatcmpl-<call id>) writes no index entry and is found through
// its own key; one with any other id is found through the index. An index
// entry naming another call's derived id (an agent's own X-Request-Id)
// never takes that call's feedback, nor lets that agent's key reward the
// call it named; deleting sessions leaves no index entry behind.
func TestResponseIDLookup(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir(), testOptions())
	defer s.Close()
	v := newVocab()
	prompts, replies := toolSession()
	record := func(id, sess, respID string) {
		t.Helper()
		c := v.makeCall(id, sess, prompts[0], replies[0], 1)
		c.ResponseID, c.Owner = respID, "key:"+sess
		s.Record(c)
		s.syncQueue(t)
	}
	record("call-a", "sa", "chatcmpl-call-a")
	record("call-b", "sb", "chatcmpl-0f3e9a")
	if got := respKeys(t, s); fmt.Sprint(got) != "[chatcmpl-0f3e9a]" {
		t.Fatalf("response-id index %v, want only the engine-made id's entry", got)
	}
	record("call-c", "sc", "chatcmpl-call-a") // the agent sent X-Request-Id: call-a
	record("call-d", "sd", "cmpl-call-d")
	if _, err := s.TrinityFeedback(WithOwner(ctx, "key:sc"), []string{"chatcmpl-call-a"}, -1, "", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("sc's key rewarded the call its X-Request-Id named: %v", err)
	}
	for _, tc := range []struct {
		ids  []string
		want string
	}{
		{[]string{"chatcmpl-call-a"}, "[sa]"},
		{[]string{"chatcmpl-0f3e9a"}, "[sb]"},
		{[]string{"cmpl-call-d", "chatcmpl-unknown"}, "[sd]"},
		{[]string{"chatcmpl-call-b", "cmpl-call-a", "chatcmpl-"}, "[]"}, // prefixes of ids no call got
	} {
		got, err := s.TrinityFeedback(ctx, tc.ids, 1, "", "")
		if err != nil && !(errors.Is(err, ErrNotFound) && tc.want == "[]") {
			t.Fatalf("TrinityFeedback(%q): %v", tc.ids, err)
		}
		if fmt.Sprint(got) != tc.want {
			t.Errorf("TrinityFeedback(%q) reached %v, want %s", tc.ids, got, tc.want)
		}
	}
	for _, id := range []string{"sa", "sb", "sc", "sd"} {
		if _, err := s.Commit(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	for _, st := range []State{StateReady, StateCommitted, StateDropped} {
		if _, err := s.GC(ctx, st, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if got := respKeys(t, s); len(got) != 0 {
		t.Fatalf("index entries left after the sessions were deleted: %v", got)
	}
}

// respKeys lists the response ids in the response-id index.
func respKeys(t *testing.T, s *Store) []string {
	t.Helper()
	var ids []string
	err := s.db.View(func(txn *badger.Txn) error {
		return iterKeys(txn, key(pResp)[:1], func(k []byte) error {
			ids = append(ids, string(k[2:]))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}
