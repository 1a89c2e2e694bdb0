package acceptance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/proxy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"
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
	launcher := filepath.Join("node_modules", "@openai", "codex", "bin", "codex.js")
	if _, err := os.Stat(launcher); err != nil {
		if os.Getenv("HONE_REQUIRE_NODE") == "1" {
			t.Fatalf("acceptance/node_modules has no @openai/codex; run make deps: %v", err)
		}
		t.Skipf("acceptance/node_modules has no @openai/codex; run make deps: %v", err)
	}
	launcher, _ = filepath.Abs(launcher)
	for _, tc := range []struct {
		name, model, tool string
		calls             int
	}{
		{"unknown-model", "hone-agent", "multi_agent_v1__spawn_agent", 3},
		{"openai-model", "gpt-5.5", "apply_patch", 4},
	} {
		t.Run(tc.name, func(t *testing.T) { runCodex(t, node, launcher, tc.model, tc.tool, tc.calls) })
	}
}

// runCodex runs one Codex exec session through hone under model, whose
// tools the engine must be offered, among them tool (a flat name); the
// engine must get calls requests.
func runCodex(t *testing.T, node, launcher, model, tool string, calls int) {
	eng := newCodexEngine(t)
	base, ctl, store := startHoneStore(t, eng.url)

	home, work := t.TempDir(), t.TempDir()
	config := fmt.Sprintf(`model = %q
model_provider = "hone"
approval_policy = "never"
sandbox_mode = "danger-full-access"

[model_providers.hone]
name = "hone"
base_url = "%s/v1"
env_key = "HONE_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
`, model, base)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
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

	reqs := eng.requests()
	if len(reqs) != calls {
		t.Fatalf("the engine got %d requests, want %d (a call per tool result, then the answer)", len(reqs), calls)
	}
	for i, r := range reqs {
		names := gjson.GetBytes(r, "tools.#.function.name").Raw
		if !strings.Contains(names, `"exec_command"`) || !strings.Contains(names, `"`+tool+`"`) ||
			strings.Contains(string(r), `"web_search"`) || strings.Contains(string(r), `"namespace"`) {
			t.Errorf("request %d: engine tools %s", i, names)
		}
	}
	if calls == 4 { // the tools tool_search loaded, told in its result
		if m := gjson.GetBytes(reqs[1], "messages").Array(); !strings.Contains(m[len(m)-1].Get("content").String(), "spawn_agent") {
			t.Errorf("tool_search result %s", m[len(m)-1].Raw)
		}
	}
	last := gjson.GetBytes(reqs[len(reqs)-1], "messages").Array()
	if tool := last[len(last)-1]; tool.Get("role").String() != "tool" || !strings.Contains(tool.Get("content").String(), "hello from hone") {
		t.Errorf("last tool result %s, want the file's contents", tool.Raw)
	}

	var sessions []*capture.Session
	deadline := time.Now().Add(10 * time.Second)
	for {
		sessions = sessions[:0]
		if err := store.Sessions(context.Background(), capture.ExportFilter{}, func(s *capture.Session) error {
			sessions = append(sessions, s)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(sessions) == 1 && sessions[0].Calls == calls || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(sessions) != 1 || sessions[0].Calls != calls {
		for _, s := range sessions {
			t.Logf("session %s: %d calls", s.ID, s.Calls)
		}
		t.Fatalf("%d sessions captured, want Codex's run as one session of %d calls", len(sessions), calls)
	}
	id := sessions[0].ID
	feedback(t, ctl, id, 1)
	exp := experienceOf(t, store, id)
	if len(exp.Steps) != calls || exp.Reward != 1 {
		t.Fatalf("experience of %s: %d steps, reward %v; want one trajectory of %d steps with reward 1", id, len(exp.Steps),
			exp.Reward, calls)
	}
	checkExperience(t, exp)
	if s, _, err := store.GetSession(context.Background(), id); err != nil || s.Drift != 0 {
		t.Fatalf("session %s: drift %d (%+v), %v", id, s.Drift, s.Drifts, err)
	}
}

// startHoneStore runs the data plane in front of engineURL with a Badger
// capture store and a control plane on the store's routes.
func startHoneStore(t *testing.T, engineURL string) (data, control string, store *capture.Store) {
	store, err := capture.Open(filepath.Join(t.TempDir(), "capture"), capture.DefaultOptions(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	o := proxy.DefaultOptions()
	o.Upstream.Engines = []proxy.EngineOptions{{URL: engineURL}}
	s, err := proxy.New(o, store, prometheus.NewRegistry(), nil)
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
	ctl := chi.NewRouter()
	store.Routes(ctl)
	cs := httptest.NewServer(ctl)
	t.Cleanup(cs.Close)
	return "http://" + ln.Addr().String(), cs.URL, store
}

const codexFinal = "hone.txt holds: hello from hone"

// codexEngine is a scripted engine in vLLM's chat completions stream format
// whose tokens are bytes: the prompt is a ChatML rendering of the messages
// (tools, reasoning and tool calls included), the completion the rendering
// of the assistant turn it answers, so a conversation that sends its turns
// back as they were answered extends its earlier prompts token for token.
type codexEngine struct {
	t   *testing.T
	url string
	mu  sync.Mutex
	got [][]byte
}

func newCodexEngine(t *testing.T) *codexEngine {
	e := &codexEngine{t: t}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"object":"list","data":[{"id":"hone-agent","object":"model","created":1,"owned_by":"vllm","root":"hone-agent","parent":null,"max_model_len":65536,"permission":[]}]}`))
	})
	mux.HandleFunc("/v1/chat/completions", e.chat)
	ln := listen(t)
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	e.url = "http://" + ln.Addr().String()
	return e
}

func (e *codexEngine) requests() [][]byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([][]byte(nil), e.got...)
}

// turn is what the engine answers: reasoning, text, one tool call.
type turn struct {
	reasoning, content string
	tool               string // the function called, with args
	args               map[string]string
}

// script answers by the number of tool results so far: search the deferred
// tools when Codex offers tool_search, write the file (with apply_patch
// when offered, else a shell command), read it back, then say what it holds.
func script(tools gjson.Result, msgs []gjson.Result) turn {
	results := 0
	for _, m := range msgs {
		if m.Get("role").String() == "tool" {
			results++
		}
	}
	if tools.Get(`#(function.name=="tool_search")`).Exists() { // first look for the sub-agent tools
		if results == 0 {
			return turn{tool: "tool_search", args: map[string]string{"query": "spawn agent"}}
		}
		results--
	}
	switch results {
	case 0:
		if tools.Get(`#(function.name=="apply_patch")`).Exists() {
			return turn{reasoning: "I will add the file with apply_patch.", tool: "apply_patch",
				args: map[string]string{"input": "*** Begin Patch\n*** Add File: hone.txt\n+hello from hone\n*** End Patch\n"}}
		}
		return turn{reasoning: "I will write the file with a shell command.", tool: "exec_command",
			args: map[string]string{"cmd": "printf 'hello from hone' > hone.txt"}}
	case 1:
		return turn{tool: "exec_command", args: map[string]string{"cmd": "cat hone.txt"}}
	}
	return turn{content: codexFinal}
}

func (e *codexEngine) chat(w http.ResponseWriter, r *http.Request) {
	var body bytes.Buffer
	body.ReadFrom(r.Body)
	req := body.Bytes()
	e.mu.Lock()
	e.got = append(e.got, append([]byte(nil), req...))
	n := len(e.got)
	e.mu.Unlock()
	doc := gjson.ParseBytes(req)
	msgs := doc.Get("messages").Array()
	prompt := renderPrompt(doc.Get("tools"), msgs)
	tr := script(doc.Get("tools"), msgs)
	var chunks []map[string]any
	var completion int
	chunk := func(delta map[string]any, text string, finish any) {
		ids, lps := make([]int, len(text)), make([]map[string]any, len(text))
		for i := 0; i < len(text); i++ {
			ids[i] = int(text[i])
			lps[i] = map[string]any{"token": string(text[i]), "logprob": -0.25, "bytes": []int{int(text[i])}, "top_logprobs": []any{}}
		}
		completion += len(text)
		chunks = append(chunks, map[string]any{"choices": []any{map[string]any{"index": 0, "delta": delta,
			"logprobs": map[string]any{"content": lps}, "finish_reason": finish, "token_ids": ids}}})
	}
	if tr.reasoning != "" {
		chunk(map[string]any{"reasoning_content": tr.reasoning}, thinkText(tr.reasoning), nil)
	}
	if tr.content != "" {
		chunk(map[string]any{"content": tr.content}, tr.content, nil)
	}
	finish := "stop"
	if tr.tool != "" {
		args, _ := json.Marshal(tr.args)
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": fmt.Sprintf("call_%d", n), "type": "function",
			"function": map[string]any{"name": tr.tool, "arguments": string(args)}}}}, callText(tr.tool, string(args)), nil)
		finish = "tool_calls"
	}
	chunk(map[string]any{}, "<|im_end|>", finish)

	w.Header().Set("Content-Type", "text/event-stream")
	send := func(v map[string]any) {
		v["id"], v["object"], v["created"], v["model"] = fmt.Sprintf("chatcmpl-%d", n), "chat.completion.chunk", 1, doc.Get("model").String()
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
	}
	ids := make([]int, len(prompt))
	for i := 0; i < len(prompt); i++ {
		ids[i] = int(prompt[i])
	}
	send(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": ""},
		"logprobs": nil, "finish_reason": nil}}, "prompt_token_ids": ids})
	for _, c := range chunks {
		send(c)
	}
	send(map[string]any{"choices": []any{}, "usage": map[string]any{"prompt_tokens": len(prompt),
		"completion_tokens": completion, "total_tokens": len(prompt) + completion}})
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func thinkText(r string) string { return "<think>\n" + r + "\n</think>\n\n" }

