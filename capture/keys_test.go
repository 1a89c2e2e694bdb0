package capture

import (
	"bytes"
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
	record := responseRecorder(t, s)
	record("call-a", "sa", "chatcmpl-call-a")
	record("call-b", "sb", "chatcmpl-0f3e9a")
	if got := respKeys(t, s); fmt.Sprint(got) != "[chatcmpl-0f3e9a]" {
		t.Fatalf("response-id index %v, want only the engine-made id's entry", got)
	}
	record("call-c", "sc", "chatcmpl-call-a") // the agent sent X-Request-Id: call-a
	record("call-d", "sd", "cmpl-call-d")
	record("call-e", "se", "resp_call-e") // hone's own Responses and Messages answers
	record("call-f", "sf", "msg_call-f")
	if got := respKeys(t, s); fmt.Sprint(got) != "[chatcmpl-0f3e9a chatcmpl-call-a]" {
		t.Fatalf("response-id index %v, want entries for the two ids not made from their call's", got)
	}
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
		{[]string{"resp_call-e", "msg_call-f"}, "[se sf]"},
		{[]string{"msg_call-e", "resp_call-f"}, "[]"},                   // another API's prefix on a call id
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
	for _, id := range []string{"sa", "sb", "sc", "sd", "se", "sf"} {
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

// responseRecorder returns a func that stores one call of session sess,
// owned by "key:"+sess, that got response id respID.
func responseRecorder(t *testing.T, s *Store) func(id, sess, respID string) {
	v := newVocab()
	prompts, replies := toolSession()
	return func(id, sess, respID string) {
		t.Helper()
		c := v.makeCall(id, sess, prompts[0], replies[0], 1)
		c.ResponseID, c.Owner = respID, "key:"+sess
		s.Record(c)
		s.syncQueue(t)
	}
}

// respKeys lists the response ids in the response-id index.
func respKeys(t *testing.T, s *Store) []string {
	t.Helper()
	var ids []string
	err := s.db.View(func(txn *badger.Txn) error {
		return iterKeys(txn, key(pResp)[:1], func(k []byte) error {
			id, _, _ := bytes.Cut(k[2:], []byte{sep})
			ids = append(ids, string(id))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestResponseIDShared: two clients whose agents chose the same
// X-Request-Id (so vLLM gave both calls one response id) each keep their
// index entry: each client's Trinity feedback reaches its own session, a
// later call does not take an earlier one's feedback, and deleting one
// session leaves the other's entry. An entry an older store wrote (one per
// response id) is still found, and deleted with its call.
func TestResponseIDShared(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir(), testOptions())
	defer s.Close()
	record := responseRecorder(t, s)
	const shared = "chatcmpl-agent-7"
	record("call-x", "sx", shared)
	record("call-y", "sy", shared)
	feedback := func(ctx context.Context, want string) {
		t.Helper()
		got, err := s.TrinityFeedback(ctx, []string{shared}, 1, "", "")
		if err != nil || fmt.Sprint(got) != want {
			t.Errorf("TrinityFeedback reached %v (%v), want %s", got, err, want)
		}
	}
	feedback(WithOwner(ctx, "key:sx"), "[sx]")
	feedback(WithOwner(ctx, "key:sy"), "[sy]")
	feedback(ctx, "[sx sy]")
	for _, id := range []string{"sy"} {
		if _, err := s.Commit(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.GC(ctx, StateReady, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	feedback(ctx, "[sx]")

	// an older store's entry: r 0 <response id> alone
	record("call-z", "sz", "chatcmpl-old")
	err := s.db.Update(func(txn *badger.Txn) error {
		if err := txn.Delete(respIndexKey("chatcmpl-old", "call-z")); err != nil {
			return err
		}
		return txn.Set(respKey("chatcmpl-old"), []byte("sz\x00call-z"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.TrinityFeedback(ctx, []string{"chatcmpl-old"}, 1, "", ""); err != nil || fmt.Sprint(got) != "[sz]" {
		t.Errorf("an older store's entry: reached %v (%v), want [sz]", got, err)
	}
	for _, id := range []string{"sx", "sz"} {
		if _, err := s.Commit(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.GC(ctx, StateReady, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := respKeys(t, s); len(got) != 0 {
		t.Fatalf("index entries left after the sessions were deleted: %v", got)
	}
}
