package acceptance

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/proxy"
)

// TestClaudeCodeThroughHone runs Claude Code (@anthropic-ai/claude-code,
// pinned in package-lock.json), unmodified, in print mode (-p), configured
// only by ANTHROPIC_BASE_URL (hone), ANTHROPIC_API_KEY and the model names
// (ANTHROPIC_MODEL, ANTHROPIC_DEFAULT_HAIKU_MODEL), through hone's Messages
// API to the scripted engine, which answers with reasoning and two Bash
// tool calls (write a file, read it back) and then a final message. Claude
// Code must exit 0 having written the file and printed the answer; the
// engine must have seen the file's contents in the last tool result; the
// capture store must hold the run as one session and one trajectory, drift
// 0, that a reward lands on. It runs in continuity mode tokens with the
// session inferred (no header), and in observe mode with the session named
// by an X-Hone-Session header that ANTHROPIC_CUSTOM_HEADERS adds.
func TestClaudeCodeThroughHone(t *testing.T) {
	bin := claudeBin(t)
	for _, tc := range []struct{ name, mode, session string }{
		{"tokens-inferred", proxy.ContinuityTokens, ""},
		{"observe-header", proxy.ContinuityObserve, "claude-run-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng := newAgentEngine(t, writeReadScript("Bash", "command"))
			h := startHoneMode(t, eng.url, tc.mode)
			work := t.TempDir()
			out := runClaude(t, bin, h.data, work, tc.session, writeReadPrompt)
			checkWriteRead(t, eng, h, work, out, runCheck{mode: tc.mode, tool: "Bash", session: tc.session})
		})
	}
}

// claudeBin is Claude Code's native binary from acceptance/node_modules
// (the npm package's postinstall puts the platform's build there).
func claudeBin(t *testing.T) string {
	t.Helper()
	requireNode(t)
	return requirePackage(t, "@anthropic-ai/claude-code", "@anthropic-ai", "claude-code", "bin", "claude.exe")
}

// runClaude runs claude -p prompt in work against hone at base, with its
// configuration in a fresh home; session, when set, names hone's session
// through ANTHROPIC_CUSTOM_HEADERS. Extra arguments go before the prompt.
func runClaude(t *testing.T, bin, base, work, session, prompt string, extra ...string) string {
	t.Helper()
	home := filepath.Join(work, ".home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Bash and Read allowed up front: --dangerously-skip-permissions is refused to root
	args := append([]string{"-p", "--allowedTools", "Bash,Read"}, extra...)
	cmd := exec.CommandContext(ctx, bin, append(args, "--", prompt)...)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "HOME="+home, "CLAUDE_CONFIG_DIR="+filepath.Join(home, ".claude"),
		"ANTHROPIC_BASE_URL="+base, "ANTHROPIC_API_KEY=hone-test-key",
		"ANTHROPIC_MODEL=hone-agent", "ANTHROPIC_DEFAULT_HAIKU_MODEL=hone-agent",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "NO_COLOR=1")
	if session != "" {
		cmd.Env = append(cmd.Env, "ANTHROPIC_CUSTOM_HEADERS=X-Hone-Session: "+session+"\nX-Hone-Task: write-and-read")
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("claude -p: %v\n%s", err, out)
	}
	t.Logf("claude -p output:\n%s", out)
	return string(out)
}

