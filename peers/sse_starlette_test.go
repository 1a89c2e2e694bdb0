package peers

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hone-rl/hone/proxy"
	"github.com/tidwall/gjson"
)

// TestSSEStarletteEngine puts hone in front of an OpenAI-compatible stream
// served by the real sse-starlette (scripts/peers/sse_starlette_engine.py),
// as Python servers such as llama-cpp-python's stream: events end with CRLF
// and keep-alive comments (": ping - <time>") come between them. The agent
// asks for logprobs and token ids itself, so it gets the engine's events
// as they are, except that hone (which asked for the usage chunk the agent
// did not) holds the two choices' final chunks until the usage chunk and
// puts its system_fingerprint back on each. Every chunk reaches the agent
// whole, the pings after the final chunks stay behind them, and the usage
// chunk does not reach it.
func TestSSEStarletteEngine(t *testing.T) {
	py := needPython(t)
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "engine.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(py, filepath.Join(root, "scripts", "peers", "sse_starlette_engine.py"), strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	engine := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitUp(t, engine+"/health", logPath)

	h := startHoneStack(t, engine, func(o *proxy.Options) {
		o.Upstream.Engines = []proxy.EngineOptions{{URL: engine}}
	})
	req := `{"model":"sse","messages":[{"role":"user","content":"Hello!"}],"stream":true,"logprobs":true,"return_token_ids":true}`
	resp, err := http.Post(h.data+"/v1/chat/completions", "application/json", strings.NewReader(req))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d, err %v: %q", resp.StatusCode, err, body)
	}
	// the events as an SSE client reads them: blank-line separated, CRLF or LF
	var data []string
	pingsAfterFinals := 0
	finals := 0
	for _, ev := range strings.Split(strings.ReplaceAll(string(body), "\r\n", "\n"), "\n\n") {
		switch {
		case ev == "":
		case strings.HasPrefix(ev, ": ping"):
			if finals == 2 {
				pingsAfterFinals++
			}
		case strings.HasPrefix(ev, "data: "):
			d := strings.TrimPrefix(ev, "data: ")
			if strings.Contains(d, "\n") {
				t.Fatalf("an event with more than one line: %q (the whole answer: %q)", ev, body)
			}
			data = append(data, d)
			if gjson.Get(d, "choices.0.finish_reason").Type == gjson.String {
				finals++
			}
		default:
			t.Fatalf("an event an SSE client cannot read as data or a comment: %q (the whole answer: %q)", ev, body)
		}
	}
	if len(data) != 4 || data[3] != "[DONE]" {
		t.Fatalf("%d data events, want the three chunks and [DONE]: %q", len(data), body)
	}
	for i, d := range data[1:3] {
		if gjson.Get(d, "system_fingerprint").String() != "sse-fp" || gjson.Get(d, "choices.0.index").Int() != int64(i) ||
			gjson.Get(d, "usage").Exists() {
			t.Fatalf("final chunk %d: %s", i, d)
		}
	}
	if pingsAfterFinals == 0 {
		t.Fatalf("no ping between the final chunks and [DONE]: the engine's pause did not hold one back (%q)", body)
	}
}

// waitUp polls url until it answers 200, for up to 30 s.
func waitUp(t *testing.T, url, logPath string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
	}
	out, _ := os.ReadFile(logPath)
	t.Fatalf("%s did not come up: %s", url, out)
}
