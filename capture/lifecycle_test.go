package capture

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// turn records call i of the 3-call tool session under session id with the
// given owner and headers, and waits for it to be written when wait is set.
func turn(t *testing.T, s *Store, v *vocab, session, owner string, i int, reward *float64, commit, wait bool) *Call {
	t.Helper()
	prompts, replies := toolSession()
	c := v.makeCall(fmt.Sprintf("%s-%s-%d", session, owner, i), session, prompts[i], replies[i], int64(i+1))
	c.Hone.Task = "grp"
	c.Hone.Reward, c.Hone.Commit = reward, commit
	c.Owner = owner
	verdict := s.Admit(&Admission{CallID: c.ID, Route: RouteChat, Model: "qwen", Hone: c.Hone, Body: c.Request, Owner: owner})
	if verdict.Session != session || !verdict.Capture {
		t.Fatalf("verdict %+v", verdict)
	}
	s.Record(c)
	if wait {
		s.syncQueue(t)
	}
	return c
}

func session(t *testing.T, s *Store, id string) *Session {
	t.Helper()
	rec, _, err := s.GetSession(context.Background(), id)
	if err != nil {
		t.Fatalf("session %s: %v", id, err)
	}
	return rec
}

// liveExperiences returns the experiences in the ready queue by session.
func liveExperiences(t *testing.T, s *Store) map[string][]Experience {
	t.Helper()
	exps, err := s.Experiences(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]Experience{}
	for _, e := range exps {
		out[e.Session] = append(out[e.Session], e)
	}
	return out
}

// Issue 10: X-Hone-Commit (with a reward) on every call, as a default header
// sends it. The session is ready after the first call; each later call goes
// back into it and its experience is rebuilt: the queue ends with one
// experience holding all three calls, which replaces the earlier ones.
func TestCommitOnEveryCallKeepsEveryCall(t *testing.T) {
	for _, wait := range []bool{true, false} { // one batch per call, or all in one batch
		t.Run(fmt.Sprintf("batch-per-call=%v", wait), func(t *testing.T) {
			s := openTest(t, t.TempDir(), testOptions())
			defer s.Close()
			v := newVocab()
			for i := 0; i < 3; i++ {
				turn(t, s, v, "every", "", i, ptr(float64(i)), true, wait)
			}
			s.syncQueue(t)
			rec := session(t, s, "every")
			if rec.State != StateReady || rec.Calls != 3 || len(rec.Cursors) != 1 {
				t.Fatalf("session %s calls %d cursors %v", rec.State, rec.Calls, rec.Cursors)
			}
			exps := liveExperiences(t, s)["every"]
			if len(exps) != 1 || len(exps[0].Steps) != 3 || exps[0].Reward != 2 || exps[0].Task != "grp" {
				t.Fatalf("experiences %+v", exps)
			}
			if wait {
				if exps[0].Cursor != 3 || fmt.Sprint(exps[0].Replaces) != "[2]" || rec.Rebuilds != 2 {
					t.Fatalf("cursor %d replaces %v rebuilds %d, want 3 [2] 2", exps[0].Cursor, exps[0].Replaces, rec.Rebuilds)
				}
				if got := counterValue(s.m.rebuilds); got != 2 {
					t.Fatalf("rebuild counter %v", got)
				}
			}
		})
	}
}