func callText(name, args string) string {
	var v any
	json.Unmarshal([]byte(args), &v)
	b, _ := json.Marshal(map[string]any{"name": name, "arguments": v})
	return "<tool_call>\n" + string(b) + "\n</tool_call>"
}

// renderPrompt is the engine's chat template: the tools' names, then each
// message, then the assistant's turn opening.
func renderPrompt(tools gjson.Result, msgs []gjson.Result) string {
	var sb strings.Builder
	if tools.IsArray() {
		var names []string
		for _, n := range tools.Get("#.function.name").Array() {
			names = append(names, n.String())
		}
		sb.WriteString("<|im_start|>tools\n" + strings.Join(names, ",") + "<|im_end|>\n")
	}
	for _, m := range msgs {
		sb.WriteString("<|im_start|>" + m.Get("role").String() + "\n")
		if r := m.Get("reasoning_content").String(); r != "" && m.Get("role").String() == "assistant" {
			sb.WriteString(thinkText(r))
		}
		c := m.Get("content")
		if c.IsArray() {
			for _, p := range c.Array() {
				sb.WriteString(p.Get("text").String())
			}
		} else {
			sb.WriteString(c.String())
		}
		for _, tc := range m.Get("tool_calls").Array() {
			sb.WriteString(callText(tc.Get("function.name").String(), tc.Get("function.arguments").String()))
		}
		sb.WriteString("<|im_end|>\n")
	}
	sb.WriteString("<|im_start|>assistant\n")
	return sb.String()
}
