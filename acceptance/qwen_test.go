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

// TestQwenCodeThroughHone runs Qwen Code (@qwen-code/qwen-code, pinned in
// package-lock.json), unmodified and headless (a positional prompt, --yolo),
// configured only by OPENAI_BASE_URL (hone's /v1), OPENAI_API_KEY and
// OPENAI_MODEL with the openai auth type, through hone's chat completions
// to the scripted engine: reasoning, two run_shell_command calls (write a
// file, read it back), an answer. Qwen Code must exit 0 having written the
// file; its run must be one session, one trajectory, drift 0, that a reward
// lands on; in continuity mode tokens with the session inferred, and in
// observe mode with the session named by an X-Hone-Session header.
func TestQwenCodeThroughHone(t *testing.T) {
	node := requireNode(t)
	cli, _ := filepath.Abs(filepath.Join("node_modules", "@qwen-code", "qwen-code", "cli.js"))
	if _, err := os.Stat(cli); err != nil {
		if os.Getenv("HONE_REQUIRE_NODE") == "1" {
			t.Fatalf("acceptance/node_modules has no @qwen-code/qwen-code; run make deps: %v", err)
		}
		t.Skipf("acceptance/node_modules has no @qwen-code/qwen-code; run make deps: %v", err)
	}
	for _, tc := range []struct{ name, mode, session string }{
		{"tokens-inferred", proxy.ContinuityTokens, ""},
		{"observe-header", proxy.ContinuityObserve, "qwen-run-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng := newAgentEngine(t, writeReadScript("run_shell_command", "command"))
			h := startHoneMode(t, eng.url, tc.mode)
			work := t.TempDir()
			home := filepath.Join(work, ".home")
			if err := os.MkdirAll(home, 0o700); err != nil {
				t.Fatal(err)
			}
			if tc.session != "" { // settings.json: headers on every model request
				settings := `{"model":{"generationConfig":{"customHeaders":{"X-Hone-Session":"` + tc.session + `"}}}}`
				if err := os.MkdirAll(filepath.Join(home, ".qwen"), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(home, ".qwen", "settings.json"), []byte(settings), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, cli, "--auth-type", "openai", "--yolo", writeReadPrompt)
			cmd.Dir = work
			cmd.Env = append(os.Environ(), "PWD="+work, "HOME="+home, "OPENAI_BASE_URL="+h.data+"/v1",
				"OPENAI_API_KEY=hone-test-key", "OPENAI_MODEL=hone-agent", "NO_COLOR=1")
			out, err := cmd.CombinedOutput()
			for i, v := range eng.seen() {
				t.Logf("engine call %d %s: tools %v, results %q, users %.200q", i, v.Path, v.Tools, v.Results, v.Users)
			}
			if err != nil {
				t.Fatalf("qwen: %v\n%s", err, out)
			}
			t.Logf("qwen output:\n%s", out)
			checkWriteRead(t, eng, h, work, string(out), runCheck{mode: tc.mode, tool: "run_shell_command", session: tc.session})
		})
	}
}