// A reward that arrives after a session is ready rebuilds it; once it is
// consumed a reward is stored but not applied.
func TestRewardAfterReady(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir(), testOptions())
	defer s.Close()
	runSession(t, s, newVocab(), "late")
	if _, err := s.Feedback(ctx, FeedbackReq{Session: "late", Reward: ptr(0.1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, "late"); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Feedback(ctx, FeedbackReq{Session: "late", Reward: ptr(0.9)})
	if err != nil || rec.State != StateReady || fmt.Sprint(rec.Cursors) != "[2]" {
		t.Fatalf("feedback on ready: %+v %v", rec, err)
	}
	exps := liveExperiences(t, s)["late"]
	if len(exps) != 1 || exps[0].Reward != 0.9 || exps[0].Cursor != 2 || fmt.Sprint(exps[0].Replaces) != "[1]" {
		t.Fatalf("rebuilt experience %+v", exps)
	}
	if _, err := s.Commit(ctx, "late"); err != nil { // commit of a ready session: nothing changes
		t.Fatal(err)
	}
	if err := s.Ack(ctx, 2); err != nil {
		t.Fatal(err)
	}
	rec, err = s.Feedback(ctx, FeedbackReq{Session: "late", Reward: ptr(-1)})
	if err != nil || rec.State != StateConsumed || len(rec.Rewards) != 3 {
		t.Fatalf("feedback on consumed: %+v %v", rec, err)
	}
	if last, _, _ := s.Cursor(ctx); last != 2 {
		t.Fatalf("a reward on a consumed session queued something: cursor %d", last)
	}
}

// A call for a consumed session starts a continuation: <id>.2, linked both
// ways, with the task and owner of the first part; later calls that send the
// old id follow the link, and a third part is <id>.3.
func TestConsumedSessionContinues(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir(), testOptions())
	defer s.Close()
	v := newVocab()
	turn(t, s, v, "conv", "key:a", 0, ptr(1), true, true)
	if err := s.Ack(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if rec := session(t, s, "conv"); rec.State != StateConsumed {
		t.Fatalf("state %s", rec.State)
	}
	c := turn(t, s, v, "conv", "key:a", 1, nil, false, true)
	turn(t, s, v, "conv", "key:a", 2, ptr(0.5), true, true)
	first, next := session(t, s, "conv"), session(t, s, "conv.2")
	if first.ContinuedBy != "conv.2" || first.Latest != "conv.2" || first.Calls != 1 {
		t.Fatalf("first part %+v", first)
	}
	if next.ContinuationOf != "conv" || next.Root != "conv" || next.Part != 2 || next.Task != "grp" ||
		next.Owner != "key:a" || next.Calls != 2 || next.State != StateReady {
		t.Fatalf("continuation %+v", next)
	}
	_, calls, _ := s.GetSession(ctx, "conv.2")
	if len(calls) != 2 || calls[0].ID != c.ID || calls[0].Session != "conv.2" || calls[0].Hone.Session != "conv" {
		t.Fatalf("continuation calls %+v", calls)
	}
	exps := liveExperiences(t, s)["conv.2"]
	if len(exps) != 1 || exps[0].ContinuationOf != "conv" || len(exps[0].Steps) != 2 || exps[0].Reward != 0.5 {
		t.Fatalf("continuation experience %+v", exps)
	}
	// Feedback and commit by the id the agent knows reach the newest part.
	if rec, err := s.Feedback(ctx, FeedbackReq{Session: "conv", Reward: ptr(0.7)}); err != nil || rec.ID != "conv.2" {
		t.Fatalf("feedback by the root id: %+v %v", rec, err)
	}
	last, _, _ := s.Cursor(ctx)
	if err := s.Ack(ctx, last); err != nil {
		t.Fatal(err)
	}
	turn(t, s, v, "conv", "key:a", 0, nil, false, true)
	if rec := session(t, s, "conv"); rec.Latest != "conv.3" || session(t, s, "conv.2").ContinuedBy != "conv.3" {
		t.Fatalf("third part not linked: %+v", rec)
	}
	if got := counterValue(s.m.continuations); got != 2 {
		t.Fatalf("continuations counted %v", got)
	}
}

// A call for a dropped session is an orphan: stored, counted, not trained.
func TestDroppedSessionOrphanCall(t *testing.T) {
	ctx := context.Background()
	o := testOptions()
	o.Reward.Deadline = time.Minute
	s := openTest(t, t.TempDir(), o)
	defer s.Close()
	v := newVocab()
	turn(t, s, v, "gone", "", 0, nil, true, true)
	if err := s.Sweep(ctx, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	turn(t, s, v, "gone", "", 1, ptr(1), true, true)
	rec := session(t, s, "gone")
	if rec.State != StateDropped || rec.Calls != 2 || rec.Orphans != 1 {
		t.Fatalf("dropped session %+v", rec)
	}
	if got := counterValue(s.m.orphans); got != 1 {
		t.Fatalf("orphans counted %v", got)
	}
	if last, _, _ := s.Cursor(ctx); last != 0 {
		t.Fatalf("an orphan call queued an experience (cursor %d)", last)
	}
}

// A session belongs to the client that opened it. Another client's call
// naming it is refused at admission (before anything runs or is stored,
// after a restart too), its feedback and commits are forbidden, and the
// control plane acts on every session.
func TestForeignCallsAndFeedback(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, dir, testOptions())
	v := newVocab()
	turn(t, s, v, "shared", "key:a", 0, nil, false, true)
	refused := func(id, owner string) {
		t.Helper()
		vd := s.Admit(&Admission{CallID: "c-" + owner, Route: RouteChat, Hone: HoneHeaders{Session: id, Reward: ptr(-5),
			Commit: true}, Body: []byte(`{"messages":[]}`), Owner: owner})
		if !errors.Is(vd.Refused, ErrSessionOwned) || !errors.Is(vd.Refused, ErrForbidden) || vd.Capture {
			t.Fatalf("%s's call naming %s: verdict %+v", owner, id, vd)
		}
	}
	refused("shared", "key:b")
	if got := counterValue(s.m.foreign.WithLabelValues("header", "call")); got != 1 {
		t.Fatalf("refused calls counted %v, want 1", got)
	}
	a := session(t, s, "shared")
	if a.Owner != "key:a" || a.State != StateOpen || a.rewarded() || a.Calls != 1 {
		t.Fatalf("owner a's session touched by b: %+v", a)
	}
	// A new id is claimed at admission: a second client is refused before
	// the first one's call is written.
	if vd := s.Admit(&Admission{CallID: "f1", Route: RouteChat, Hone: HoneHeaders{Session: "fresh"}, Owner: "key:b"}); vd.Refused != nil {
		t.Fatalf("first use of an id: %+v", vd)
	}
	refused("fresh", "key:a")
	if vd := s.Admit(&Admission{CallID: "f2", Route: RouteChat, Hone: HoneHeaders{Session: "fresh"}, Owner: "key:b"}); vd.Refused != nil {
		t.Fatalf("the claimant's second call: %+v", vd)
	}
	// A call that reaches the writer without a claim (no Admit) is never
	// stored in another client's session.
	prompts, replies := toolSession()
	stray := v.makeCall("stray", "shared", prompts[0], replies[0], 1)
	stray.Owner = "key:b"
	s.Record(stray)
	s.syncQueue(t)
	if a := session(t, s, "shared"); a.Calls != 1 {
		t.Fatalf("a stray call of b joined a's session: %+v", a)
	}

	asA, asB, asC := WithOwner(ctx, "key:a"), WithOwner(ctx, "key:b"), WithOwner(ctx, "key:c")
	for name, owner := range map[string]context.Context{"b": asB, "c": asC} {
		if _, err := s.Feedback(owner, FeedbackReq{Session: "shared", Reward: ptr(-5)}); !errors.Is(err, ErrForbidden) {
			t.Fatalf("feedback of %s: %v", name, err)
		}
		if _, err := s.Commit(owner, "shared"); !errors.Is(err, ErrForbidden) {
			t.Fatalf("commit of %s: %v", name, err)
		}
		if _, err := s.Feedback(owner, FeedbackReq{Call: "shared-key:a-0", Reward: ptr(-5)}); !errors.Is(err, ErrForbidden) {
			t.Fatalf("call feedback of %s: %v", name, err)
		}
		// naming another session does not make the answer say whose call it is
		_, err := s.Feedback(owner, FeedbackReq{Call: "shared-key:a-0", Session: "guess", Reward: ptr(-5)})
		if !errors.Is(err, ErrForbidden) || strings.Contains(strings.ReplaceAll(err.Error(), "shared-key:a-0", ""), "shared") {
			t.Fatalf("call feedback of %s naming another session: %v", name, err)
		}
		if _, _, err := s.GetSession(owner, "shared"); !errors.Is(err, ErrForbidden) {
			t.Fatalf("read of %s: %v", name, err)
		}
	}
	if rec, err := s.Feedback(asA, FeedbackReq{Session: "shared", Reward: ptr(1)}); err != nil || rec.ID != "shared" {
		t.Fatalf("owner's feedback: %+v %v", rec, err)
	}
	if _, err := s.Feedback(ctx, FeedbackReq{Session: "shared", Reward: ptr(0.5)}); err != nil {
		t.Fatalf("control plane (no owner): %v", err)
	}
	if _, err := s.TrinityFeedback(asC, []string{"chatcmpl-shared-key:a-0"}, 1, "", ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("trinity feedback of a stranger: %v", err)
	}
	turn(t, s, v, "other-a", "key:a", 0, ptr(1), false, true)
	turn(t, s, v, "other-c", "key:c", 0, ptr(1), false, true)
	done, err := s.TrinityCommit(asC)
	if err != nil || fmt.Sprint(done) != "[other-c]" {
		t.Fatalf("trinity commit as c: %v %v", done, err)
	}
	if rec := session(t, s, "other-a"); rec.State != StateOpen {
		t.Fatalf("c's trinity commit closed a's session: %s", rec.State)
	}
	// A session opened without a key belongs to no client: keyed callers
	// may not act on it, the control plane may.
	turn(t, s, v, "anon", "", 0, nil, false, true)
	if _, err := s.Feedback(asC, FeedbackReq{Session: "anon", Reward: ptr(1)}); !errors.Is(err, ErrForbidden) {
		t.Fatalf("keyed feedback on an unowned session: %v", err)
	}
	refused("anon", "key:c")
	if rec, err := s.Commit(ctx, "anon"); err != nil || rec.State != StateCommitted {
		t.Fatalf("control-plane commit of an unowned session: %+v %v", rec, err)
	}
	// The claims survive a restart: they are the stored owners.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, testOptions())
	defer s.Close()
	refused("shared", "key:b")
}

// Session inference is per owner: identical conversations of two clients
// are two sessions.
func TestInferencePerOwner(t *testing.T) {
	o := testOptions()
	s := openTest(t, t.TempDir(), o)
	defer s.Close()
	v := newVocab()
	prompts, replies := toolSession()
	sessions := map[string]string{}
	for _, owner := range []string{"key:a", "key:b"} {
		var sid string
		for i := 0; i < 2; i++ {
			c := v.makeCall(fmt.Sprintf("%s-%d", owner, i), "", prompts[i], replies[i], 1)
			c.Hone.Session = ""
			verdict := s.Admit(&Admission{CallID: c.ID, Route: RouteChat, Hone: c.Hone, Body: c.Request, Owner: owner})
			if i == 1 && verdict.Session != sid {
				t.Fatalf("%s: second turn inferred %s, want %s", owner, verdict.Session, sid)
			}
			sid = verdict.Session
			c.Session, c.Owner = sid, owner
			s.Record(c)
		}
		sessions[owner] = sid
	}
	if sessions["key:a"] == sessions["key:b"] {
		t.Fatal("two owners' identical conversations share one session")
	}
}

// Call.Durable gets one answer once the call and its header settlement are
// synced (the session is then ready for every reader), and an error, never
// silence, for a call that is not stored.
func TestDurable(t *testing.T) {
	o := testOptions()
	o.Queue.Size = 1
	s := openTest(t, t.TempDir(), o)
	v := newVocab()
	prompts, replies := toolSession()
	c := v.makeCall("d1", "dur", prompts[0], replies[0], 1)
	c.Hone.Reward, c.Hone.Commit = ptr(1), true
	done := make(chan error, 1)
	c.Durable = done
	s.Record(c)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Durable never answered")
	}
	if rec, _, err := s.GetSession(context.Background(), "dur"); err != nil || rec.State != StateReady {
		t.Fatalf("after Durable: %+v %v", rec, err)
	}

	bad := v.makeCall("d2", "bad\x00id", prompts[0], replies[0], 1)
	badDone := make(chan error, 1)
	bad.Durable = badDone
	s.Record(bad)
	if err := <-badDone; !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid call: %v", err)
	}

	release := blockWriter(s)
	var full error
	for i := 0; full == nil && i < queueBound(o)+10; i++ {
		c := v.makeCall(fmt.Sprintf("f%d", i), "full", prompts[0], replies[0], 1)
		ch := make(chan error, 1)
		c.Durable = ch
		s.Record(c)
		select {
		case full = <-ch:
		default:
		}
	}
	release()
	if !errors.Is(full, ErrQueueFull) {
		t.Fatalf("full queue: %v", full)
	}
	s.Close()
	late := v.makeCall("d3", "dur", prompts[1], replies[1], 1)
	lateDone := make(chan error, 1)
	late.Durable = lateDone
	s.Record(late)
	if err := <-lateDone; !errors.Is(err, ErrClosed) {
		t.Fatalf("closed store: %v", err)
	}
}

