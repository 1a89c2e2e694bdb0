package capture

import (
	"context"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// TestGCKeepsCommittedSessions: gc of consumed sessions (and eviction)
// never takes a committed session still waiting for its reward; before
// state index version 2 both states shared one index byte.
func TestGCKeepsCommittedSessions(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, dir, testOptions())
	runSession(t, s, newVocab(), "done")
	runSession(t, s, newVocab(), "waiting")
	if _, err := s.Feedback(ctx, FeedbackReq{Session: "done", Reward: ptr(1)}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"done", "waiting"} {
		if _, err := s.Commit(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	last, _, _ := s.Cursor(ctx)
	if err := s.Ack(ctx, last); err != nil {
		t.Fatal(err)
	}
	// write the consumed session's index entry the old way, as a store from
	// before version 2 has it, and forget the version
	err := s.db.Update(func(txn *badger.Txn) error {
		rec, err := decodeSessionFrom(txn, "done")
		if err != nil {
			return err
		}
		if rec.State != StateConsumed {
			t.Fatalf("done is %s", rec.State)
		}
		if err := txn.Delete(stateKey(StateConsumed, rec.Since.UnixNano(), "done")); err != nil {
			return err
		}
		if err := txn.Set(stateKey(StateCommitted, rec.Since.UnixNano(), "done"), nil); err != nil {
			return err
		}
		return txn.Delete(metaKey("state-index"))
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTest(t, dir, testOptions())
	defer s.Close()
	n, err := s.GC(ctx, StateConsumed, time.Now().Add(time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("gc of consumed: %d, %v; want the one consumed session", n, err)
	}
	if rec, _, err := s.GetSession(ctx, "waiting"); err != nil || rec == nil || rec.State != StateCommitted {
		t.Fatalf("the committed session did not survive gc: %+v %v", rec, err)
	}
	if rec, _, _ := s.GetSession(ctx, "done"); rec != nil {
		t.Fatalf("the consumed session survived gc: %+v", rec)
	}
}

func decodeSessionFrom(txn *badger.Txn, id string) (*Session, error) {
	b, err := txnReader(txn)(sessionKey(id))
	if err != nil {
		return nil, err
	}
	return decodeSession(b)
}
