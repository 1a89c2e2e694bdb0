package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fullExperience is the part of capture.Experience the end-to-end test checks.
type fullExperience struct {
	Cursor   uint64    `json:"cursor"`
	Session  string    `json:"session"`
	Task     string    `json:"task"`
	Tokens   []int32   `json:"tokens"`
	Mask     []uint8   `json:"loss_mask"`
	Logprobs []float32 `json:"logprobs"`
	Reward   float64   `json:"reward"`
	Steps    []struct {
		Start int `json:"start"`
		End   int `json:"end"`
	} `json:"steps"`
}

func allExperiences(t *testing.T, s *server) []fullExperience {
	t.Helper()
	resp, err := client.Get(s.control + "/v1/experiences?after=0&limit=1000")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out []fullExperience
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var e fullExperience
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("experience line: %v", err)
		}
		out = append(out, e)
	}
	return out
}

type chatReply struct {
	ID      string `json:"id"`
	Choices []struct {
		Message chatMsg `json:"message"`
	} `json:"choices"`
}

// chat sends one turn and returns the reply and the X-Hone-Session header.
func chat(t *testing.T, s *server, msgs []chatMsg, hdr map[string]string) (chatReply, string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"model": "stub", "messages": msgs})
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, s.data+"/v1/chat/completions", strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r chatReply
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&r) != nil || len(r.Choices) == 0 {
		t.Fatalf("chat: status %d", resp.StatusCode)
	}
	return r, resp.Header.Get("X-Hone-Session")
}

// threeTurns runs a 3-turn conversation; hdr returns the headers of turn i.
func threeTurns(t *testing.T, s *server, tag string, hdr func(i int) map[string]string) (msgs []chatMsg, replies []chatReply, sessions []string) {
	msgs = []chatMsg{{Role: "system", Content: "be brief"}, {Role: "user", Content: "first question " + tag}}
	for i := 0; i < 3; i++ {
		r, sid := chat(t, s, msgs, hdr(i))
		replies, sessions = append(replies, r), append(sessions, sid)
		if i < 2 {
			msgs = append(msgs, r.Choices[0].Message, chatMsg{Role: "user", Content: fmt.Sprintf("follow-up %d", i)})
		}
	}
	return msgs, replies, sessions
}

// checkTrajectory compares an experience with what the stub engine produced:
// the last prompt plus its completion, mask 1 exactly on the 3 completions.
func checkTrajectory(t *testing.T, e fullExperience, lastMsgs []chatMsg, replies []chatReply) {
	t.Helper()
	want := append(render(lastMsgs), append(textIDs(replies[2].Choices[0].Message.Content), 151645)...)
	if fmt.Sprint(e.Tokens) != fmt.Sprint(want) {
		t.Fatalf("tokens\n got %v\nwant %v", e.Tokens, want)
	}
	if len(e.Steps) != 3 {
		t.Fatalf("steps %d, want 3", len(e.Steps))
	}
	ones := 0
	for i, m := range e.Mask {
		ones += int(m)
		if m == 0 && e.Logprobs[i] != 0 {
			t.Fatalf("masked token %d has logprob %v", i, e.Logprobs[i])
		}
	}
	for k, st := range e.Steps {
		comp := append(textIDs(replies[k].Choices[0].Message.Content), 151645)
		if st.End-st.Start != len(comp) {
			t.Fatalf("step %d spans %d tokens, want %d", k, st.End-st.Start, len(comp))
		}
		for j := st.Start; j < st.End; j++ {
			wantLP := float32(-0.01 * float64(j-st.Start+1))
			if e.Mask[j] != 1 || e.Logprobs[j] != wantLP {
				t.Fatalf("step %d token %d: mask %d logprob %v, want 1 %v", k, j, e.Mask[j], e.Logprobs[j], wantLP)
			}
		}
		ones -= len(comp)
	}
	if ones != 0 {
		t.Fatalf("%d mask-1 tokens outside the completions", ones)
	}
}