// retention.call_ttl must leave room for a session to close and get its
// reward; the error names the keys.
func TestCallTTLValidated(t *testing.T) {
	for _, tc := range []struct {
		ttl, idle, deadline time.Duration
		want                string
	}{
		{time.Hour, 10 * time.Minute, time.Hour, "retention.call_ttl 1h0m0s must exceed session.idle_timeout (10m0s) + reward.deadline (1h0m0s)"},
		{48 * time.Hour, 0, time.Hour, "needs session.idle_timeout"},
		{48 * time.Hour, time.Minute, 0, "reward.deadline (0s) set"},
		{-time.Second, time.Minute, time.Hour, "want >= 0"},
		{2 * time.Hour, 10 * time.Minute, time.Hour, ""},
		{0, 0, 0, ""},
	} {
		o := DefaultOptions()
		o.Retention.CallTTL, o.Session.IdleTimeout, o.Reward.Deadline = tc.ttl, tc.idle, tc.deadline
		err := o.validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("ttl %v idle %v deadline %v: %v, want %q", tc.ttl, tc.idle, tc.deadline, err, tc.want)
		}
	}
}

// A session whose calls expired is dropped with a reason and counted, never
// built truncated; a call for a session old enough that its calls could
// expire first starts a continuation instead.
func TestExpiredCallsDropTheSession(t *testing.T) {
	ctx := context.Background()
	defer func(m time.Duration) { ttlMargin = m }(ttlMargin)
	ttlMargin = 0
	o := testOptions()
	o.Retention.CallTTL = 3 * time.Second
	o.Session.IdleTimeout, o.Reward.Deadline = time.Second, time.Second
	s := openTest(t, t.TempDir(), o)
	defer s.Close()
	v := newVocab()
	calls := runSession(t, s, v, "ttl")
	s.syncQueue(t)
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete(callKey(calls[1].ID)) }); err != nil {
		t.Fatal(err) // as if call 1 had expired alone
	}
	if _, err := s.Feedback(ctx, FeedbackReq{Session: "ttl", Reward: ptr(1)}); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Commit(ctx, "ttl")
	if err != nil || rec.State != StateDropped || !strings.Contains(rec.Closed, "calls-expired") {
		t.Fatalf("session with an expired call: %+v %v", rec, err)
	}
	if counterValue(s.m.expired) != 1 {
		t.Fatal("expired session not counted")
	}
	if last, _, _ := s.Cursor(ctx); last != 0 {
		t.Fatal("a truncated trajectory was queued")
	}

	turn(t, s, v, "old", "", 0, nil, false, true)
	time.Sleep(1100 * time.Millisecond) // past call_ttl - idle - deadline
	turn(t, s, v, "old", "", 1, ptr(1), true, true)
	old, next := session(t, s, "old"), session(t, s, "old.2")
	if old.State != StateCommitted || old.Closed != "ttl" || old.Calls != 1 || next.Calls != 1 || next.State != StateReady {
		t.Fatalf("aging session: %+v / %+v", old, next)
	}
}

