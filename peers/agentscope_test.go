package peers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/proxy"
)

// agentScopeResult is what scripts/peers/agentscope_agent.py reports.
type agentScopeResult struct {
	Reply     string           `json:"reply"`
	ToolCalls []map[string]any `json:"tool_calls"`
	Reward    float64          `json:"reward"`
	Feedback  int              `json:"feedback_status"`
	Commit    int              `json:"commit_status"`
}

// TestAgentScopePython runs AgentScope's ReAct agent (Python, 2.x `Agent`)
// with its OpenAIChatModel on hone in front of vLLM, hone's session and
// task headers as the OpenAI client's default headers, one tool, and the
// reward from a judge function posted after the agent replied (AgentScope's
// tuner recipe). The tool must have run on the model's call, and the session
// must become a ready experience with the task, the judged reward and every
// call of the agent on its trajectories.
func TestAgentScopePython(t *testing.T) {
	v := needVLLM(t)
	py := needPython(t)
	tokDir := needTokenizer(t)
	h := startHoneStack(t, v.URL, nil)
	tap := newWireTap(t, h.data)
	const session, task = "agentscope-py-1", "agentscope-py-task"
	var res agentScopeResult
	runPeerScript(t, py, "agentscope_agent.py", 5*time.Minute, &res,
		"--base-url", tap.url+"/v1", "--control", h.control, "--model", v.Model,
		"--session", session, "--task", task, "--stream", "--tokenizer", tokDir)
	if len(res.ToolCalls) != 1 {
		t.Fatalf("the agent's tool ran %d times, want once (the forced first step): %+v", len(res.ToolCalls), res)
	}
	if res.Feedback != 200 || res.Commit != 200 {
		t.Fatalf("feedback %d, commit %d", res.Feedback, res.Commit)
	}
	wire := tap.String()
	for _, hdr := range [][2]string{{"X-Hone-Session", session}, {"X-Hone-Task", task}} {
		if sp := onWire(wire, hdr[0], hdr[1]); len(sp) < 2 {
			t.Errorf("%s: %s on the wire %d times, want every call's (at least 2)", hdr[0], hdr[1], len(sp))
		} else {
			t.Logf("on the wire as %q", sp[0])
		}
	}
	sv := h.session(t, session)
	if sv.State != capture.StateReady || sv.Task != task || sv.Reward != res.Reward || sv.Calls < 2 {
		t.Fatalf("session %s: state %s, task %q, reward %v (judged %v), %d calls (want the tool call and the answer)",
			session, sv.State, sv.Task, sv.Reward, res.Reward, sv.Calls)
	}
	exps := h.experiences(t, func(all []capture.Experience) bool {
		return len(stepCalls(ofSession(all, session))) == sv.Calls
	})
	for _, e := range ofSession(exps, session) {
		checkTrajectory(t, e)
		if e.Task != task || e.Reward != res.Reward {
			t.Errorf("experience: task %q reward %v, want %q %v", e.Task, e.Reward, task, res.Reward)
		}
		if !strings.Contains(string(e.Tools), `"add"`) {
			t.Errorf("experience tools %s lack the agent's tool", e.Tools)
		}
	}
	t.Logf("agent reply %q, tool calls %v, reward %v, %d calls, drift %d", res.Reply, res.ToolCalls, res.Reward, sv.Calls, sv.Drift)
}

// trinityResult is what peers/java's TrinityRun reports.
type trinityResult struct {
	Task string `json:"task"`
	Runs []struct {
		Run    string   `json:"run"`
		MsgIDs []string `json:"msg_ids"`
		Reward float64  `json:"reward"`
	} `json:"runs"`
	Reply string `json:"reply"`
}

// needJava returns the paths of java and mvn, skipping (failing under
// HONE_REQUIRE_PEERS=1) without them.
func needJava(t *testing.T) (java, mvn string) {
	t.Helper()
	java, err1 := exec.LookPath("java")
	mvn, err2 := exec.LookPath("mvn")
	if err := errors.Join(err1, err2); err != nil {
		msg := "AgentScope-Java needs Java 17 and Maven (apt-get install openjdk-17-jdk-headless maven): " + err.Error()
		if Required() && !testing.Short() {
			t.Fatal("HONE_REQUIRE_PEERS=1: " + msg)
		}
		t.Skip(msg)
	}
	return java, mvn
}

