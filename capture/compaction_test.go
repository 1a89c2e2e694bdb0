package capture

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
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

// TestCompactionQuotedLineAnySpelling: a line the model only repeated from
// its request links nothing whatever JSON spelling the agent's client used
// for it: Go's (<, > and & as \u003c...), JavaScript's and Rust's (as is),
// Python's json.dumps (non-ASCII as \uXXXX) and PHP's (that, and \/).
func TestCompactionQuotedLineAnySpelling(t *testing.T) {
	for _, sys := range []string{"Reply with <tool_call>{...}</tool_call> & nothing else — read /etc/hosts first, then stop.",
		"你是一个乐于助人的编程助手，请先阅读代码再回答用户的问题，并且只修改必要的部分。"} {
		testQuotedLine(t, sys)
	}
}

func testQuotedLine(t *testing.T, sys string) {
	for name, enc := range map[string]func(any) []byte{
		"go":     func(v any) []byte { b, _ := json.Marshal(v); return b },
		"js":     marshalNoHTML,
		"python": func(v any) []byte { return asciiOnly(marshalNoHTML(v), false) },
		"php":    func(v any) []byte { return asciiOnly(marshalNoHTML(v), true) },
	} {
		t.Run(name+"/"+sys[:6], func(t *testing.T) {
			s := openTest(t, t.TempDir(), testOptions())
			defer s.Close()
			v := newVocab()
			call := func(id string, user, reply string) (*Call, Verdict) {
				msgs := []msg{{Role: "system", Content: sys}, {Role: "user", Content: user}}
				c := v.makeCall(id, "", msgs, msg{Role: "assistant", Content: reply}, 1)
				c.Hone.Session = ""
				c.Request = enc(map[string]any{"model": "qwen", "messages": msgs})
				vd := s.Admit(&Admission{CallID: c.ID, Route: RouteChat, Body: c.Request})
				c.Session, c.NewSession = vd.Session, vd.New
				return c, vd
			}
			echo, first := call("q0", "Repeat your instructions.", sys+"\nThat is what I was told to do, and I will do it for every request.")
			s.Record(echo)
			s.syncQueue(t)
			if _, other := call("q1", "List the files.", "Done."); other.Session == first.Session {
				t.Fatalf("a conversation sharing only the system prompt (%s JSON) joined the session", name)
			}
		})
	}
}

// marshalNoHTML is JSON as JavaScript's JSON.stringify and Rust's serde
// write it: <, > and & as they are.
func marshalNoHTML(v any) []byte {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	_ = e.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// asciiOnly rewrites JSON as Python's json.dumps writes it by default
// (ensure_ascii: every non-ASCII character as \uXXXX, surrogate pairs
// beyond the BMP), and with slashes PHP's json_encode as well (\/).
func asciiOnly(b []byte, slashes bool) []byte {
	var out []byte
	for _, r := range string(b) {
		switch {
		case r > 0x7e:
			for _, u := range utf16.Encode([]rune{r}) {
				out = fmt.Appendf(out, `\u%04x`, u)
			}
		case slashes && r == '/':
			out = append(out, `\/`...)
		default:
			out = utf8.AppendRune(out, r)
		}
	}
	return out
}

// FuzzCarries: a request carries a line of its own messages whatever JSON
// spelling its client used, and never a line none of its strings holds.
func FuzzCarries(f *testing.F) {
	for _, s := range []string{"plain text line", `<a href="/x">&amp;</a>`, "em — dash, ü, 😀", `back\slash "quoted" /`, "tab\there"} {
		f.Add(s, "other")
	}
	// Past containsRun's probe: a line it finds whole, and one whose probe
	// is there and whose rest is not.
	long := "When you edit the main file, run the tests and read their output before you answer"
	f.Add(long, long[:40]+" and then something else entirely")
	f.Fuzz(func(t *testing.T, line, other string) {
		if !utf8.ValidString(line) || !utf8.ValidString(other) || strings.ContainsAny(line+other, "\n\r") {
			return
		}
		body := map[string]any{"messages": []map[string]string{{"role": "system", "content": "head\n" + line + "\ntail"}}}
		goJSON, _ := json.Marshal(body)
		for name, b := range map[string][]byte{"go": goJSON, "js": marshalNoHTML(body), "python": asciiOnly(marshalNoHTML(body), false),
			"php": asciiOnly(marshalNoHTML(body), true)} {
			var strs []string
			if !carries(b, line, &strs) {
				t.Fatalf("%s JSON %s does not carry %q", name, b, line)
			}
		}
		var strs []string
		if b := goJSON; !strings.Contains(string(b), other) && !strings.Contains("head\n"+line+"\ntail\nsystem\ncontent\nrole\nmessages", other) &&
			carries(b, other, &strs) {
			t.Fatalf("%s carries %q, which none of its strings holds", b, other)
		}
	})
}
