package acceptance

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

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