// TestClaudeCodeCompaction: Claude Code compacts its conversation through
// hone and goes on. A task (two Bash calls, an answer), then `/compact`
// in the same session (--continue: Claude Code asks the model for a summary
// of the history, one call that extends it), then another prompt in the
// same session, whose history Claude Code starts over with the summary
// (one Bash call, an answer). hone must keep the six calls in one session
// (inferred in tokens mode; named by a header in observe mode) with no
// drift and one compaction: three trajectories (the task; the summary,
// which forks before the task's answer, as Claude Code keeps the latest
// turns verbatim after the summary; the segment after the compaction,
// which names the summary call), all rewarded.
func TestClaudeCodeCompaction(t *testing.T) {
	bin := claudeBin(t)
	for _, tc := range []struct{ name, mode, session string }{
		{"tokens-inferred", proxy.ContinuityTokens, ""},
		{"observe-header", proxy.ContinuityObserve, "claude-compact-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := writeReadScript("Bash", "command")
			eng := newAgentEngine(t, func(v engineView) turn {
				n := len(v.Users)
				switch {
				case n > 0 && strings.Contains(v.Users[n-1], "Your task is to create a detailed summary"):
					return turn{content: "<analysis>\nThe user wanted a file written and read back.\n</analysis>\n<summary>\n" + claudeSummary + "\n</summary>"}
				case n > 0 && strings.HasPrefix(v.Users[0], "This session is being continued"):
					if len(v.Results) == 0 {
						return turn{tool: "Bash", args: map[string]any{"command": "cat hone.txt", "description": "Read hone.txt"}}
					}
					return turn{content: "hone.txt still holds: hello from hone"}
				}
				return task(v)
			})
			h := startHoneMode(t, eng.url, tc.mode)
			work := t.TempDir()
			runClaude(t, bin, h.data, work, tc.session, writeReadPrompt)
			runClaude(t, bin, h.data, work, tc.session, "/compact", "--continue")
			out := runClaude(t, bin, h.data, work, tc.session, "Read hone.txt again.", "--continue")
			if !strings.Contains(out, "hone.txt still holds: hello from hone") {
				t.Errorf("claude did not print the answer after the compaction")
			}
			seen := eng.seen()
			if len(seen) != 6 || !strings.Contains(seen[5].Users[0], claudeSummary) {
				for i, v := range seen {
					t.Logf("engine call %d: results %q, users %.300q", i, v.Results, v.Users)
				}
				t.Fatalf("the engine got %d requests, want 6 (3 for the task, the summary, 2 after it, which carry the summary)", len(seen))
			}
			sessions := sessionsOf(t, h.store, func(ss []*capture.Session) bool { return len(ss) == 1 && ss[0].Calls == 6 })
			if len(sessions) != 1 || sessions[0].Calls != 6 {
				for _, s := range sessions {
					t.Logf("session %s: %d calls", s.ID, s.Calls)
				}
				t.Fatalf("%d sessions captured, want one session of 6 calls across the compaction", len(sessions))
			}
			id := sessions[0].ID
			if tc.session != "" && id != tc.session {
				t.Errorf("session %s, want %s", id, tc.session)
			}
			feedback(t, h.control, id, 1)
			var exps []capture.Experience
			deadline := time.Now().Add(10 * time.Second)
			for len(exps) < 3 && time.Now().Before(deadline) {
				all, err := h.store.Experiences(context.Background(), 0, 100)
				if err != nil {
					t.Fatal(err)
				}
				exps = exps[:0]
				for _, e := range all {
					if e.Session == id {
						exps = append(exps, e)
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
			// Claude Code's summary request leaves the task's last answer out
			// (it keeps it verbatim after the summary): the summary forks from
			// the path before that answer.
			if len(exps) != 3 || len(exps[0].Steps) != 3 || len(exps[1].Steps) != 3 || len(exps[2].Steps) != 2 ||
				exps[0].CompactedFrom != "" || exps[1].CompactedFrom != "" || exps[2].CompactedFrom != exps[1].Steps[2].Call ||
				exps[0].Reward != 1 || exps[1].Reward != 1 || exps[2].Reward != 1 {
				for _, e := range exps {
					t.Logf("experience: %d steps, compacted from %q, reward %v", len(e.Steps), e.CompactedFrom, e.Reward)
				}
				t.Fatalf("%d experiences; want the task (3 steps), its summary forking before the answer (3 steps) and the "+
					"segment after the compaction (2 steps, compacted from the summary call), all rewarded", len(exps))
			}
			for _, e := range exps {
				checkExperience(t, e)
			}
			if s, _, err := h.store.GetSession(context.Background(), id); err != nil || s.Drift != 0 || s.Compactions != 1 {
				t.Fatalf("session %s: drift %d (%+v), compactions %d, %v", id, s.Drift, s.Drifts, s.Compactions, err)
			}
		})
	}
}

const claudeSummary = "1. Primary Request and Intent: the user asked to write 'hello from hone' into hone.txt " +
	"with a shell command and to read it back; both are done and the file holds the text.\n" +
	"2. Pending Tasks: none; the next request may ask about the file again."