// A crash between the batch that committed a rewarded session (or gave a
// ready one a call) and the building of its experiences leaves it committed
// with a reward: the next Open builds it.
func TestOpenReadiesCommittedRewardedSessions(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, testOptions())
	runSession(t, s, newVocab(), "crash")
	s.syncQueue(t)
	err := s.do(context.Background(), func() error {
		return s.update(true, func(t *tx) error {
			rec, err := t.session("crash")
			if err != nil {
				return err
			}
			t.addReward(rec, Reward{Value: 1, Source: "header"})
			return t.close(rec, "header") // committed with a reward, not built
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTest(t, dir, testOptions())
	defer s.Close()
	if rec := session(t, s, "crash"); rec.State != StateReady || len(liveExperiences(t, s)["crash"]) != 1 {
		t.Fatalf("after reopen: %+v", rec)
	}
}

// Calls waiting for the writer are bounded in bytes too: past the bound
// they are dropped (and counted, and their Durable told) as on a full
// queue, and what they held is given back once written.
func TestQueueBytesBound(t *testing.T) {
	s := openTest(t, t.TempDir(), testOptions())
	defer s.Close()
	v := newVocab()
	prompts, replies := toolSession()
	one := callBytes(v.makeCall("x", "qb", prompts[0], replies[0], 1))
	s.maxQueued = 3 * one
	release := blockWriter(s)
	defer release()
	const n = 20
	var full int
	for i := 0; i < n; i++ {
		c := v.makeCall(fmt.Sprintf("qb%d", i), "qb", prompts[0], replies[0], 1)
		done := make(chan error, 1)
		c.Durable = done
		s.Record(c)
		select {
		case err := <-done:
			if !errors.Is(err, ErrQueueFull) {
				t.Fatalf("call %d: %v", i, err)
			}
			full++
		default:
		}
	}
	if full != n-3 {
		t.Fatalf("%d of %d calls dropped, want %d (the bound holds 3)", full, n, n-3)
	}
	release()
	if stored := storedCalls(t, s); stored != 3 || counterValue(s.m.dropped) != n-3 {
		t.Fatalf("stored %d dropped %v", stored, counterValue(s.m.dropped))
	}
	if q := s.queued.Load(); q != 0 {
		t.Fatalf("%d bytes still counted as queued", q)
	}
}

// OnReady hooks see each session once, when it first becomes ready, with
// its reward and the versions that generated it; meta records survive a
// restart.
func TestReadyHooksAndMeta(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, testOptions())
	got := make(chan ReadySession, 4)
	s.OnReady(func(rs ReadySession) { got <- rs })
	v := newVocab()
	turn(t, s, v, "h1", "", 0, nil, false, true)
	turn(t, s, v, "h1", "", 1, ptr(0.75), true, true)
	select {
	case rs := <-got:
		if rs.ID != "h1" || rs.Reward != 0.75 || rs.Model != "qwen" || fmt.Sprint(rs.Versions) != "[1 2]" {
			t.Fatalf("ready session %+v", rs)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no hook call")
	}
	if _, err := s.Feedback(context.Background(), FeedbackReq{Session: "h1", Reward: ptr(1)}); err != nil {
		t.Fatal(err)
	}
	select {
	case rs := <-got:
		t.Fatalf("a rebuild called the hook again: %+v", rs)
	case <-time.After(200 * time.Millisecond):
	}
	if err := s.PutMeta("rollout/agent", []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, testOptions())
	defer s.Close()
	m, err := s.MetaPrefix("rollout/")
	if err != nil || string(m["rollout/agent"]) != `{"a":1}` || len(m) != 1 {
		t.Fatalf("meta after restart %q %v", m, err)
	}
}

// TestFeedbackBounds: a feedback body's tags and comment are bounded as the
// X-Hone-Tags header is (a clear error, nothing applied), a session keeps
// at most maxTags tags however many feedbacks bring new ones, at most
// maxRewardText bytes of comments and tags, and at most maxRewards rewards.
func TestFeedbackBounds(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir(), testOptions())
	defer s.Close()
	turn(t, s, newVocab(), "bounded", "", 0, nil, false, true)
	many := func(n, size int, prefix string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s%0*d", prefix, size-len(prefix), i)
		}
		return out
	}
	for name, req := range map[string]FeedbackReq{
		"33 tags":            {Session: "bounded", Reward: ptr(1), Tags: many(maxTags+1, 8, "t")},
		"a tag of 129 bytes": {Session: "bounded", Reward: ptr(1), Tags: many(1, maxTagLen+1, "t")},
		"a comment too long": {Session: "bounded", Reward: ptr(1), Comment: strings.Repeat("c", maxComment+1)},
	} {
		if _, err := s.Feedback(ctx, req); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if rec := session(t, s, "bounded"); len(rec.Rewards) != 0 {
		t.Fatalf("a refused feedback applied a reward: %+v", rec.Rewards)
	}
	for _, prefix := range []string{"a", "b"} {
		if _, err := s.Feedback(ctx, FeedbackReq{Session: "bounded", Reward: ptr(1), Tags: many(maxTags, 8, prefix),
			Comment: strings.Repeat("c", maxComment)}); err != nil {
			t.Fatalf("feedback at the bounds: %v", err)
		}
	}
	if rec := session(t, s, "bounded"); len(rec.Tags) != maxTags || rec.Tags[0] != "a0000000" || len(rec.Rewards) != 2 {
		t.Fatalf("session tags %d (first %q), rewards %d; want %d tags, the first feedback's, and 2 rewards",
			len(rec.Tags), rec.Tags[0], len(rec.Rewards), maxTags)
	}
	// comments and tags together stop at maxRewardText per session (every
	// update rewrites the record whole); a reward without them still applies
	full := FeedbackReq{Session: "bounded", Reward: ptr(1), Comment: strings.Repeat("c", maxComment)}
	kept := 2
	for ; kept < 100; kept++ {
		if _, err := s.Feedback(ctx, full); err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("feedback %d: %v, want ErrInvalid", kept+1, err)
			}
			break
		}
	}
	text := 0
	for _, r := range session(t, s, "bounded").Rewards {
		text += r.text()
	}
	if text > maxRewardText || text+maxComment <= maxRewardText || kept == 100 {
		t.Fatalf("%d feedbacks kept %d bytes of comments and tags, want at most %d and no room for one more", kept, text, maxRewardText)
	}
	if _, err := s.Feedback(ctx, FeedbackReq{Session: "bounded", Reward: ptr(1)}); err != nil {
		t.Fatalf("a reward without a comment after the text bound: %v", err)
	}
	err := s.do(ctx, func() error {
		return s.update(false, func(tx *tx) error {
			full := &Session{ID: "full", Rewards: make([]Reward, maxRewards)}
			if err := tx.addReward(full, Reward{Value: 1}); !errors.Is(err, ErrInvalid) || len(full.Rewards) != maxRewards {
				t.Errorf("reward %d of a session: %v, %d kept; want ErrInvalid and nothing added", maxRewards+1, err, len(full.Rewards))
			}
			return errors.New("roll back")
		})
	})
	if err == nil || err.Error() != "roll back" {
		t.Fatalf("update: %v", err)
	}
}

