package capture

import (
	"context"
	"testing"
)

// TestInferenceSurvivesReopen: an agent whose conversation was inferred
// into a session before the store closed joins that session with its next
// turn after the store opens again (a restart of hone in the middle of a
// task), for its owner only; a session named by a header is not indexed
// (its agent names it again), nor is a committed one.
func TestInferenceSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, testOptions())
	v := newVocab()
	prompts, replies := toolSession()
	first := func(id, owner string) string {
		c := v.makeCall(id, "", prompts[0], replies[0], 1)
		c.Hone.Session = ""
		verdict := s.Admit(&Admission{CallID: c.ID, Route: RouteChat, Hone: c.Hone, Body: c.Request, Owner: owner})
		c.Session, c.NewSession, c.Owner = verdict.Session, verdict.New, owner
		s.Record(c)
		return verdict.Session
	}
	sid := first("a0", "key:a")
	closed := first("c0", "key:c")
	named := v.makeCall("n0", "named", prompts[0], replies[0], 1)
	s.Admit(&Admission{CallID: named.ID, Route: RouteChat, Hone: named.Hone, Body: named.Request, Owner: "key:n"})
	named.Owner = "key:n"
	s.Record(named)
	s.syncQueue(t)
	if _, err := s.Commit(context.Background(), closed); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTest(t, dir, testOptions())
	defer s.Close()
	next := func(owner string) Verdict {
		c := v.makeCall("next-"+owner, "", prompts[1], replies[1], 1)
		return s.Admit(&Admission{CallID: c.ID, Route: RouteChat, Body: c.Request, Owner: owner})
	}
	if got := next("key:a"); got.Session != sid || got.New {
		t.Fatalf("after reopening, the next turn got session %s (new %v), want %s", got.Session, got.New, sid)
	}
	if got := next("key:b"); got.Session == sid {
		t.Fatal("another owner's identical turn joined the session")
	}
	if got := next("key:c"); got.Session == closed {
		t.Fatal("a committed session was continued by inference after reopening")
	}
	if got := next("key:n"); got.Session == "named" {
		t.Fatal("a header-named session was indexed for inference")
	}
}
