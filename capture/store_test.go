package capture

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func testOptions() Options {
	o := DefaultOptions()
	o.Retention.Interval = time.Hour // tests call Sweep themselves
	return o
}

func openTest(t *testing.T, dir string, o Options) *Store {
	t.Helper()
	s, err := Open(dir, o, nil)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

// sync waits until everything queued before it is written.
func (s *Store) syncQueue(t *testing.T) {
	t.Helper()
	if err := s.do(context.Background(), func() error { return nil }); err != nil {
		t.Fatalf("sync queue: %v", err)
	}
}

// runSession admits and records the 3-call tool session under a header id.
func runSession(t *testing.T, s *Store, v *vocab, session string) []*Call {
	t.Helper()
	prompts, replies := toolSession()
	var calls []*Call
	for i := range prompts {
		c := v.makeCall(session+"-"+string(rune('a'+i)), session, prompts[i], replies[i], int64(i+1))
		verdict := s.Admit(&Admission{CallID: c.ID, Route: RouteChat, Model: "qwen", Hone: c.Hone, Body: c.Request})
		if verdict.Session != session || !verdict.Capture {
			t.Fatalf("verdict %+v", verdict)
		}
		s.Record(c)
		calls = append(calls, c)
	}
	return calls
}

func ptr(f float64) *float64 { return &f }

func TestStoreFeedbackCommitExperienceOnceAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := openTest(t, dir, testOptions())
	v := newVocab()
	calls := runSession(t, s, v, "sess-1")
	if _, err := s.Feedback(ctx, FeedbackReq{Session: "sess-1", Reward: ptr(0.5)}); err != nil {
		t.Fatalf("feedback: %v", err)
	}
	if _, err := s.Feedback(ctx, FeedbackReq{Call: calls[1].ID, Reward: ptr(-1), Comment: "wrong city"}); err != nil {
		t.Fatalf("call feedback: %v", err)
	}
	rec, err := s.Commit(ctx, "sess-1")
	if err != nil || rec.State != StateReady {
		t.Fatalf("commit: %v state %v", err, rec)
	}
	if _, err := s.Commit(ctx, "sess-1"); err != nil {
		t.Fatalf("second commit: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTest(t, dir, testOptions())
	defer s.Close()
	if _, err := s.Commit(ctx, "sess-1"); err != nil {
		t.Fatalf("commit after reopen: %v", err)
	}
	exps, err := s.Experiences(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(exps) != 1 {
		t.Fatalf("experiences = %d, want exactly 1", len(exps))
	}
	e := exps[0]
	last := calls[2]
	if e.Cursor != 1 || e.Session != "sess-1" || e.Reward != 0.5 || len(e.Steps) != 3 {
		t.Fatalf("experience %+v", e)
	}
	want := append(append([]int32(nil), last.PromptIDs...), last.Choices[0].TokenIDs...)
	if !equalIDs(e.Tokens, want) || len(e.Mask) != len(want) || len(e.Logprobs) != len(want) {
		t.Fatalf("experience tokens/mask/logprobs lengths %d %d %d, want %d", len(e.Tokens), len(e.Mask), len(e.Logprobs), len(want))
	}
	if r := e.Steps[1].Reward; r == nil || *r != -1 {
		t.Fatalf("call-level reward of step 1 = %v, want -1", r)
	}
	if e.Steps[0].Reward != nil {
		t.Fatalf("step 0 has reward %v", *e.Steps[0].Reward)
	}
	st := e.Steps[2]
	for i := st.Start; i < st.End; i++ {
		if e.Mask[i] != 1 || e.Logprobs[i] != last.Choices[0].Logprobs[i-st.Start] || e.Versions[i] != 3 {
			t.Fatalf("token %d: mask %d logprob %v version %d", i, e.Mask[i], e.Logprobs[i], e.Versions[i])
		}
	}
	if len(e.Messages) == 0 {
		t.Fatal("experience has no messages")
	}
}

func TestStoreCursorMonotonicAndAck(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := openTest(t, dir, testOptions())
	v := newVocab()
	for _, id := range []string{"s1", "s2"} {
		runSession(t, s, v, id)
		if _, err := s.Feedback(ctx, FeedbackReq{Session: id, Reward: ptr(1)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Commit(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Ack(ctx, 1); err != nil {
		t.Fatalf("ack: %v", err)
	}
	if err := s.Ack(ctx, 99); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ack beyond cursor: %v, want ErrInvalid", err)
	}
	s.Close()

	s = openTest(t, dir, testOptions())
	defer s.Close()
	runSession(t, s, v, "s3")
	if _, err := s.Feedback(ctx, FeedbackReq{Session: "s3", Reward: ptr(1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, "s3"); err != nil {
		t.Fatal(err)
	}
	exps, err := s.Experiences(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var cursors []uint64
	for _, e := range exps {
		cursors = append(cursors, e.Cursor)
	}
	if len(cursors) != 3 || cursors[0] != 1 || cursors[1] != 2 || cursors[2] != 3 {
		t.Fatalf("cursors %v, want [1 2 3]", cursors)
	}
	if after, _ := s.Experiences(ctx, 2, 10); len(after) != 1 || after[0].Session != "s3" {
		t.Fatalf("after=2 returned %d experiences", len(after))
	}
	last, acked, _ := s.Cursor(ctx)
	if last != 3 || acked != 1 {
		t.Fatalf("cursor %d acked %d, want 3 1", last, acked)
	}
	rec, _, err := s.GetSession(ctx, "s1")
	if err != nil || rec.State != StateConsumed {
		t.Fatalf("s1 state %v err %v, want consumed", rec, err)
	}
	rec, _, _ = s.GetSession(ctx, "s2")
	if rec.State != StateReady {
		t.Fatalf("s2 state %s, want ready", rec.State)
	}
}

func TestStoreHeaderRewardAndCommit(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir(), testOptions())
	defer s.Close()
	v := newVocab()
	prompts, replies := toolSession()
	for i := range prompts {
		c := v.makeCall("h"+string(rune('a'+i)), "hs", prompts[i], replies[i], 1)
		c.Hone.Task = "grp"
		if i == 2 {
			c.Hone.Reward, c.Hone.Commit = ptr(2), true
		}
		s.Admit(&Admission{CallID: c.ID, Route: RouteChat, Hone: c.Hone, Body: c.Request})
		s.Record(c)
	}
	s.syncQueue(t)
	rec, calls, err := s.GetSession(ctx, "hs")
	if err != nil || rec.State != StateReady || len(calls) != 3 || rec.Closed != "header" {
		t.Fatalf("session %+v calls %d err %v", rec, len(calls), err)
	}
	for i, c := range calls {
		if c.Seq != uint64(i) {
			t.Fatalf("call %d has seq %d", i, c.Seq)
		}
	}
	if rows := exportRows(t, s, ExportFilter{Task: "grp", Trajectories: true}); len(rows) != 1 || rows[0].Task != "grp" {
		t.Fatalf("sessions of task grp: %d rows", len(rows))
	}
}

func TestStoreSelection(t *testing.T) {
	o := testOptions()
	o.Selection.SampleRate = 0
	o.Selection.Rules = []SelectionRule{{Model: "picked", SampleRate: 1}}
	s := openTest(t, t.TempDir(), o)
	defer s.Close()
	cases := []struct {
		name string
		a    Admission
		keep bool
	}{
		{"sample rate 0 skips", Admission{CallID: "1", Model: "m", Hone: HoneHeaders{Session: "a", Train: -1}}, false},
		{"train header wins", Admission{CallID: "2", Model: "m", Hone: HoneHeaders{Session: "b", Train: 1}}, true},
		{"model rule", Admission{CallID: "3", Model: "picked", Hone: HoneHeaders{Session: "c", Train: -1}}, true},
		{"decided once per session", Admission{CallID: "4", Model: "m", Hone: HoneHeaders{Session: "b", Train: 0}}, true},
	}
	for _, tc := range cases {
		if got := s.Admit(&tc.a); got.Capture != tc.keep {
			t.Errorf("%s: capture %v, want %v", tc.name, got.Capture, tc.keep)
		}
	}
	long := strings.Repeat("s", maxIDLen+1)
	v1 := s.Admit(&Admission{CallID: "5", Hone: HoneHeaders{Session: long, Train: 1}})
	v2 := s.Admit(&Admission{CallID: "6", Hone: HoneHeaders{Session: long, Train: 1}})
	if _, err := ParseID(v1.Session); err != nil || v1.Session != v2.Session || v1.Session == long {
		t.Errorf("over-long session id mapped to %q and %q", v1.Session, v2.Session)
	}
}

func TestSampleRateIsDeterministicAndProportional(t *testing.T) {
	o := testOptions()
	o.Selection.SampleRate = 0.3
	s := openTest(t, t.TempDir(), o)
	defer s.Close()
	kept := 0
	const n = 4000
	for i := 0; i < n; i++ {
		a := Admission{Hone: HoneHeaders{Session: "sess-" + string(rune(i)), Train: -1}}
		if s.decide(&a, uint64(i)*0x9e3779b97f4a7c15) {
			kept++
		}
		again := s.decide(&a, uint64(i)*0x9e3779b97f4a7c15)
		if again != s.decide(&a, uint64(i)*0x9e3779b97f4a7c15) {
			t.Fatal("decision not deterministic")
		}
	}
	if f := float64(kept) / n; f < 0.26 || f > 0.34 {
		t.Fatalf("kept fraction %.3f, want about 0.3", f)
	}
}

func TestInferredSessionWithoutHeaders(t *testing.T) {
	s := openTest(t, t.TempDir(), testOptions())
	defer s.Close()
	v := newVocab()
	prompts, replies := toolSession()
	var sid string
	for i := range prompts {
		c := v.makeCall("i"+string(rune('a'+i)), "", prompts[i], replies[i], 1)
		c.Hone.Session = ""
		verdict := s.Admit(&Admission{CallID: c.ID, Route: RouteChat, Hone: c.Hone, Body: c.Request})
		if i == 0 {
			sid = verdict.Session
		} else if verdict.Session != sid {
			t.Fatalf("turn %d got session %s, want %s", i, verdict.Session, sid)
		}
		if verdict.New != (i == 0) {
			t.Fatalf("turn %d: New %v (only the opening call makes a session)", i, verdict.New)
		}
		c.Session, c.NewSession = verdict.Session, verdict.New
		s.Record(c)
	}
	// Another conversation with a different opening is a new session.
	other := v.makeCall("o", "", []msg{{Role: "user", Content: "unrelated"}}, replies[2], 1)
	if got := s.Admit(&Admission{CallID: "o", Route: RouteChat, Body: other.Request}); got.Session == sid {
		t.Fatal("unrelated conversation joined the session")
	}
	// Re-spaced tool arguments and parts content still join.
	body := []byte(`{"messages":[{"role":"system","content":[{"type":"text","text":"You are a helpful assistant."}]},` +
		`{"role":"user","content":"What is the weather in Paris and Rome?"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"Paris: 18C sunny"}]}`)
	if got := s.Admit(&Admission{CallID: "x", Route: RouteChat, Body: body}); got.Session != sid {
		t.Fatalf("canonically equal history got session %s, want %s", got.Session, sid)
	}
	s.syncQueue(t)
	rec, calls, err := s.GetSession(context.Background(), sid)
	if err != nil || len(calls) != 3 || rec.Calls != 3 {
		t.Fatalf("inferred session: %v calls %d", err, len(calls))
	}
}

func TestIdleTimeoutAndRewardDeadline(t *testing.T) {
	ctx := context.Background()
	o := testOptions()
	o.Session.IdleTimeout = time.Minute
	o.Reward.Deadline = time.Hour
	o.Reward.Default = ptr(0.25)
	s := openTest(t, t.TempDir(), o)
	defer s.Close()
	v := newVocab()
	runSession(t, s, v, "idle")
	s.syncQueue(t)
	if err := s.Sweep(ctx, time.Now().Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	rec, _, _ := s.GetSession(ctx, "idle")
	if rec.State != StateCommitted || rec.Closed != "idle" {
		t.Fatalf("after idle: %s by %q", rec.State, rec.Closed)
	}
	if err := s.Sweep(ctx, time.Now().Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	rec, _, _ = s.GetSession(ctx, "idle")
	if rec.State != StateReady || rec.SessionReward("last") != 0.25 {
		t.Fatalf("after deadline: %s reward %v", rec.State, rec.SessionReward("last"))
	}
}

// TestSweepKeepsUp: one sweep closes every session idle past the timeout,
// and applies the deadline to every one past it, not one pass of
// maxPerPass: at one sweep a second, a store opening more sessions a second
// than a pass closes fell further behind every second, and kept them all
// in memory.
func TestSweepKeepsUp(t *testing.T) {
	ctx := context.Background()
	o := testOptions()
	o.Session.IdleTimeout = time.Minute
	o.Reward.Deadline = time.Hour
	s := openTest(t, t.TempDir(), o)
	defer s.Close()
	v := newVocab()
	prompts, replies := toolSession()
	const n = 3*maxPerPass + 17
	for i := range n {
		s.Record(v.makeCall(fmt.Sprintf("call-%d", i), fmt.Sprintf("s%d", i), prompts[0], replies[0], 1))
	}
	s.syncQueue(t)
	count := func(st State) int {
		t.Helper()
		k := 0
		err := s.Sessions(ctx, ExportFilter{States: []State{st}}, func(*Session) error { k++; return nil })
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	if err := s.Sweep(ctx, time.Now().Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if open, committed := count(StateOpen), count(StateCommitted); open != 0 || committed != n {
		t.Fatalf("after one sweep past the idle timeout: %d open, %d committed; want 0 and %d", open, committed, n)
	}
	if err := s.Sweep(ctx, time.Now().Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if committed, dropped := count(StateCommitted), count(StateDropped); committed != 0 || dropped != n {
		t.Fatalf("after one sweep past the deadline: %d committed, %d dropped; want 0 and %d", committed, dropped, n)
	}
	// a sweep whose context ends returns while its pass may still run on
	// the writer: nothing it returns is shared with that pass (go test -race)
	done, cancel := context.WithCancel(ctx)
	cancel()
	for range 20 {
		if err := s.Sweep(done, time.Now().Add(3*time.Hour)); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	}
}

func TestRewardDeadlineDrops(t *testing.T) {
	ctx := context.Background()
	o := testOptions()
	o.Reward.Deadline = time.Minute
	s := openTest(t, t.TempDir(), o)
	defer s.Close()
	runSession(t, s, newVocab(), "d")
	if _, err := s.Commit(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if err := s.Sweep(ctx, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	rec, _, _ := s.GetSession(ctx, "d")
	if rec.State != StateDropped {
		t.Fatalf("state %s, want dropped", rec.State)
	}
	if n, err := s.GC(ctx, "", time.Time{}); err != nil || n != 1 {
		t.Fatalf("gc removed %d err %v, want 1", n, err)
	}
	if _, _, err := s.GetSession(ctx, "d"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after gc: %v, want not found", err)
	}
}

// blockWriter occupies the writer goroutine until the returned release
// function is called (idempotent, so tests can defer it).
func blockWriter(s *Store) (release func()) {
	ch := make(chan struct{})
	started := make(chan struct{})
	go s.do(context.Background(), func() error { close(started); <-ch; return nil })
	<-started
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

// storedCalls counts the calls recorded in the session records.
func storedCalls(t *testing.T, s *Store) int {
	t.Helper()
	s.syncQueue(t)
	total := 0
	err := s.Sessions(context.Background(), ExportFilter{}, func(rec *Session) error { total += rec.Calls; return nil })
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// queueBound is how many calls the queues hold while the writer is busy:
// the hot-path queue, the encoded queue and the one the encoder holds.
// queueBound is how many calls the pipeline holds while the writer is
// blocked: the queue, the encoded batches and the batch in the encoder's
// hands (each at most what the queue held plus the item that started it).
func queueBound(o Options) int { return o.Queue.Size + (encodedQueue+1)*(o.Queue.Size+1) }

func TestQueueFullDrops(t *testing.T) {
	o := testOptions()
	o.Queue.Size = 1
	s := openTest(t, t.TempDir(), o)
	defer s.Close()
	release := blockWriter(s)
	defer release()
	v := newVocab()
	prompts, replies := toolSession()
	n := queueBound(o) + 50
	for i := 0; i < n; i++ {
		s.Record(v.makeCall(fmt.Sprintf("q%d", i), "q", prompts[0], replies[0], 1))
	}
	release()
	stored := storedCalls(t, s)
	dropped := int(counterValue(s.m.dropped))
	if dropped < 50 || stored+dropped != n {
		t.Fatalf("stored %d dropped %d of %d (queues hold %d)", stored, dropped, n, queueBound(o))
	}
}

func TestUnknownSessionAndBadFeedback(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir(), testOptions())
	defer s.Close()
	if _, err := s.Feedback(ctx, FeedbackReq{Session: "nope", Reward: ptr(1)}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown session: %v", err)
	}
	if _, err := s.Feedback(ctx, FeedbackReq{Call: "nope", Reward: ptr(1)}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown call: %v", err)
	}
	if _, err := s.Feedback(ctx, FeedbackReq{Session: "x"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("missing reward: %v", err)
	}
	if _, err := s.Commit(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("commit unknown: %v", err)
	}
}

func TestEvictConsumedAndCallTTL(t *testing.T) {
	ctx := context.Background()
	o := testOptions()
	defer func(m time.Duration) { ttlMargin = m }(ttlMargin)
	ttlMargin = 0
	o.Retention.CallTTL = time.Second
	o.Session.IdleTimeout, o.Reward.Deadline = 200*time.Millisecond, 200*time.Millisecond
	s := openTest(t, t.TempDir(), o)
	defer s.Close()
	v := newVocab()
	for _, id := range []string{"old", "new"} {
		runSession(t, s, v, id)
		if _, err := s.Feedback(ctx, FeedbackReq{Session: id, Reward: ptr(1)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Commit(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []uint64{1, 2} { // "old" is consumed first
		if err := s.Ack(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.Evict(ctx, 1); err != nil || n != 1 {
		t.Fatalf("evicted %d err %v, want 1", n, err)
	}
	if _, _, err := s.GetSession(ctx, "old"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("oldest consumed session not evicted: %v", err)
	}
	if exps, _ := s.Experiences(ctx, 0, 0); len(exps) != 1 || exps[0].Session != "new" {
		t.Fatalf("experiences after eviction: %d", len(exps))
	}
	time.Sleep(1100 * time.Millisecond)
	rec, calls, err := s.GetSession(ctx, "new")
	if err != nil || len(calls) != 0 || rec.Calls != 3 {
		t.Fatalf("after call TTL: %d calls (want 0, the record keeps the count %d), err %v", len(calls), rec.Calls, err)
	}
}

func TestCloseDrainsQueue(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, testOptions())
	v := newVocab()
	prompts, replies := toolSession()
	const n = 500
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("d%03d", i/5)
		s.Record(v.makeCall(fmt.Sprintf("c%d", i), id, prompts[0], replies[0], 1))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, testOptions())
	defer s.Close()
	total := 0
	err := s.Sessions(context.Background(), ExportFilter{}, func(rec *Session) error { total += rec.Calls; return nil })
	if err != nil || total != n {
		t.Fatalf("after close and reopen: %d calls stored, want %d (%v)", total, n, err)
	}
}

func TestQueueFullBlocks(t *testing.T) {
	o := testOptions()
	o.Queue.Size = 1
	o.Queue.OnFull = "block"
	s := openTest(t, t.TempDir(), o)
	defer s.Close()
	release := blockWriter(s)
	defer release()
	v := newVocab()
	prompts, replies := toolSession()
	n := queueBound(o) + 10
	done := make(chan struct{})
	go func() {
		for i := 0; i < n; i++ {
			s.Record(v.makeCall(fmt.Sprintf("b%d", i), "b", prompts[0], replies[0], 1))
		}
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("Record did not block on a full queue")
	case <-time.After(100 * time.Millisecond):
	}
	release()
	<-done
	if stored, dropped := storedCalls(t, s), counterValue(s.m.dropped); stored != n || dropped != 0 {
		t.Fatalf("stored %d dropped %v, want %d 0 with on_full=block", stored, dropped, n)
	}
}

// TestConcurrentSessions records, rewards and commits sessions from several
// goroutines at once (run with -race) and checks every session is queued once.
func TestConcurrentSessions(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir(), testOptions())
	defer s.Close()
	prompts, replies := toolSession()
	const workers, per = 6, 10
	errc := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func() {
			v := newVocab()
			for i := 0; i < per; i++ {
				id := fmt.Sprintf("w%d-%d", w, i)
				for j := range prompts {
					c := v.makeCall(fmt.Sprintf("%s-%d", id, j), id, prompts[j], replies[j], 1)
					s.Admit(&Admission{CallID: c.ID, Route: RouteChat, Hone: c.Hone, Body: c.Request})
					s.Record(c)
				}
				if _, err := s.Feedback(ctx, FeedbackReq{Session: id, Reward: ptr(float64(i))}); err != nil {
					errc <- err
					return
				}
				if _, err := s.Commit(ctx, id); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for w := 0; w < workers; w++ {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	exps, err := s.Experiences(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i, e := range exps {
		if e.Cursor != uint64(i+1) || seen[e.Session] || len(e.Steps) != 3 {
			t.Fatalf("experience %d: cursor %d session %s (seen %v) steps %d", i, e.Cursor, e.Session, seen[e.Session], len(e.Steps))
		}
		seen[e.Session] = true
	}
	if len(exps) != workers*per {
		t.Fatalf("%d experiences, want %d", len(exps), workers*per)
	}
}

// TestSessionRecordBehindCalls simulates a crash that persisted a batch's
// calls but not its session record: new calls must not reuse seq numbers.
func TestSessionRecordBehindCalls(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, testOptions())
	v := newVocab()
	runSession(t, s, v, "lag")
	s.syncQueue(t)
	err := s.db.Update(func(txn *badger.Txn) error {
		it, err := txn.Get(sessionKey("lag"))
		if err != nil {
			return err
		}
		b, _ := it.ValueCopy(nil)
		rec, err := decodeSession(b)
		if err != nil {
			return err
		}
		rec.NextSeq, rec.Calls = 1, 1
		b, _ = encodeSession(rec)
		return txn.Set(sessionKey("lag"), b)
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openTest(t, dir, testOptions())
	defer s.Close()
	prompts, replies := toolSession()
	s.Record(v.makeCall("lag-d", "lag", prompts[2], replies[2], 1))
	s.syncQueue(t)
	rec, calls, err := s.GetSession(context.Background(), "lag")
	if err != nil || rec.Calls != 4 || rec.NextSeq != 4 || len(calls) != 4 || calls[3].ID != "lag-d" || calls[3].Seq != 3 {
		t.Fatalf("after a lagging record: calls %d next %d stored %d err %v", rec.Calls, rec.NextSeq, len(calls), err)
	}
}

// TestDeadlinePassesLingering: the deadline's passes read committed
// sessions from the state index in commit order and go on past the ones
// they leave committed (a reward they have: here more than a pass of
// sessions committed with a reward whose experiences were not built), so
// the unrewarded sessions committed after them are still dropped in the
// same sweep, and again after a restart.
func TestDeadlinePassesLingering(t *testing.T) {
	ctx := context.Background()
	o := testOptions()
	o.Reward.Deadline = time.Minute
	dir := t.TempDir()
	s := openTest(t, dir, o)
	v := newVocab()
	prompts, replies := toolSession()
	const lingering, late = maxPerPass + 40, 12
	for i := range lingering + 2*late {
		s.Record(v.makeCall(fmt.Sprintf("call-%d", i), fmt.Sprintf("s%03d", i), prompts[0], replies[0], 1))
	}
	s.syncQueue(t)
	err := s.update(true, func(t *tx) error {
		for i := range lingering {
			rec, err := t.session(fmt.Sprintf("s%03d", i))
			if err != nil {
				return err
			}
			if err := t.addReward(rec, Reward{Value: 1, Source: "test", At: t.now}); err != nil {
				return err
			}
			if err := t.setState(rec, StateCommitted); err != nil { // committed with a reward, not built
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	commit := func(s *Store, from, to int) {
		for i := from; i < to; i++ {
			if _, err := s.Commit(ctx, fmt.Sprintf("s%03d", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	state := func(s *Store, id string) State {
		rec, _, err := s.GetSession(ctx, id)
		if err != nil || rec == nil {
			t.Fatalf("session %s: %v", id, err)
		}
		return rec.State
	}
	commit(s, lingering, lingering+late)
	if err := s.Sweep(ctx, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for i := lingering; i < lingering+late; i++ {
		if st := state(s, fmt.Sprintf("s%03d", i)); st != StateDropped {
			t.Fatalf("session %d, committed without a reward after %d lingering ones: %s after the deadline, want dropped", i, lingering, st)
		}
	}
	if st := state(s, "s000"); st != StateCommitted {
		t.Fatalf("a lingering session: %s, want committed (the deadline leaves rewarded sessions alone)", st)
	}
	// the next sweep goes on after them: it reads none of them again
	looked := -1
	if err := s.do(ctx, func() (err error) { looked, err = s.applyDeadline(time.Now().Add(time.Hour)); return err }); err != nil {
		t.Fatal(err)
	}
	if looked != 0 {
		t.Fatalf("the pass after a sweep read %d committed sessions again, want 0", looked)
	}
	commit(s, lingering+late, lingering+2*late)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, o)
	defer s.Close()
	if err := s.Sweep(ctx, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for i := lingering + late; i < lingering+2*late; i++ {
		if st := state(s, fmt.Sprintf("s%03d", i)); st != StateDropped {
			t.Fatalf("session %d after a restart: %s after the deadline, want dropped", i, st)
		}
	}
}

// TestDeadlineBefore1970: a reward deadline that reaches back before the
// Unix epoch (call_ttl 0 lets it be decades) makes nothing due.
func TestDeadlineBefore1970(t *testing.T) {
	ctx := context.Background()
	o := testOptions()
	o.Retention.CallTTL = 0
	o.Reward.Deadline = 80 * 365 * 24 * time.Hour
	s := openTest(t, t.TempDir(), o)
	defer s.Close()
	runSession(t, s, newVocab(), "d")
	if _, err := s.Commit(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	if err := s.Sweep(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if rec, _, err := s.GetSession(ctx, "d"); err != nil || rec.State != StateCommitted {
		t.Fatalf("session %+v, %v: want committed, its deadline decades away", rec, err)
	}
}

// TestMaxOpen: above session.max_open open sessions the janitor closes the
// longest idle first ("capacity"), before their idle timeout, down to the
// bound, and counts them; the newest stay open.
func TestMaxOpen(t *testing.T) {
	ctx := context.Background()
	o := testOptions()
	o.Session.IdleTimeout = time.Hour
	o.Session.MaxOpen = 100
	reg := prometheus.NewRegistry()
	s, err := Open(t.TempDir(), o, reg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v := newVocab()
	prompts, replies := toolSession()
	const n = maxPerPass + 200
	for i := range n {
		c := v.makeCall(fmt.Sprintf("call-%d", i), fmt.Sprintf("s%03d", i), prompts[0], replies[0], 1)
		c.End = time.Now().Add(time.Duration(i-n) * time.Second) // s000 idle longest
		s.Record(c)
	}
	s.syncQueue(t)
	if err := s.Sweep(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		rec, _, err := s.GetSession(ctx, fmt.Sprintf("s%03d", i))
		if err != nil || rec == nil {
			t.Fatalf("session %d: %v", i, err)
		}
		wantOpen := i >= n-100
		if (rec.State == StateOpen) != wantOpen || !wantOpen && rec.Closed != "capacity" {
			t.Fatalf("session %d of %d (idle %ds): %s, closed %q; want the %d longest idle closed by capacity, the newest 100 open",
				i, n, n-i, rec.State, rec.Closed, n-100)
		}
	}
	if got := testutil.ToFloat64(s.m.capacityClosed); got != n-100 {
		t.Errorf("hone_capture_capacity_closed_sessions_total %g, want %d", got, n-100)
	}
}

// A session whose experiences cannot be built at the reward deadline (a
// call that no longer decodes) is dropped on its own, and the sessions
// after it in the pass get their default reward.
func TestDeadlineBuildFailure(t *testing.T) {
	ctx := context.Background()
	o := testOptions()
	o.Reward.Deadline = time.Minute
	def := 0.5
	o.Reward.Default = &def
	s := openTest(t, t.TempDir(), o)
	defer s.Close()
	v := newVocab()
	prompts, replies := toolSession()
	for i := range 3 {
		s.Record(v.makeCall(fmt.Sprintf("call-%d", i), fmt.Sprintf("s%d", i), prompts[0], replies[0], 1))
	}
	s.syncQueue(t)
	for i := range 3 {
		if _, err := s.Commit(ctx, fmt.Sprintf("s%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	corruptCall(t, s, "call-1")
	if err := s.Sweep(ctx, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for i, want := range []State{StateReady, StateDropped, StateReady} {
		rec := storedRecord(t, s, fmt.Sprintf("s%d", i))
		if rec.State != want {
			t.Fatalf("session s%d: %s (closed by %q) after the deadline, want %s", i, rec.State, rec.Closed, want)
		}
		if want == StateDropped && !strings.Contains(rec.Closed, ",build-failed") {
			t.Fatalf("session s%d closed by %q, want it to name the failed build", i, rec.Closed)
		}
	}
	looked := -1
	if err := s.do(ctx, func() (err error) { looked, err = s.applyDeadline(time.Now().Add(time.Hour)); return err }); err != nil {
		t.Fatal(err)
	}
	if looked != 0 {
		t.Fatalf("the next pass read %d committed sessions again, want 0", looked)
	}
}

// A session is created when its first call started, not when the writer
// stored it: its created time is never after its last call's.
func TestSessionCreatedAtFirstCall(t *testing.T) {
	s := openTest(t, t.TempDir(), testOptions())
	defer s.Close()
	v := newVocab()
	prompts, replies := toolSession()
	c := v.makeCall("call-0", "s-created", prompts[0], replies[0], 1)
	c.Start, c.End = time.Now().Add(-3*time.Second), time.Now().Add(-2*time.Second)
	s.Record(c)
	s.syncQueue(t)
	rec, _, err := s.GetSession(context.Background(), "s-created")
	if err != nil || rec == nil {
		t.Fatal(rec, err)
	}
	if !rec.Created.Equal(c.Start) || rec.LastCall.Before(rec.Created) {
		t.Fatalf("created %s, last call %s; want created at the call's start %s", rec.Created, rec.LastCall, c.Start)
	}
}

// An idle session with a reward whose experiences cannot be built is
// dropped on its own: the sessions closed in the same pass are not held
// back, nor is every later sweep.
func TestIdleCloseBuildFailure(t *testing.T) {
	ctx := context.Background()
	o := testOptions()
	o.Session.IdleTimeout = time.Minute
	s := openTest(t, t.TempDir(), o)
	defer s.Close()
	v := newVocab()
	prompts, replies := toolSession()
	for i := range 3 {
		c := v.makeCall(fmt.Sprintf("idle-call-%d", i), fmt.Sprintf("idle-%d", i), prompts[0], replies[0], 1)
		c.Hone.Reward = ptr(1)
		s.Record(c)
	}
	s.syncQueue(t)
	corruptCall(t, s, "idle-call-1")
	for range 2 { // the second sweep finds nothing left to do
		if err := s.Sweep(ctx, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []State{StateReady, StateDropped, StateReady} {
		rec := storedRecord(t, s, fmt.Sprintf("idle-%d", i))
		if rec.State != want || (want == StateDropped && rec.Closed != "idle,build-failed") {
			t.Fatalf("session idle-%d: %s (closed by %q) after its idle timeout, want %s", i, rec.State, rec.Closed, want)
		}
	}
}

// storedRecord reads session id's record as stored, without its calls
// (which GetSession decodes, and a test may have corrupted).
func storedRecord(t *testing.T, s *Store, id string) *Session {
	t.Helper()
	var rec *Session
	err := s.db.View(func(txn *badger.Txn) (err error) { rec, err = decodeSessionFrom(txn, id); return err })
	if err != nil || rec == nil {
		t.Fatalf("session %s: %v", id, err)
	}
	return rec
}

// corruptCall overwrites a stored call with bytes that do not decode.
func corruptCall(t *testing.T, s *Store, callID string) {
	t.Helper()
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(callKey(callID), []byte("\xffnot a call")) }); err != nil {
		t.Fatal(err)
	}
}