// buildTrinityRun compiles peers/java into a temporary folder and returns
// the class path to run it with: offline from ~/.m2 first, then (the first
// build on a machine) online from Maven Central.
func buildTrinityRun(t *testing.T, mvn string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	target := t.TempDir()
	cpFile := filepath.Join(target, "classpath.txt")
	build := func(offline bool) ([]byte, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		args := []string{"-B", "-q", "-Dhone.target=" + target, "compile", "dependency:build-classpath", "-Dmdep.outputFile=" + cpFile}
		if offline {
			args = append([]string{"-o"}, args...)
		}
		cmd := exec.CommandContext(ctx, mvn, args...)
		cmd.Dir = filepath.Join(root, "peers", "java")
		return cmd.CombinedOutput()
	}
	start := time.Now()
	if out, err := build(true); err != nil {
		t.Logf("offline Maven build failed (%v), building online:\n%s", err, tailString(string(out), 10))
		if out, err := build(false); err != nil {
			t.Fatalf("mvn: %v\n%s", err, tailString(string(out), 40))
		}
	}
	cp, err := os.ReadFile(cpFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("peers/java built in %s", time.Since(start).Round(100*time.Millisecond))
	return filepath.Join(target, "classes") + string(os.PathListSeparator) + strings.TrimSpace(string(cp))
}

// TestAgentScopeJavaTrainingRunner runs AgentScope-Java's TrainingRunner
// (io.agentscope:agentscope-extensions-training from Maven Central) with
// hone as its Trinity endpoint, hone's data plane in
// proxy.data_plane_feedback: loopback (the runner sends /feedback and
// /commit to the base URL of its model, with no credential). A production
// ReActAgent answers through vLLM; the runner's shadow runs go through hone
// with api key "dummy" and no hone headers, then post
// {"msg_ids","reward","task_id","run_id"} to /feedback, and stopping the
// runner posts /commit with every field null. Each run must become one
// ready session holding exactly its msg_ids' calls, with the runner's task
// id, run id and that run's reward, and its experiences must carry them.
func TestAgentScopeJavaTrainingRunner(t *testing.T) {
	v := needVLLM(t)
	java, mvn := needJava(t)
	cp := buildTrinityRun(t, mvn)
	h := startHoneStack(t, v.URL, func(o *proxy.Options) { o.DataPlaneFeedback = proxy.FeedbackLoopback })

	const runs = 2
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, java, "-cp", cp, "io.hone.peers.TrinityRun", h.data, v.URL+"/v1", v.Model, strconv.Itoa(runs))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("TrinityRun: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), tailString(stderr.String(), 60))
	}
	t.Logf("TrinityRun ran in %s", time.Since(start).Round(100*time.Millisecond))
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var res trinityResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("TrinityRun output: %v\n%s\nstderr:\n%s", err, stdout.String(), tailString(stderr.String(), 40))
	}
	if res.Task == "" || len(res.Runs) != runs {
		t.Fatalf("TrinityRun: task %q, %d runs, want %d:\n%s\nstderr:\n%s", res.Task, len(res.Runs), runs, stdout.String(), tailString(stderr.String(), 40))
	}

	exps := h.experiences(t, func(all []capture.Experience) bool {
		sessions := map[string]bool{}
		for _, e := range all {
			sessions[e.Session] = true
		}
		return len(sessions) >= runs
	})
	bySession := map[string][]capture.Experience{}
	for _, e := range exps {
		bySession[e.Session] = append(bySession[e.Session], e)
	}
	// The session of each msg_id, from the response ids hone recorded.
	sessionOf := map[string]string{}
	views := map[string]capture.SessionView{}
	for id := range bySession {
		sv := h.session(t, id)
		views[id] = sv
		for _, c := range sv.CallViews {
			sessionOf[c.ResponseID] = id
		}
	}
	seen := map[string]bool{}
	for _, run := range res.Runs {
		if len(run.MsgIDs) == 0 {
			t.Fatalf("run %s: no msg_ids", run.Run)
		}
		id := sessionOf[run.MsgIDs[0]]
		if id == "" {
			t.Fatalf("run %s: msg_id %s is in no ready session", run.Run, run.MsgIDs[0])
		}
		if seen[id] {
			t.Errorf("run %s shares session %s with another run", run.Run, id)
		}
		seen[id] = true
		for _, m := range run.MsgIDs {
			if sessionOf[m] != id {
				t.Errorf("run %s: msg_id %s in session %q, the run's first in %q", run.Run, m, sessionOf[m], id)
			}
		}
		sv := views[id]
		if sv.State != capture.StateReady || sv.Task != res.Task || sv.RunID != run.Run || sv.Reward != run.Reward {
			t.Errorf("run %s: session %s state %s, task %q run %q reward %v; want task %q reward %v",
				run.Run, id, sv.State, sv.Task, sv.RunID, sv.Reward, res.Task, run.Reward)
		}
		var responses []string
		for _, c := range sv.CallViews {
			responses = append(responses, c.ResponseID)
		}
		if !slices.Equal(responses, run.MsgIDs) {
			t.Errorf("run %s: session %s holds responses %v, the run's msg_ids are %v", run.Run, id, responses, run.MsgIDs)
		}
		if got := stepCalls(bySession[id]); len(got) != sv.Calls {
			t.Errorf("run %s: %d of the session's %d calls on its trajectories", run.Run, len(got), sv.Calls)
		}
		for _, e := range bySession[id] {
			checkTrajectory(t, e)
			if e.Task != res.Task || e.Reward != run.Reward {
				t.Errorf("run %s: experience task %q reward %v", run.Run, e.Task, e.Reward)
			}
		}
		t.Logf("run %s: session %s, %d calls, reward %v, closed by %s", run.Run, id, sv.Calls, sv.Reward, sv.Closed)
	}
}
