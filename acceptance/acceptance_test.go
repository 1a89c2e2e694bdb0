package acceptance

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/engine"
	"github.com/hone-rl/hone/model/modeltest"
	"github.com/hone-rl/hone/proxy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"
)

// minNode is the oldest Node.js the current openai package supports
// (openai 7: engines node >= 22). package.json installs Node 24 into
// node_modules (the `node` package), which the tests prefer over the machine's.
const minNode = 22

// requireNode returns the Node.js to run the client with:
// node_modules/.bin/node (installed by make deps), else the one on PATH. It
// skips (or, with HONE_REQUIRE_NODE=1, fails) without a new enough Node or
// without the installed openai package.
func requireNode(t *testing.T) string {
	t.Helper()
	fail := t.Skipf
	if os.Getenv("HONE_REQUIRE_NODE") == "1" {
		fail = t.Fatalf
	}
	if _, err := os.Stat("node_modules/openai/package.json"); err != nil {
		fail("acceptance/node_modules missing; run make deps: %v", err)
	}
	bin, err := filepath.Abs(filepath.Join("node_modules", ".bin", "node"))
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		if bin, err = exec.LookPath("node"); err != nil {
			fail("no node in acceptance/node_modules/.bin or on PATH (run make deps): %v", err)
		}
	}
	out, err := exec.Command(bin, "--version").Output()
	major := 0
	if m := regexp.MustCompile(`^v(\d+)\.`).FindStringSubmatch(strings.TrimSpace(string(out))); m != nil {
		major, _ = strconv.Atoi(m[1])
	}
	if err != nil || major < minNode {
		fail("%s is %q (%v); the openai package needs Node >= %d (make deps installs it into acceptance/node_modules)",
			bin, strings.TrimSpace(string(out)), err, minNode)
	}
	return bin
}

func listen(t *testing.T) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// stubEngine replays the proxy's vLLM fixtures: tool fixtures when the
// request has tools, streamed ones when it streams.
func stubEngine(t *testing.T) string {
	cases := filepath.Join("..", "proxy", "testdata", "cases")
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"object":"list","data":[{"id":"Qwen/Qwen3-0.6B","object":"model","created":1,"owned_by":"vllm","root":"Qwen/Qwen3-0.6B","parent":null,"max_model_len":40960,"permission":[]}]}`))
	})
	mux.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var body bytes.Buffer
		body.ReadFrom(r.Body)
		name := "chat"
		if gjson.GetBytes(body.Bytes(), "tools").Exists() {
			name = "chat_tools"
		}
		if !gjson.GetBytes(body.Bytes(), "stream").Bool() {
			w.Header().Set("Content-Type", "application/json")
			b, _ := os.ReadFile(filepath.Join(cases, name, "upstream.json"))
			w.Write(b)
			return
		}
		b, _ := os.ReadFile(filepath.Join(cases, name+"_stream", "upstream.sse"))
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range strings.SplitAfter(string(b), "\n\n") {
			w.Write([]byte(ev))
			w.(http.Flusher).Flush()
		}
	})
	ln := listen(t)
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// startHone runs the data plane in front of engineURL with an in-memory recorder.
func startHone(t *testing.T, engineURL string) (string, *proxy.MemRecorder) {
	o := proxy.DefaultOptions()
	o.Upstream.Engines = []proxy.EngineOptions{{URL: engineURL}}
	rec := proxy.NewMemRecorder()
	s, err := proxy.New(o, rec, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(t)
	go s.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return "http://" + ln.Addr().String(), rec
}

func runNode(t *testing.T, node, script string, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	var results []struct {
		Name string
		OK   bool
		Err  string
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	_ = json.Unmarshal([]byte(lines[len(lines)-1]), &results)
	for _, r := range results {
		if !r.OK {
			t.Errorf("%s: %s", r.Name, r.Err)
		}
	}
	if err != nil || len(results) == 0 {
		t.Fatalf("node %s: %v\n%s", script, err, out)
	}
}

func TestOpenAIClientThroughHoneToStub(t *testing.T) {
	node := requireNode(t)
	base, rec := startHone(t, stubEngine(t))
	session := "acceptance-stub-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	runNode(t, node, "openai_client.mjs", "OPENAI_BASE_URL="+base+"/v1", "OPENAI_API_KEY=dummy", "HONE_EXPECT=stub",
		"HONE_SESSION="+session)
	checkRecorded(t, rec)
	checkHoneHeaders(t, rec, session)
}

func TestOpenAIClientThroughHoneToEngine(t *testing.T) {
	node := requireNode(t)
	base, rec := startHone(t, embeddedEngine(t))
	session := "acceptance-engine-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	runNode(t, node, "openai_client.mjs", "OPENAI_BASE_URL="+base+"/v1", "OPENAI_API_KEY=dummy", "HONE_EXPECT=engine",
		"HONE_MODEL=tiny", "HONE_SESSION="+session)
	checkRecorded(t, rec)
	checkHoneHeaders(t, rec, session)
}

// checkHoneHeaders: the client's two calls with hone's headers as
// defaultHeaders (sent lowercase by fetch) were recorded under that
// session with its task, tags, train mark, reward and commit.
func checkHoneHeaders(t *testing.T, rec *proxy.MemRecorder, session string) {
	t.Helper()
	n := 0
	for _, c := range rec.Calls() {
		if c.Session != session {
			if c.Hone.Session == session {
				t.Errorf("call %s sent session %s but was recorded under %s", c.ID, session, c.Session)
			}
			continue
		}
		n++
		h := c.Hone
		if h.Task != "acceptance-task" || strings.Join(h.Tags, ",") != "js,acceptance" || h.Train != 1 ||
			h.Reward == nil || *h.Reward != 0.5 || !h.Commit {
			t.Errorf("call %s: hone headers recorded as %+v (reward %v)", c.ID, h, h.Reward)
		}
	}
	if n != 2 {
		t.Errorf("%d calls recorded under session %s, the client sent 2", n, session)
	}
}

// checkRecorded: every successful call was captured with token ids and
// one logprob per completion token.
func checkRecorded(t *testing.T, rec *proxy.MemRecorder) {
	t.Helper()
	calls := rec.Calls()
	if len(calls) < 5 {
		t.Fatalf("recorded %d calls", len(calls))
	}
	for _, c := range calls {
		if c.Status != capture.StatusOK {
			continue
		}
		if len(c.PromptIDs) == 0 || len(c.Choices) == 0 || len(c.Choices[0].TokenIDs) == 0 ||
			len(c.Choices[0].TokenIDs) != len(c.Choices[0].Logprobs) {
			t.Errorf("call %s (stream %v) recorded %d prompt ids, choices %+v", c.ID, c.Stream, len(c.PromptIDs), c.Choices)
		}
	}
}

// embeddedEngine serves a random tiny model with hone's engine.
func embeddedEngine(t *testing.T) string {
	return serveEngine(t, tinyModel(t))
}

// tinyModel writes a random tiny model folder.
func tinyModel(t *testing.T) string { return modeltest.Tiny(t, modeltest.Options{Seed: 1}) }

// serveEngine serves a model folder with hone's engine as "tiny".
func serveEngine(t *testing.T, dir string) string { return serveEngineAs(t, dir, "tiny") }

// serveEngineAs serves a model folder with hone's engine under name.
func serveEngineAs(t *testing.T, dir, name string) string {
	o := engine.DefaultOptions()
	o.ModelDir, o.ServedModelName = dir, name
	e, err := engine.New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(t)
	srv := &http.Server{Handler: e.Handler()}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close(); e.Close() })
	return "http://" + ln.Addr().String()
}
