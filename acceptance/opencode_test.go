package acceptance

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hone-rl/hone/proxy"
)

// TestOpencodeThroughHone runs opencode (opencode-ai, pinned in
// package-lock.json), unmodified, as `opencode run`, configured only by a
// provider in its config file (@ai-sdk/openai-compatible with hone's /v1 as
// baseURL and the key from an environment variable), through hone's chat
// completions to the scripted engine: reasoning, two bash tool calls (write
// a file, read it back), an answer. opencode must exit 0 having written the
// file; its run must be one session, one trajectory, drift 0, that a reward
// lands on. In continuity mode tokens with the session inferred, opencode's
// title call (the first prompt, no tools) is a session of its own; in
// observe mode the provider's headers name the session and --title spares
// the title call, so the session holds the run alone.
func TestOpencodeThroughHone(t *testing.T) {
	requireNode(t)
	bin := requirePackage(t, "opencode-ai", "opencode-ai", "bin", "opencode.exe")
	for _, tc := range []struct{ name, mode, session string }{
		{"tokens-inferred", proxy.ContinuityTokens, ""},
		{"observe-header", proxy.ContinuityObserve, "opencode-run-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng := newAgentEngine(t, writeReadScript("bash", "command"))
			h := startHoneMode(t, eng.url, tc.mode)
			work := t.TempDir()
			home := filepath.Join(work, ".home")
			provider := map[string]any{
				"npm": "@ai-sdk/openai-compatible", "name": "hone",
				"options": map[string]any{"baseURL": h.data + "/v1", "apiKey": "{env:HONE_API_KEY}"},
				"models":  map[string]any{"hone-agent": map[string]any{"name": "hone-agent", "tool_call": true, "reasoning": true}},
			}
			args := []string{"run", "--dir", work}
			if tc.session != "" {
				provider["options"].(map[string]any)["headers"] = map[string]string{"X-Hone-Session": tc.session}
				args = append(args, "--title", "write and read")
			}
			cfg, _ := json.Marshal(map[string]any{
				"$schema":    "https://opencode.ai/config.json",
				"provider":   map[string]any{"hone": provider},
				"model":      "hone/hone-agent",
				"permission": map[string]string{"bash": "allow", "edit": "allow"},
				"autoupdate": false, "share": "disabled",
			})
			if err := os.MkdirAll(home, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(home, "opencode.json"), cfg, 0o600); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, append(args, writeReadPrompt)...)
			cmd.Dir = work
			cmd.Env = append(os.Environ(), "PWD="+work, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
				"XDG_DATA_HOME="+filepath.Join(home, ".local", "share"), "XDG_CACHE_HOME="+filepath.Join(home, ".cache"),
				"XDG_STATE_HOME="+filepath.Join(home, ".local", "state"), "OPENCODE_CONFIG="+filepath.Join(home, "opencode.json"),
				"HONE_API_KEY=hone-test-key", "OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_AUTOUPDATE=1", "NO_COLOR=1")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("opencode run: %v\n%s", err, out)
			}
			t.Logf("opencode run output:\n%s", out)
			side := 1
			if tc.session != "" {
				side = 0
			}
			checkWriteRead(t, eng, h, work, string(out), runCheck{mode: tc.mode, tool: "bash", session: tc.session, side: side})
		})
	}
}
