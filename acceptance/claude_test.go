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
			eng := newAgentEngine(t, claudeScript)
			h := startHoneMode(t, eng.url, tc.mode)
			work := t.TempDir()
			out := runClaude(t, bin, h.data, work, tc.session, "Write 'hello from hone' into hone.txt with a shell command, then read it back.")
			if b, err := os.ReadFile(filepath.Join(work, "hone.txt")); err != nil || strings.TrimSpace(string(b)) != "hello from hone" {
				t.Fatalf("hone.txt: %q, %v", b, err)
			}
			if !strings.Contains(out, claudeFinal) {
				t.Errorf("claude did not print the final message %q", claudeFinal)
			}
			seen := eng.seen()
			if len(seen) != 3 {
				t.Fatalf("the engine got %d requests, want 3 (a call per tool result, then the answer)", len(seen))
			}
			for i, v := range seen {
				if want := map[string]string{proxy.ContinuityTokens: "/v1/completions", proxy.ContinuityObserve: "/v1/chat/completions"}[tc.mode]; v.Path != want {
					t.Errorf("request %d went to %s, want %s", i, v.Path, want)
				}
				if !v.hasTool("Bash") || !v.hasTool("Read") {
					t.Errorf("request %d: engine tools %v", i, v.Tools)
				}
			}
			if r := seen[2].Results; len(r) != 2 || !strings.Contains(r[1], "hello from hone") {
				t.Errorf("tool results %q, want the file's contents last", r)
			}
			sessions := sessionsOf(t, h.store, func(ss []*capture.Session) bool { return len(ss) == 1 && ss[0].Calls == 3 })
			if len(sessions) != 1 || sessions[0].Calls != 3 {
				for _, s := range sessions {
					t.Logf("session %s: %d calls", s.ID, s.Calls)
				}
				t.Fatalf("%d sessions captured, want Claude Code's run as one session of 3 calls", len(sessions))
			}
			if tc.session != "" && sessions[0].ID != tc.session {
				t.Errorf("session %s, want %s (ANTHROPIC_CUSTOM_HEADERS)", sessions[0].ID, tc.session)
			}
			checkOneTrajectory(t, h, sessions[0].ID, 3)
		})
	}
}

const claudeFinal = "hone.txt holds: hello from hone"

// claudeScript: write the file with Bash, read it back with Bash, say what
// it holds; a request without tools (a side call) gets a short text.
func claudeScript(v engineView) turn {
	if !v.hasTool("Bash") {
		return turn{content: "Hone file"}
	}
	switch len(v.Results) {
	case 0:
		return turn{reasoning: "I will write the file with a shell command.", tool: "Bash",
			args: map[string]any{"command": "printf 'hello from hone' > hone.txt", "description": "Write hone.txt"}}
	case 1:
		return turn{tool: "Bash", args: map[string]any{"command": "cat hone.txt", "description": "Read hone.txt"}}
	}
	return turn{content: claudeFinal}
}

// claudeBin is Claude Code's native binary from acceptance/node_modules
// (the npm package's postinstall puts the platform's build there).
func claudeBin(t *testing.T) string {
	t.Helper()
	requireNode(t)
	bin, _ := filepath.Abs(filepath.Join("node_modules", "@anthropic-ai", "claude-code", "bin", "claude.exe"))
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("HONE_REQUIRE_NODE") == "1" {
			t.Fatalf("acceptance/node_modules has no @anthropic-ai/claude-code; run make deps: %v", err)
		}
		t.Skipf("acceptance/node_modules has no @anthropic-ai/claude-code; run make deps: %v", err)
	}
	return bin
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