// TestSkippedSessionClaimKept: a session capture skips has no record to hold
// its owner, yet its claim holds when new ids push it out of the claims
// cache and across a restart: another client naming the id is still
// refused, and the first one's calls are not. A session in use longer than
// a stored claim lives keeps it: its calls write it again.
func TestSkippedSessionClaimKept(t *testing.T) {
	dir := t.TempDir()
	o := testOptions()
	o.Selection.SampleRate = 0
	o.Queue.CacheSize = 8
	s := openTest(t, dir, o)
	admit := func(s *Store, owner, sid string) error {
		return s.Admit(&Admission{CallID: "call-" + NewID(), Route: RouteChat, Model: "m", Owner: owner,
			Hone: HoneHeaders{Session: sid, Train: -1}, Body: []byte(`{"messages":[]}`)}).Refused
	}
	if err := admit(s, "key:victim", "task-42"); err != nil {
		t.Fatal(err)
	}
	if err := s.flushClaims(); err != nil { // the janitor's tick
		t.Fatal(err)
	}
	if err := admit(s, "key:attacker", "task-42"); !errors.Is(err, ErrSessionOwned) {
		t.Fatalf("another client took a claimed id: %v", err)
	}
	for i := range 4 * o.Queue.CacheSize {
		_ = admit(s, "key:attacker", fmt.Sprintf("junk-%d", i))
	}
	if err := admit(s, "key:attacker", "task-42"); !errors.Is(err, ErrSessionOwned) {
		t.Errorf("after the claim left the cache, another client took the id: %v", err)
	}
	if err := admit(s, "key:victim", "task-42"); err != nil {
		t.Errorf("after the claim left the cache, its owner was refused: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, o)
	if err := admit(s, "key:attacker", "task-42"); !errors.Is(err, ErrSessionOwned) {
		t.Errorf("after a restart, another client took the id: %v", err)
	}
	if err := admit(s, "key:victim", "task-42"); err != nil {
		t.Errorf("after a restart, its owner was refused: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// a stored claim lives 3 s here (written again after 1.5 s); the
	// session is used for 3.5 s
	o.Session.IdleTimeout, o.Reward.Deadline = time.Second, 2*time.Second
	defer func(m time.Duration) { ttlMargin = m }(ttlMargin)
	ttlMargin = 0
	dir2 := t.TempDir()
	s = openTest(t, dir2, o)
	for range 7 {
		if err := admit(s, "key:victim", "long-task"); err != nil {
			t.Fatal(err)
		}
		if err := s.flushClaims(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir2, o)
	defer s.Close()
	if err := admit(s, "key:attacker", "long-task"); !errors.Is(err, ErrSessionOwned) {
		t.Errorf("a session in use longer than its stored claim lives lost it at a restart: %v", err)
	}
}

// TestNewSessionClaimPinned: the claim of a new id holds while its first
// call is in flight, however many new ids another client sends meanwhile
// (they would push it out of the claims cache), and for a skipped session
// before the janitor writes its claim. The janitor unpins a claim once the
// store holds it, and one nothing stored lapses.
func TestNewSessionClaimPinned(t *testing.T) {
	o := testOptions()
	o.Queue.CacheSize = 8
	admit := func(s *Store, owner, sid string, train int8) error {
		return s.Admit(&Admission{CallID: "call-" + NewID(), Route: RouteChat, Model: "m", Owner: owner,
			Hone: HoneHeaders{Session: sid, Train: train}, Body: []byte(`{"messages":[]}`)}).Refused
	}
	flood := func(s *Store) {
		for i := range 4 * o.Queue.CacheSize {
			if err := admit(s, "key:attacker", fmt.Sprintf("junk-%d-%s", i, NewID()), -1); err != nil {
				t.Fatal(err)
			}
		}
	}
	s := openTest(t, t.TempDir(), o)
	defer s.Close()
	v := newVocab()
	for _, train := range []int8{1, 0} { // captured (first call in flight), skipped (claim not yet written)
		sid := fmt.Sprintf("task-%d", train)
		if err := admit(s, "key:victim", sid, train); err != nil {
			t.Fatal(err)
		}
		flood(s)
		if err := admit(s, "key:attacker", sid, -1); !errors.Is(err, ErrSessionOwned) {
			t.Errorf("train %d: another client took a new id before its first call was stored: %v", train, err)
		}
		if err := admit(s, "key:victim", sid, -1); err != nil {
			t.Errorf("train %d: the id's owner was refused: %v", train, err)
		}
	}
	// the captured session's first call is stored, the skipped one's claim written: both unpinned, still held
	c := turn(t, s, v, "task-1", "key:victim", 0, nil, false, true)
	if c.Session != "task-1" {
		t.Fatalf("first call stored in %q", c.Session)
	}
	if err := s.db.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := s.flushClaims(); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := s.pruneFresh(now); err != nil {
		t.Fatal(err)
	}
	for _, sid := range []string{"task-0", "task-1"} {
		if _, ok := s.claims.pinned(sid); ok {
			t.Errorf("%s still pinned after the store holds it", sid)
		}
	}
	flood(s)
	for _, sid := range []string{"task-0", "task-1"} {
		if err := admit(s, "key:attacker", sid, -1); !errors.Is(err, ErrSessionOwned) {
			t.Errorf("%s: another client took a stored id: %v", sid, err)
		}
	}
	// a claim whose call never reaches the store lapses after freshLife
	if err := admit(s, "key:victim", "never-recorded", 1); err != nil {
		t.Fatal(err)
	}
	if err := s.pruneFresh(now); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.claims.pinned("never-recorded"); !ok {
		t.Fatal("a claim in flight unpinned")
	}
	if err := s.pruneFresh(now.Add(freshLife + time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.claims.pinned("never-recorded"); ok {
		t.Error("a claim nothing stored did not lapse")
	}
	// a call handed back (Abandon: no engine answered it) unpins the claim
	// it made, and only that call's
	if err := s.Admit(&Admission{CallID: "call-abandoned", Route: RouteChat, Model: "m", Owner: "key:victim",
		Hone: HoneHeaders{Session: "abandoned", Train: 1}, Body: []byte(`{"messages":[]}`)}).Refused; err != nil {
		t.Fatal(err)
	}
	s.Abandon("call-other", "abandoned", "key:victim")
	if _, ok := s.claims.pinned("abandoned"); !ok {
		t.Fatal("another call's Abandon unpinned the claim")
	}
	before := s.claims.freshOf["key:victim"]
	s.Abandon("call-abandoned", "abandoned", "key:victim")
	if _, ok := s.claims.pinned("abandoned"); ok || s.claims.freshOf["key:victim"] != before-1 {
		t.Error("an abandoned call's claim is still pinned")
	}
	if err := admit(s, "key:attacker", "abandoned", -1); !errors.Is(err, ErrSessionOwned) {
		t.Errorf("an abandoned call's id left the claims cache: %v", err)
	}
	// one key's claims that are never stored (calls refused after
	// admission) use up its own share of the pins, not everyone's
	for i := range maxFreshPerOwner + 10 {
		if err := admit(s, "key:attacker", fmt.Sprintf("leak-%d", i), 1); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.claims.freshOf["key:attacker"]; n != maxFreshPerOwner {
		t.Errorf("one key holds %d pins, want its share %d", n, maxFreshPerOwner)
	}
	if err := admit(s, "key:victim", "task-late", 1); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.claims.pinned("task-late"); !ok {
		t.Error("another key's unstored claims left no pin for a new id")
	}
}

// A Trinity /commit of more rewarded open sessions than one transaction
// takes closes them all, chunk by chunk, and only the caller's.
func TestTrinityCommitChunks(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir(), testOptions())
	defer s.Close()
	v := newVocab()
	const mine, theirs = 2*commitChunk + 5, 7
	for i := range mine {
		turn(t, s, v, fmt.Sprintf("mine-%03d", i), "key:a", 0, ptr(1), false, true)
	}
	for i := range theirs {
		turn(t, s, v, fmt.Sprintf("theirs-%d", i), "key:b", 0, ptr(1), false, true)
	}
	done, err := s.TrinityCommit(WithOwner(ctx, "key:a"))
	if err != nil || len(done) != mine {
		t.Fatalf("trinity commit as a: %d sessions, %v; want %d", len(done), err, mine)
	}
	for _, id := range done {
		if !strings.HasPrefix(id, "mine-") {
			t.Fatalf("a's commit closed %s", id)
		}
	}
	if rec := session(t, s, "mine-000"); rec.State == StateOpen {
		t.Fatal("a committed session is still open")
	}
	if rec := session(t, s, "theirs-0"); rec.State != StateOpen {
		t.Fatalf("a's commit closed b's session: %s", rec.State)
	}
	if done, err := s.TrinityCommit(ctx); err != nil || len(done) != theirs {
		t.Fatalf("trinity commit without an owner: %d sessions, %v; want the %d left", len(done), err, theirs)
	}
}

// A Trinity /commit over a session whose experiences cannot be built
// commits the others and drops that one.
func TestTrinityCommitBuildFailure(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir(), testOptions())
	defer s.Close()
	v := newVocab()
	calls := map[string]*Call{}
	for _, id := range []string{"t-good-1", "t-bad", "t-good-2"} {
		calls[id] = turn(t, s, v, id, "", 0, ptr(1), false, true)
	}
	corruptCall(t, s, calls["t-bad"].ID)
	done, err := s.TrinityCommit(ctx)
	slices.Sort(done)
	if err != nil || fmt.Sprint(done) != "[t-good-1 t-good-2]" {
		t.Fatalf("trinity commit: %v %v, want the two good sessions", done, err)
	}
	if rec := storedRecord(t, s, "t-bad"); rec.State != StateDropped || rec.Closed != "trinity,build-failed" {
		t.Fatalf("the session that cannot be built: %s, closed by %q", rec.State, rec.Closed)
	}
}
