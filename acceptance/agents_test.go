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

// agentsScript is the Agents SDK task: write_file, read_file, the answer;
// "Say ready." (AGENT_CHAIN's first run) is answered with text.
func agentsScript(v engineView) turn {
	if n := len(v.Users); n > 0 && v.Users[n-1] == "Say ready." {
		return turn{content: "ready"}
	}
	switch len(v.Results) {
	case 0:
		return turn{reasoning: "I will write the file.", tool: "write_file",
			args: map[string]any{"path": "hone.txt", "content": "hello from hone"}}
	case 1:
		return turn{tool: "read_file", args: map[string]any{"path": "hone.txt"}}
	}
	return turn{content: writeReadFinal}
}

// agentsClient returns node and the Agents SDK client script, skipping
// when the SDK is not installed.
func agentsClient(t *testing.T) (node, script string) {
	t.Helper()
	node = requireNode(t)
	requirePackage(t, "@openai/agents", "@openai", "agents", "package.json")
	script, _ = filepath.Abs("agents_client.mjs")
	return node, script
}

// runAgents runs agents_client.mjs against hone at base in work.
func runAgents(t *testing.T, node, script, base, work string, env ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(append(os.Environ(), "OPENAI_BASE_URL="+base+"/v1", "OPENAI_API_KEY=hone-test-key",
		"HONE_MODEL=hone-agent", "AGENT_WORK="+work, "AGENT_PROMPT="+writeReadPrompt), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("agents_client.mjs: %v\n%s", err, out)
	}
	t.Logf("agents_client.mjs output:\n%s", out)
	return string(out)
}

// TestAgentsSDKThroughHone runs an @openai/agents agent (pinned in
// package-lock.json) in the SDK's default Responses mode, configured only by
// OPENAI_BASE_URL and OPENAI_API_KEY, with two function tools through hone
// to the scripted engine: write_file, read_file, the answer. The run must
// print the answer and be one session, one trajectory, drift 0, that a
// reward lands on: the SDK sending its whole history each call (the
// default), in continuity mode tokens; and chaining calls by
// previous_response_id after a first run (in observe mode), so the run is
// the first run's session continued.
func TestAgentsSDKThroughHone(t *testing.T) {
	node, script := agentsClient(t)
	for _, tc := range []struct {
		name, mode string
		chain      bool
	}{
		{"tokens-full-history", proxy.ContinuityTokens, false},
		{"observe-previous-response-id", proxy.ContinuityObserve, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng := newAgentEngine(t, agentsScript)
			h := startHoneMode(t, eng.url, tc.mode)
			work := t.TempDir()
			var env []string
			calls := 3
			if tc.chain {
				env = append(env, "AGENT_CHAIN=1")
				calls = 4
			}
			out := runAgents(t, node, script, h.data, work, env...)
			checkWriteRead(t, eng, h, work, out, runCheck{mode: tc.mode, tool: "write_file", calls: calls})
		})
	}
}
