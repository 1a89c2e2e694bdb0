package acceptance

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/proxy"
	"github.com/tidwall/gjson"
)

// TestCodexRestartMidTask stops hone in the middle of a Codex exec task and
// starts it again on the same store folder and port before Codex's next
// call. The engine's first tool call writes the file and then waits, in
// Codex's shell, until the test has restarted hone. Codex over HTTP sends
// its whole conversation on every call (store: false; it names
// previous_response_id only on its WebSocket transport, which a provider
// other than OpenAI does not use), so what carries the task across the
// restart is hone's session inference, rebuilt from the store: the calls
// after the restart join the session of the call before it, and the run is
// one session, one trajectory, drift 0, rewarded.
//
// In tokens mode the restarted hone also restores the engine's sampled
// token ids for the open session's latest turn from the store, so the call
// after the restart extends the path of the one before it.
func TestCodexRestartMidTask(t *testing.T) {
	for _, mode := range []string{proxy.ContinuityObserve, proxy.ContinuityTokens} {
		t.Run(mode, func(t *testing.T) { codexRestartMidTask(t, mode) })
	}
}

func codexRestartMidTask(t *testing.T, mode string) {
	node := requireNode(t)
	launcher := requirePackage(t, "@openai/codex", "@openai", "codex", "bin", "codex.js")
	eng := newAgentEngine(t, func(v engineView) turn {
		tr := codexScript(v)
		if len(v.Results) == 0 { // write, then wait for the restart
			tr.args["cmd"] = tr.args["cmd"].(string) + " && while [ ! -e restarted ]; do sleep 0.05; done"
		}
		return tr
	})
	h := startHoneMode(t, eng.url, mode)
	home, work := t.TempDir(), t.TempDir()
	writeCodexConfig(t, home, "hone-agent", h.data, 2) // a request on a connection the old hone closed is sent again
	restarted := make(chan error, 1)
	go func() { // restart hone once the file is written
		for i := 0; i < 1200; i++ {
			if _, err := os.Stat(filepath.Join(work, "hone.txt")); err == nil {
				err := h.restart()
				if err == nil {
					err = os.WriteFile(filepath.Join(work, "restarted"), nil, 0o600)
				}
				restarted <- err
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		restarted <- fmt.Errorf("hone.txt never appeared")
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, launcher, "exec", "--skip-git-repo-check", "-C", work, writeReadPrompt)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "CODEX_HOME="+home, "HONE_API_KEY=hone-test-key", "NO_COLOR=1", "RUST_LOG=warn")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("codex exec: %v\n%s", err, out)
	}
	if err := <-restarted; err != nil {
		t.Fatalf("restart: %v", err)
	}
	t.Logf("codex exec output:\n%s", out)
	if !strings.Contains(string(out), codexFinal) {
		t.Errorf("codex did not print the final message %q", codexFinal)
	}
	if n := len(eng.requests()); n != 3 {
		t.Fatalf("the engine got %d requests, want 3", n)
	}
	sessions := sessionsOf(t, h.store, func(ss []*capture.Session) bool { return len(ss) == 1 && ss[0].Calls == 3 })
	if len(sessions) != 1 || sessions[0].Calls != 3 {
		for _, s := range sessions {
			t.Logf("session %s: %d calls", s.ID, s.Calls)
		}
		t.Fatalf("%d sessions captured, want Codex's run as one session of 3 calls across the restart", len(sessions))
	}
	checkOneTrajectory(t, h, sessions[0].ID, 3)
}

// TestAgentsSDKRestartMidTask stops hone in the middle of an @openai/agents
// run that chains its calls by previous_response_id and starts it again on
// the same store folder and port: the write_file tool restarts hone (through
// a test hook) before it returns, so the SDK's next call names a response
// hone answered before the restart. hone must continue that conversation
// (kept in the capture store) and the session: the run is one session, one
// trajectory, drift 0, rewarded; the SDK's requests after the restart name
// previous_response_id and send only the new items.
func TestAgentsSDKRestartMidTask(t *testing.T) {
	for _, mode := range []string{proxy.ContinuityObserve, proxy.ContinuityTokens} {
		t.Run(mode, func(t *testing.T) { agentsSDKRestartMidTask(t, mode) })
	}
}

func agentsSDKRestartMidTask(t *testing.T, mode string) {
	node, script := agentsClient(t)
	eng := newAgentEngine(t, agentsScript)
	h := startHoneMode(t, eng.url, mode)
	front := newRecordingFront(t, h.data)
	restarts := 0
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		restarts++
		if err := h.restart(); err != nil {
			t.Errorf("restart: %v", err)
			w.WriteHeader(500)
		}
	}))
	t.Cleanup(hook.Close)
	work := t.TempDir()
	out := runAgents(t, node, script, front.url, work, "AGENT_CHAIN=1", "AGENT_HOOK="+hook.URL)
	if restarts != 1 {
		t.Fatalf("hone restarted %d times, want 1", restarts)
	}
	reqs := front.bodies("/v1/responses")
	if len(reqs) != 4 {
		t.Fatalf("hone got %d Responses requests, want 4", len(reqs))
	}
	for i, r := range reqs[1:] {
		if !gjson.GetBytes(r, "previous_response_id").Exists() || gjson.GetBytes(r, "input.#").Int() > 2 {
			t.Errorf("request %d does not continue by previous_response_id with the new items only: %.300s", i+1, r)
		}
	}
	checkWriteRead(t, eng, h, work, out, runCheck{mode: mode, tool: "write_file", calls: 4})
}

// recordingFront is a reverse proxy in front of hone that keeps the bodies
// of the requests it passes on.
type recordingFront struct {
	url  string
	mu   sync.Mutex
	reqs map[string][][]byte
}

func newRecordingFront(t *testing.T, target string) *recordingFront {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	f := &recordingFront{reqs: map[string][][]byte{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs[r.URL.Path] = append(f.reqs[r.URL.Path], b)
		f.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

func (f *recordingFront) bodies(path string) [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.reqs[path]...)
}
