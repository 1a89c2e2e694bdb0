package acceptance

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/proxy"
)

// TestCodexThroughHone runs the Codex CLI (@openai/codex, pinned in
// package-lock.json), unmodified, in exec mode, configured only by a
// model provider whose base URL is hone's /v1 (wire_api "responses") and
// whose key comes from an environment variable, through hone to a scripted
// engine speaking vLLM's chat completions (token ids and logprobs). Codex
// sends its function tools, a namespace tool and hosted tools; the engine
// answers with reasoning and two shell tool calls (write a file, read it
// back) and then a final message. Codex must exit 0 having written the
// file; the engine must have seen the namespace flattened, no hosted tool,
// and the file's contents in the tool result; the capture store must hold
// the whole run as one session and one trajectory, with no drift, that a
// reward on the control plane lands on. It runs twice: under a model name
// Codex does not know (its fallback tools: namespace tools up front) and
// under an OpenAI model name (Codex's apply_patch is then a custom
// free-form tool, which the engine calls to write the file).
func TestCodexThroughHone(t *testing.T) {
	node := requireNode(t)
	launcher := requirePackage(t, "@openai/codex", "@openai", "codex", "bin", "codex.js")
	for _, tc := range []struct {
		name, model, tool, mode string
		calls                   int
	}{
		{"unknown-model", "hone-agent", "multi_agent_v1__spawn_agent", proxy.ContinuityObserve, 3},
		{"openai-model", "gpt-5.5", "apply_patch", proxy.ContinuityObserve, 4},
		// tokens mode: hone renders each turn and sends the engine token ids
		// (the session inferred: Codex sends no hone header)
		{"openai-model-tokens", "gpt-5.5", "apply_patch", proxy.ContinuityTokens, 4},
	} {
		t.Run(tc.name, func(t *testing.T) { runCodex(t, node, launcher, tc.model, tc.tool, tc.mode, tc.calls) })
	}
}

// runCodex runs one Codex exec session through hone under model, whose
// tools the engine must be offered, among them tool (a flat name); the
// engine must get calls requests.
func runCodex(t *testing.T, node, launcher, model, tool, mode string, calls int) {
	eng := newAgentEngine(t, codexScript)
	h := startHoneMode(t, eng.url, mode)
	base := h.data

	home, work := t.TempDir(), t.TempDir()
	writeCodexConfig(t, home, model, base, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, launcher, "exec", "--skip-git-repo-check", "-C", work,
		"Write 'hello from hone' into hone.txt, then read it back.")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "CODEX_HOME="+home, "HONE_API_KEY=hone-test-key", "NO_COLOR=1", "RUST_LOG=warn")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("codex exec: %v\n%s", err, out)
	}
	t.Logf("codex exec output:\n%s", out)
	if b, err := os.ReadFile(filepath.Join(work, "hone.txt")); err != nil || strings.TrimSpace(string(b)) != "hello from hone" {
		t.Fatalf("hone.txt: %q, %v", b, err)
	}
	if !strings.Contains(string(out), codexFinal) {
		t.Errorf("codex did not print the final message %q", codexFinal)
	}

	views := eng.seen()
	if len(views) != calls {
		t.Fatalf("the engine got %d requests, want %d (a call per tool result, then the answer)", len(views), calls)
	}
	for i, v := range views {
		if !v.hasTool("exec_command") || !v.hasTool(tool) || v.hasTool("web_search") || strings.Contains(v.Text, `"namespace"`) {
			t.Errorf("request %d (%s): engine tools %v", i, v.Path, v.Tools)
		}
		if want := map[string]string{proxy.ContinuityObserve: "/v1/chat/completions", proxy.ContinuityTokens: "/v1/completions"}[mode]; v.Path != want {
			t.Errorf("request %d went to %s, want %s in %s mode", i, v.Path, want, mode)
		}
	}
	if calls == 4 { // the tools tool_search loaded, told in its result
		if r := views[1].Results; len(r) == 0 || !strings.Contains(r[len(r)-1], "spawn_agent") {
			t.Errorf("tool_search result %q", r)
		}
	}
	if r := views[len(views)-1].Results; len(r) == 0 || !strings.Contains(r[len(r)-1], "hello from hone") {
		t.Errorf("last tool result %q, want the file's contents", r)
	}

	sessions := sessionsOf(t, h.store, func(ss []*capture.Session) bool { return len(ss) == 1 && ss[0].Calls == calls })
	if len(sessions) != 1 || sessions[0].Calls != calls {
		for _, s := range sessions {
			t.Logf("session %s: %d calls", s.ID, s.Calls)
		}
		t.Fatalf("%d sessions captured, want Codex's run as one session of %d calls", len(sessions), calls)
	}
	checkOneTrajectory(t, h, sessions[0].ID, calls)
}

const codexFinal = "hone.txt holds: hello from hone"

// script answers by the number of tool results so far: search the deferred
// tools when Codex offers tool_search, write the file (with apply_patch
// when offered, else a shell command), read it back, then say what it holds.
func codexScript(v engineView) turn {
	results := len(v.Results)
	if v.hasTool("tool_search") { // first look for the sub-agent tools
		if results == 0 {
			return turn{tool: "tool_search", args: map[string]any{"query": "spawn agent"}}
		}
		results--
	}
	switch results {
	case 0:
		if v.hasTool("apply_patch") {
			return turn{reasoning: "I will add the file with apply_patch.", tool: "apply_patch",
				args: map[string]any{"input": "*** Begin Patch\n*** Add File: hone.txt\n+hello from hone\n*** End Patch\n"}}
		}
		return turn{reasoning: "I will write the file with a shell command.", tool: "exec_command",
			args: map[string]any{"cmd": "printf 'hello from hone' > hone.txt"}}
	case 1:
		return turn{tool: "exec_command", args: map[string]any{"cmd": "cat hone.txt"}}
	}
	return turn{content: codexFinal}
}

// writeCodexConfig writes Codex's config.toml in home: model through a
// provider at hone's base URL (Responses API), the key from HONE_API_KEY,
// no approvals, no sandbox, retries attempts for a failed request.
func writeCodexConfig(t *testing.T, home, model, base string, retries int) {
	t.Helper()
	config := fmt.Sprintf(`model = %q
model_provider = "hone"
approval_policy = "never"
sandbox_mode = "danger-full-access"

[model_providers.hone]
name = "hone"
base_url = "%s/v1"
env_key = "HONE_API_KEY"
wire_api = "responses"
request_max_retries = %d
stream_max_retries = 0
`, model, base, retries)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
}
