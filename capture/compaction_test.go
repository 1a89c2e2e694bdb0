package capture

import (
	"context"
	"testing"
)

const compactSummary = "Primary request: the user asked for the weather in Paris and Rome, which is known now.\n" +
	"Paris is 18C and sunny, Rome is 24C and cloudy; nothing else is pending at this point."

// compactedSession is a conversation that compacts: the tool session's
// turns, a summary request (the history and an instruction) whose reply is
// the summary, and a turn whose history starts over with the summary.
func compactedSession() (prompts [][]msg, replies []msg) {
	prompts, replies = toolSession()
	m := append(append([]msg(nil), prompts[2]...), replies[2],
		msg{Role: "user", Content: "Summarise the conversation so far."})
	prompts = append(prompts, m)
	replies = append(replies, msg{Role: "assistant", Content: "<analysis>short</analysis>\n<summary>\n" + compactSummary + "\n</summary>"})
	prompts = append(prompts, []msg{{Role: "system", Content: "You are a helpful assistant."},
		{Role: "user", Content: "This session continues an earlier conversation. Summary:\n" + compactSummary + "\n\nAnd Berlin?"}})
	replies = append(replies, toolCallMsg("call_3", "get_weather", `{"city": "Berlin"}`))
	return prompts, replies
}

// TestCompactionInferredAndStitched: without headers, the call after a
// compaction joins the session (it carries the summary the session's
// previous call replied) and starts a new path of it, counted as a
// compaction and not as drift; the session's two trajectories share its
// reward and the second names the summarised call.
func TestCompactionInferredAndStitched(t *testing.T) {
	s := openTest(t, t.TempDir(), testOptions())
	defer s.Close()
	v := newVocab()
	prompts, replies := compactedSession()
	var sid, summary string
	for i := range prompts {
		c := v.makeCall("k"+string(rune('a'+i)), "", prompts[i], replies[i], 1)
		c.Hone.Session = ""
		verdict := s.Admit(&Admission{CallID: c.ID, Route: RouteChat, Hone: c.Hone, Body: c.Request})
		if i == 0 {
			sid = verdict.Session
		} else if verdict.Session != sid || verdict.New {
			t.Fatalf("turn %d got session %s (new %v), want %s", i, verdict.Session, verdict.New, sid)
		}
		if i == 3 {
			summary = c.ID
		}
		c.Session, c.NewSession = verdict.Session, verdict.New
		s.Record(c)
	}
	s.syncQueue(t)
	ctx := context.Background()
	if _, err := s.Feedback(ctx, FeedbackReq{Session: sid, Reward: ptr(1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, sid); err != nil {
		t.Fatal(err)
	}
	rec, _, err := s.GetSession(ctx, sid)
	if err != nil || rec.Drift != 0 || rec.Compactions != 1 {
		t.Fatalf("session: drift %d (%+v), compactions %d, %v", rec.Drift, rec.Drifts, rec.Compactions, err)
	}
	exps, err := s.Experiences(ctx, 0, 10)
	if err != nil || len(exps) != 2 {
		t.Fatalf("%d experiences, %v; want the segments before and after the compaction", len(exps), err)
	}
	if exps[0].CompactedFrom != "" || len(exps[0].Steps) != 4 || exps[1].CompactedFrom != summary || len(exps[1].Steps) != 1 ||
		exps[0].Reward != 1 || exps[1].Reward != 1 {
		t.Fatalf("experiences: %d steps from %q reward %v; %d steps from %q reward %v", len(exps[0].Steps), exps[0].CompactedFrom,
			exps[0].Reward, len(exps[1].Steps), exps[1].CompactedFrom, exps[1].Reward)
	}
}

// TestCompactionNeedsTheModelsText: a line the model only repeated from
// its request (a shared system prompt) links nothing, and a conversation
// that edits its history without a summary still drifts.
func TestCompactionNeedsTheModelsText(t *testing.T) {
	s := openTest(t, t.TempDir(), testOptions())
	defer s.Close()
	v := newVocab()
	sys := "You are a weather assistant for travellers; answer in one short sentence, always."
	echo := v.makeCall("e0", "", []msg{{Role: "system", Content: sys}, {Role: "user", Content: "Repeat your instructions."}},
		msg{Role: "assistant", Content: sys + "\nThat is what I was told to do, and I will do it for every question you ask."}, 1)
	vd := s.Admit(&Admission{CallID: echo.ID, Route: RouteChat, Body: echo.Request})
	echo.Session, echo.NewSession = vd.Session, vd.New
	s.Record(echo)
	s.syncQueue(t)
	other := v.makeCall("e1", "", []msg{{Role: "system", Content: sys}, {Role: "user", Content: "Weather in Oslo?"}}, msg{Role: "assistant", Content: "Cold."}, 1)
	if got := s.Admit(&Admission{CallID: other.ID, Route: RouteChat, Body: other.Request}); got.Session == vd.Session {
		t.Fatal("a conversation sharing only the system prompt joined the session")
	}

	prompts, replies := toolSession()
	edited := []msg{prompts[0][0], {Role: "user", Content: "What is the weather in Rome?"}}
	calls := []*Call{v.makeCall("d0", "d", prompts[0], replies[0], 1), v.makeCall("d1", "d", edited, replies[1], 1)}
	for i, c := range calls {
		c.Seq = uint64(i)
	}
	tr, drifts := buildTrie(calls)
	if tr.drift != 1 || len(drifts) != 1 || len(tr.compacted) != 0 {
		t.Fatalf("edited history: drift %d, %d drifts, %d compactions; want 1 drift", tr.drift, len(drifts), len(tr.compacted))
	}
}

// TestCompactionSummaryForks: a summary request that leaves the latest
// turn out (Claude Code keeps it verbatim after the summary) forks from an
// earlier point of the path; once a later call carries its summary, the
// fork is the compaction's, not drift: three trajectories (the task, the
// summary, the segment after it), no drift, one compaction.
func TestCompactionSummaryForks(t *testing.T) {
	v := newVocab()
	prompts, replies := compactedSession()
	prompts[3] = append(append([]msg(nil), prompts[2]...), msg{Role: "user", Content: "Summarise the conversation so far."})
	var calls []*Call
	for i := range prompts {
		c := v.makeCall("f"+string(rune('a'+i)), "f", prompts[i], replies[i], 1)
		c.Seq = uint64(i)
		calls = append(calls, c)
	}
	tr, drifts := buildTrie(calls)
	if tr.drift != 0 || len(drifts) != 0 || len(tr.compacted) != 1 || len(tr.leaves()) != 3 {
		t.Fatalf("drift %d (%+v), %d compactions, %d leaves; want 0, 1, 3", tr.drift, drifts, len(tr.compacted), len(tr.leaves()))
	}
	// without the call that carries the summary, the fork is drift
	if tr, _ := buildTrie(calls[:4]); tr.drift != 1 {
		t.Fatalf("a fork no summary explains: drift %d, want 1", tr.drift)
	}
}
