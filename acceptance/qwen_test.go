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
// to the scripted engine: reasoning, a run_shell_command call that writes
// a file, a read_file call that reads it back, an answer. Qwen Code must exit 0 having written the
// file; its run must be one session, one trajectory, drift 0, that a reward
// lands on; in continuity mode tokens with the session inferred, and in
// observe mode with the session named by an X-Hone-Session header.
func TestQwenCodeThroughHone(t *testing.T) {
	node := requireNode(t)
	cli := requirePackage(t, "@qwen-code/qwen-code", "@qwen-code", "qwen-code", "cli.js")
	for _, tc := range []struct{ name, mode, session string }{
		{"tokens-inferred", proxy.ContinuityTokens, ""},
		{"observe-header", proxy.ContinuityObserve, "qwen-run-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			work := t.TempDir()
			eng := newAgentEngine(t, qwenScript(filepath.Join(work, "hone.txt")))
			h := startHoneMode(t, eng.url, tc.mode)
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

// qwenScript is writeReadScript with the read-back through Qwen Code's
// read_file tool: its run_shell_command now and then returns "Output:
// (empty)" for a command that printed (`cat` of a file without a final
// newline, under load: the output collection races the process's exit, a
// known class of bug in the CLIs' shell tools, e.g. QwenLM/qwen-code#3520).
func qwenScript(file string) func(engineView) turn {
	write := writeReadScript("run_shell_command", "command")
	return func(v engineView) turn {
		if v.hasTool("run_shell_command") && len(v.Results) == 1 {
			return turn{tool: "read_file", args: map[string]any{"file_path": file}}
		}
		return write(v)
	}
}