// TestEndToEnd runs hone serve in front of the stub engine: a 3-turn
// session with X-Hone-Reward and X-Hone-Commit, and a header-less session
// rewarded through the Trinity-RFT /feedback and /commit shapes.
func TestEndToEnd(t *testing.T) {
	bin := buildHone(t)
	stub := newStub(t)
	data := t.TempDir()
	s, err := startServe(bin, data, stub.url)
	if err != nil {
		t.Fatalf("hone serve does not start: %v", err)
	}
	defer s.kill()

	msgs, replies, sids := threeTurns(t, s, "headers", func(i int) map[string]string {
		h := map[string]string{"X-Hone-Session": "e2e-1", "X-Hone-Task": "task-a"}
		if i == 2 {
			h["X-Hone-Reward"], h["X-Hone-Commit"] = "0.75", "1"
		}
		return h
	})
	if sids[0] != "e2e-1" {
		t.Fatalf("X-Hone-Session answered %q", sids[0])
	}
	inferredMsgs, inferredReplies, isids := threeTurns(t, s, "inferred", func(int) map[string]string { return nil })
	if isids[0] == "" || isids[1] != isids[0] || isids[2] != isids[0] {
		t.Fatalf("header-less turns got sessions %v, want one inferred session", isids)
	}
	var ids []string
	for _, r := range inferredReplies {
		if !strings.HasPrefix(r.ID, "chatcmpl-call-") { // named after hone's X-Request-Id: found without an index entry
			t.Fatalf("answer id %q, want chatcmpl-<hone's call id>", r.ID)
		}
		ids = append(ids, r.ID)
	}
	fb := map[string]any{"msg_ids": ids, "reward": 1.0, "task_id": 3, "run_id": 0}
	if st := postJSON(context.Background(), s.control+"/feedback", fb, nil, nil); st != 200 {
		t.Fatalf("trinity feedback: %d", st)
	}
	if st := postJSON(context.Background(), s.control+"/commit", nil, nil, nil); st != 200 {
		t.Fatalf("trinity commit: %d", st)
	}
	exps := waitExperiences(t, s, 2)
	byID := map[string]fullExperience{}
	for _, e := range exps {
		if _, dup := byID[e.Session]; dup {
			t.Fatalf("session %s queued twice", e.Session)
		}
		byID[e.Session] = e
	}
	e := byID["e2e-1"]
	if e.Reward != 0.75 || e.Task != "task-a" {
		t.Fatalf("header session experience: reward %v task %q", e.Reward, e.Task)
	}
	checkTrajectory(t, e, msgs, replies)
	ie := byID[isids[0]]
	if ie.Reward != 1 || ie.Task != "3" {
		t.Fatalf("trinity session experience: reward %v task %q", ie.Reward, ie.Task)
	}
	checkTrajectory(t, ie, inferredMsgs, inferredReplies)
	s.kill()
	checkCommands(t, bin, data, isids[0])
}

// checkCommands runs hone traces and hone export on the stopped server's
// data folder.
func checkCommands(t *testing.T, bin, data, inferred string) {
	t.Helper()
	run := func(args ...string) string {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("hone %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	ls := run("traces", "ls", "--data", data)
	if !strings.Contains(ls, "e2e-1") || !strings.Contains(ls, inferred) || strings.Count(ls, "ready") != 2 {
		t.Fatalf("traces ls:\n%s", ls)
	}
	show := run("traces", "show", "--data", data, "e2e-1")
	for _, want := range []string{"state ready", "reward 0.75", "policy v", "mean logprob", "follow-up 1", "tokens, finish stop"} {
		if !strings.Contains(show, want) {
			t.Fatalf("traces show lacks %q:\n%s", want, show)
		}
	}
	if stats := run("traces", "stats", "--data", data); !strings.Contains(stats, "ready 2") || !strings.Contains(stats, "calls: 6") {
		t.Fatalf("traces stats:\n%s", stats)
	}
	out := filepath.Join(t.TempDir(), "x.parquet")
	run("export", "--data", data, "--format", "parquet", "--out", out)
	if fi, err := os.Stat(out); err != nil || fi.Size() == 0 {
		t.Fatalf("parquet export: %v", err)
	}
	jsonl := run("export", "--data", data, "--kind", "trajectory", "--task", "task-a")
	if strings.Count(jsonl, `"kind":"trajectory"`) != 1 || !strings.Contains(jsonl, `"session":"e2e-1"`) {
		t.Fatalf("jsonl export by task:\n%.400s", jsonl)
	}
}

// waitExperiences polls until n experiences are queued (header commits are
// applied by the asynchronous writer).
func waitExperiences(t *testing.T, s *server, n int) []fullExperience {
	t.Helper()
	var exps []fullExperience
	for i := 0; i < 100; i++ {
		if exps = allExperiences(t, s); len(exps) >= n {
			return exps
		}
		sleep()
	}
	t.Fatalf("%d experiences queued, want %d", len(exps), n)
	return nil
}
