package acceptance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/model/template"
	"github.com/hone-rl/hone/model/tokenizer"
	"github.com/hone-rl/hone/proxy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"
)

// The coding-agent acceptance tests (Codex, Claude Code, opencode, Qwen
// Code, the OpenAI Agents SDK) share a scripted engine speaking vLLM's wire
// formats and a hone in front of it.
//
// The engine answers in two ways:
//   - chat completions (hone observes, capture.continuity: observe): its
//     tokens are bytes, the prompt a ChatML rendering of the messages
//     (tools, reasoning and tool calls included), the completion the
//     rendering of the assistant turn it answers, so a conversation that
//     sends its turns back as they were answered extends its earlier prompts
//     token for token;
//   - /tokenize and token-id /v1/completions (capture.continuity: tokens):
//     the prompt is rendered by hone with the tiny model's Qwen3 chat
//     template and character tokenizer, the engine decodes it, and its
//     output is Qwen3's text (<think>, hermes <tool_call>), which hone parses
//     and answers in the agent's API.
//
// Either way what the engine says comes from a script reading an
// engineView of the request: the tools offered, the tool results so far.

// shippedTinyModel is the shipped tiny model folder: Qwen3's chat template, a
// character tokenizer with byte fallback and Qwen3's special tokens.
const shippedTinyModel = "../testdata/tiny-model"

// engineView is what a script reads of one engine request.
type engineView struct {
	Path    string   // /v1/chat/completions or /v1/completions
	Tools   []string // the function tools offered, by name
	Results []string // the tool results so far, in order
	Users   []string // the user messages' text
	System  string   // the system prompt's text (chat requests only)
	Text    string   // the whole prompt: rendered (completions) or the messages' JSON (chat)
}

func (v engineView) hasTool(name string) bool {
	for _, t := range v.Tools {
		if t == name {
			return true
		}
	}
	return false
}

// turn is what the engine answers: reasoning, text, tool calls.
type turn struct {
	reasoning, content string
	tool               string // the function called, with args
	args               map[string]any
}

// agentEngine is the scripted engine.
type agentEngine struct {
	t      *testing.T
	url    string
	script func(engineView) turn
	tmpl   *template.Model
	tok    tokenizer.Tokenizer

	mu    sync.Mutex
	got   [][]byte // request bodies of generation calls, in order
	views []engineView
}

func newAgentEngine(t *testing.T, script func(engineView) turn) *agentEngine {
	t.Helper()
	tm, err := template.Load(shippedTinyModel)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(shippedTinyModel)
	if err != nil {
		t.Fatal(err)
	}
	e := &agentEngine{t: t, script: script, tmpl: tm, tok: tok}
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"object":"list","data":[{"id":"hone-agent","object":"model","created":1,"owned_by":"vllm","root":"hone-agent","parent":null,"max_model_len":262144,"permission":[]}]}`))
	})
	mux.HandleFunc("/v1/chat/completions", e.chat)
	mux.HandleFunc("/v1/completions", e.completions)
	mux.HandleFunc("/tokenize", e.tokenize)
	ln := listen(t)
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	e.url = "http://" + ln.Addr().String()
	return e
}

// requests are the bodies of the generation calls the engine got.
func (e *agentEngine) requests() [][]byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([][]byte(nil), e.got...)
}

// seen are the views of the generation calls the engine got.
func (e *agentEngine) seen() []engineView {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]engineView(nil), e.views...)
}

func (e *agentEngine) record(req []byte, v engineView) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, append([]byte(nil), req...))
	e.views = append(e.views, v)
	return len(e.got)
}

func readBody(r *http.Request) []byte {
	var body bytes.Buffer
	body.ReadFrom(r.Body)
	return body.Bytes()
}

// contentText is a chat message content's text.
func contentText(c gjson.Result) string {
	if !c.IsArray() {
		return c.String()
	}
	var sb strings.Builder
	for _, p := range c.Array() {
		sb.WriteString(p.Get("text").String())
	}
	return sb.String()
}

// chatView reads a chat completions request.
func chatView(doc gjson.Result) engineView {
	v := engineView{Path: "/v1/chat/completions", Text: doc.Get("messages").Raw}
	for _, n := range doc.Get("tools.#.function.name").Array() {
		v.Tools = append(v.Tools, n.String())
	}
	for _, m := range doc.Get("messages").Array() {
		switch m.Get("role").String() {
		case "tool":
			v.Results = append(v.Results, contentText(m.Get("content")))
		case "user":
			v.Users = append(v.Users, contentText(m.Get("content")))
		case "system", "developer":
			v.System += contentText(m.Get("content"))
		}
	}
	return v
}

var (
	toolsBlock   = regexp.MustCompile(`(?s)<tools>\n(.*?)\n</tools>`)
	toolResponse = regexp.MustCompile(`(?s)<tool_response>\n(.*?)\n</tool_response>`)
	userTurn     = regexp.MustCompile(`(?s)<\|im_start\|>user\n(.*?)<\|im_end\|>`)
	systemTurn   = regexp.MustCompile(`(?s)^<\|im_start\|>system\n(.*?)<\|im_end\|>`)
)

// textView reads a prompt rendered with the Qwen3 template.
func textView(text string) engineView {
	v := engineView{Path: "/v1/completions", Text: text}
	// the template's tool list is the last <tools> block (a system prompt
	// may hold its own: Codex lists its deferred tool namespaces in one)
	if all := toolsBlock.FindAllStringSubmatch(text, -1); all != nil {
		m := all[len(all)-1]
		for _, line := range strings.Split(m[1], "\n") {
			t := gjson.Parse(line)
			name := t.Get("function.name")
			if !name.Exists() {
				name = t.Get("name")
			}
			v.Tools = append(v.Tools, name.String())
		}
	}
	for _, m := range toolResponse.FindAllStringSubmatch(text, -1) {
		v.Results = append(v.Results, m[1])
	}
	for _, m := range userTurn.FindAllStringSubmatch(text, -1) {
		if !strings.HasPrefix(m[1], "<tool_response>") {
			v.Users = append(v.Users, m[1])
		}
	}
	if m := systemTurn.FindStringSubmatch(text); m != nil {
		v.System = m[1]
	}
	return v
}

// tokenize is vLLM's /tokenize: messages through the chat template, or a prompt.
func (e *agentEngine) tokenize(w http.ResponseWriter, r *http.Request) {
	body := readBody(r)
	var ids []int32
	if p := gjson.GetBytes(body, "prompt"); p.Exists() {
		ids = e.tok.Encode(p.String())
	} else {
		text, err := e.tmpl.RenderRequest(body)
		if err != nil {
			w.WriteHeader(400)
			fmt.Fprintf(w, `{"object":"error","message":%q,"type":"BadRequestError","param":null,"code":400}`, err.Error())
			return
		}
		ids = e.tok.Encode(text)
	}
	w.Header().Set("Content-Type", "application/json")
	b, _ := json.Marshal(map[string]any{"count": len(ids), "max_model_len": 262144, "tokens": ids, "token_strs": nil})
	w.Write(b)
}

// qwenOutput is a turn as Qwen3 writes it after "<|im_start|>assistant\n".
func qwenOutput(tr turn) string {
	var sb strings.Builder
	sb.WriteString("<think>\n" + tr.reasoning + "\n</think>\n\n" + tr.content)
	if tr.tool != "" {
		if tr.content != "" {
			sb.WriteString("\n")
		}
		args, _ := json.Marshal(tr.args)
		sb.WriteString(`<tool_call>` + "\n" + `{"name": "` + tr.tool + `", "arguments": ` + string(args) + "}\n</tool_call>")
	}
	sb.WriteString("<|im_end|>")
	return sb.String()
}

// completions is vLLM's /v1/completions with a token-id prompt,
// return_token_ids and "token_id:N" logprobs, streamed or not.
func (e *agentEngine) completions(w http.ResponseWriter, r *http.Request) {
	body := readBody(r)
	var prompt []int32
	if err := json.Unmarshal([]byte(gjson.GetBytes(body, "prompt").Raw), &prompt); err != nil {
		e.t.Errorf("completions prompt is not token ids: %.200s", gjson.GetBytes(body, "prompt").Raw)
		w.WriteHeader(400)
		return
	}
	text := e.tok.Decode(prompt)
	v := textView(text)
	e.record(body, v)
	ids := e.tok.Encode(qwenOutput(e.script(v)))
	texts := make([]string, len(ids))
	for i, id := range ids {
		if !e.tok.IsSpecial(id) {
			texts[i] = e.tok.Decode([]int32{id})
		}
	}
	lp := func(ids []int32) map[string]any {
		var toks []string
		var lps []float64
		var tops []map[string]float64
		offs := make([]int, len(ids))
		for i, id := range ids {
			tok := fmt.Sprintf("token_id:%d", id)
			toks, lps, tops = append(toks, tok), append(lps, -0.25), append(tops, map[string]float64{tok: -0.25})
			offs[i] = i
		}
		return map[string]any{"text_offset": offs, "token_logprobs": lps, "tokens": toks, "top_logprobs": tops}
	}
	model := gjson.GetBytes(body, "model").String()
	usage := map[string]any{"prompt_tokens": len(prompt), "total_tokens": len(prompt) + len(ids), "completion_tokens": len(ids)}
	head := func(choices []any) map[string]any {
		return map[string]any{"id": "cmpl-1", "object": "text_completion", "created": 1, "model": model, "choices": choices}
	}
	if !gjson.GetBytes(body, "stream").Bool() {
		v := head([]any{map[string]any{"index": 0, "text": strings.Join(texts, ""), "logprobs": lp(ids), "finish_reason": "stop",
			"stop_reason": nil, "prompt_token_ids": prompt, "token_ids": ids}})
		v["usage"] = usage
		w.Header().Set("Content-Type", "application/json")
		b, _ := json.Marshal(v)
		w.Write(b)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(v map[string]any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
	}
	for i, id := range ids {
		c := map[string]any{"index": 0, "text": texts[i], "logprobs": lp([]int32{id}), "finish_reason": nil, "stop_reason": nil,
			"token_ids": []int32{id}}
		if i == len(ids)-1 {
			c["finish_reason"] = "stop"
		}
		if i == 0 {
			c["prompt_token_ids"] = prompt
		}
		send(head([]any{c}))
	}
	if gjson.GetBytes(body, "stream_options.include_usage").Bool() {
		v := head([]any{})
		v["usage"] = usage
		send(v)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// chat is vLLM's chat completions (reasoning and tool parsers on), byte
// tokens, streamed or not.
func (e *agentEngine) chat(w http.ResponseWriter, r *http.Request) {
	req := readBody(r)
	doc := gjson.ParseBytes(req)
	msgs := doc.Get("messages").Array()
	prompt := renderPrompt(doc.Get("tools"), msgs)
	v := chatView(doc)
	n := e.record(req, v)
	tr := e.script(v)
	var chunks []map[string]any
	var completion int
	var toks []int
	var lps []map[string]any
	msg := map[string]any{"role": "assistant", "content": nil}
	chunk := func(delta map[string]any, text string, finish any) {
		ids, lp := make([]int, len(text)), make([]map[string]any, len(text))
		for i := 0; i < len(text); i++ {
			ids[i] = int(text[i])
			lp[i] = map[string]any{"token": string(text[i]), "logprob": -0.25, "bytes": []int{int(text[i])}, "top_logprobs": []any{}}
		}
		completion += len(text)
		toks, lps = append(toks, ids...), append(lps, lp...)
		chunks = append(chunks, map[string]any{"choices": []any{map[string]any{"index": 0, "delta": delta,
			"logprobs": map[string]any{"content": lp}, "finish_reason": finish, "token_ids": ids}}})
	}
	if tr.reasoning != "" {
		chunk(map[string]any{"reasoning_content": tr.reasoning}, thinkText(tr.reasoning), nil)
		msg["reasoning_content"] = tr.reasoning
	}
	if tr.content != "" {
		chunk(map[string]any{"content": tr.content}, tr.content, nil)
		msg["content"] = tr.content
	}
	finish := "stop"
	if tr.tool != "" {
		args, _ := json.Marshal(tr.args)
		call := map[string]any{"id": fmt.Sprintf("call_%d", n), "type": "function",
			"function": map[string]any{"name": tr.tool, "arguments": string(args)}}
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": call["id"], "type": "function",
			"function": call["function"]}}}, callText(tr.tool, string(args)), nil)
		msg["tool_calls"] = []any{call}
		finish = "tool_calls"
	}
	chunk(map[string]any{}, "<|im_end|>", finish)
	ids := make([]int, len(prompt))
	for i := 0; i < len(prompt); i++ {
		ids[i] = int(prompt[i])
	}
	usage := map[string]any{"prompt_tokens": len(prompt), "completion_tokens": completion, "total_tokens": len(prompt) + completion}
	id, model := fmt.Sprintf("chatcmpl-%d", n), doc.Get("model").String()
	if !doc.Get("stream").Bool() {
		w.Header().Set("Content-Type", "application/json")
		b, _ := json.Marshal(map[string]any{"id": id, "object": "chat.completion", "created": 1, "model": model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": map[string]any{"content": lps},
				"finish_reason": finish, "stop_reason": nil, "token_ids": toks}},
			"usage": usage, "prompt_token_ids": ids})
		w.Write(b)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(v map[string]any) {
		v["id"], v["object"], v["created"], v["model"] = id, "chat.completion.chunk", 1, model
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
	}
	send(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": ""},
		"logprobs": nil, "finish_reason": nil}}, "prompt_token_ids": ids})
	for _, c := range chunks {
		send(c)
	}
	send(map[string]any{"choices": []any{}, "usage": usage})
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func thinkText(r string) string { return "<think>\n" + r + "\n</think>\n\n" }

func callText(name, args string) string {
	var v any
	json.Unmarshal([]byte(args), &v)
	b, _ := json.Marshal(map[string]any{"name": name, "arguments": v})
	return "<tool_call>\n" + string(b) + "\n</tool_call>"
}

// renderPrompt is the chat path's template: the tools' names, then each
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
		sb.WriteString(contentText(m.Get("content")))
		for _, tc := range m.Get("tool_calls").Array() {
			sb.WriteString(callText(tc.Get("function.name").String(), tc.Get("function.arguments").String()))
		}
		sb.WriteString("<|im_end|>\n")
	}
	sb.WriteString("<|im_start|>assistant\n")
	return sb.String()
}

// testHone is hone's data plane in front of one engine, with a Badger
// capture store (which also keeps the Responses API conversations, as hone
// serve does) and a control plane on the store's routes. restart stops it
// and starts it again on the same store folder and port.
type testHone struct {
	t             *testing.T
	data, control string
	store         *capture.Store
	reg           *prometheus.Registry
	engineURL     string
	mode          string
	dir           string
	srv           *proxy.Server
	ctl           atomic.Pointer[chi.Mux]
}

// startHoneMode runs hone in front of engineURL in a continuity mode; in
// tokens mode (the tiny model's template and tokenizer) it returns once the
// probe put the engine in tokens mode.
func startHoneMode(t *testing.T, engineURL, mode string) *testHone {
	t.Helper()
	h := &testHone{t: t, engineURL: engineURL, mode: mode, dir: filepath.Join(t.TempDir(), "capture")}
	cs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ctl.Load().ServeHTTP(w, r) }))
	t.Cleanup(cs.Close)
	h.control = cs.URL
	if err := h.start(listen(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.stop) // before the store closes: cleanups run last first
	return h
}

func (h *testHone) start(ln net.Listener) error {
	store, err := capture.Open(h.dir, capture.DefaultOptions(), prometheus.NewRegistry())
	if err != nil {
		ln.Close()
		return err
	}
	o := proxy.DefaultOptions()
	o.Upstream.Engines = []proxy.EngineOptions{{URL: h.engineURL}}
	o.Continuity = h.mode
	if h.mode == proxy.ContinuityTokens {
		o.Upstream.Tokenizer = shippedTinyModel
	}
	reg := prometheus.NewRegistry()
	s, err := proxy.New(o, store, reg, nil)
	if err != nil {
		store.Close()
		ln.Close()
		return err
	}
	s.SetConversations(store.Conversations(o.Responses.TTL, o.Responses.Max))
	go s.Serve(ln)
	ctl := chi.NewRouter()
	store.Routes(ctl)
	h.ctl.Store(ctl)
	h.data, h.store, h.reg, h.srv = "http://"+ln.Addr().String(), store, reg, s
	if h.mode == proxy.ContinuityTokens {
		return waitTokensMode(reg, h.engineURL)
	}
	return nil
}

// stop shuts the data plane down (in-flight calls end) and closes the store
// (queued captures are written).
func (h *testHone) stop() {
	if h.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != nil {
		h.t.Errorf("hone shutdown: %v", err)
	}
	if err := h.store.Close(); err != nil {
		h.t.Errorf("store close: %v", err)
	}
	h.srv = nil
}

// restart stops hone and starts it again on the same store folder and port
// (it may run outside the test's goroutine: errors are returned).
func (h *testHone) restart() error {
	addr := strings.TrimPrefix(h.data, "http://")
	h.stop()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s again: %w", addr, err)
	}
	return h.start(ln)
}

// waitTokensMode waits until hone's probe put the engine in tokens mode
// (hone_continuity_tokens{engine} = 1).
func waitTokensMode(reg *prometheus.Registry, engineURL string) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		mfs, err := reg.Gather()
		if err != nil {
			return err
		}
		for _, mf := range mfs {
			if mf.GetName() != "hone_continuity_tokens" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "engine" && strings.TrimSuffix(l.GetValue(), "/") == engineURL && m.GetGauge().GetValue() == 1 {
						return nil
					}
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("hone never put the scripted engine in tokens mode (the probe failed?)")
}

// sessionsOf lists the captured sessions, waiting until pred holds of them
// (or 10 s passed).
func sessionsOf(t *testing.T, store *capture.Store, pred func([]*capture.Session) bool) []*capture.Session {
	t.Helper()
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
		if pred(sessions) || time.Now().After(deadline) {
			return sessions
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkOneTrajectory rewards session id on the control plane and checks
// that it is one trajectory of steps calls, reward 1, no drift.
func checkOneTrajectory(t *testing.T, h *testHone, id string, steps int) capture.Experience {
	t.Helper()
	feedback(t, h.control, id, 1)
	exp := experienceOf(t, h.store, id)
	if len(exp.Steps) != steps || exp.Reward != 1 {
		t.Fatalf("experience of %s: %d steps, reward %v; want one trajectory of %d steps with reward 1", id, len(exp.Steps),
			exp.Reward, steps)
	}
	checkExperience(t, exp)
	if s, _, err := h.store.GetSession(context.Background(), id); err != nil || s.Drift != 0 {
		t.Fatalf("session %s: drift %d (%+v), %v", id, s.Drift, s.Drifts, err)
	}
	return exp
}

// The task the coding-agent tests give: two tool calls, then an answer.
const (
	writeReadPrompt = "Write 'hello from hone' into hone.txt with a shell command, then read it back."
	writeReadFinal  = "hone.txt holds: hello from hone"
)

// writeReadScript writes the file with the shell tool (its command in
// argument arg), reads it back with the same tool, then says what it
// holds; a request that does not offer the tool (a side call: titles,
// summaries) gets a short text.
func writeReadScript(tool, arg string) func(engineView) turn {
	return func(v engineView) turn {
		if !v.hasTool(tool) {
			return turn{content: "Hone file"}
		}
		switch len(v.Results) {
		case 0:
			return turn{reasoning: "I will write the file with a shell command.", tool: tool,
				args: map[string]any{arg: "printf 'hello from hone' > hone.txt", "description": "Write hone.txt"}}
		case 1:
			return turn{tool: tool, args: map[string]any{arg: "cat hone.txt", "description": "Read hone.txt"}}
		}
		return turn{content: writeReadFinal}
	}
}

// runCheck says what a write-and-read run must look like.
type runCheck struct {
	mode    string // continuity mode
	tool    string // a tool every call of the run offers (side calls do not)
	session string // the session the run is named (X-Hone-Session), if any
	calls   int    // the run's generation calls (default 3: a call per tool result, then the answer)
	side    int    // side calls (titles ...), each a session of its own
}

// checkWriteRead checks a write-and-read run: the file written, the answer
// printed, the run's generation calls and side calls on the engine (in
// tokens mode the run's as token-id completions), the file's contents in
// the last tool result, and the run captured as one session (the named
// one, when set) and one trajectory with drift 0 that a reward lands on;
// each side call is a session of its own.
func checkWriteRead(t *testing.T, eng *agentEngine, h *testHone, work, out string, rc runCheck) {
	t.Helper()
	if rc.calls == 0 {
		rc.calls = 3
	}
	if b, err := os.ReadFile(filepath.Join(work, "hone.txt")); err != nil || strings.TrimSpace(string(b)) != "hello from hone" {
		t.Fatalf("hone.txt: %q, %v", b, err)
	}
	if !strings.Contains(out, writeReadFinal) {
		t.Errorf("the agent did not print the final message %q", writeReadFinal)
	}
	var main []engineView
	sides := 0
	for _, v := range eng.seen() {
		if v.hasTool(rc.tool) {
			main = append(main, v)
		} else {
			sides++
		}
	}
	if len(main) != rc.calls || sides != rc.side {
		t.Fatalf("the engine got %d requests with the tool and %d without, want %d and %d", len(main), sides, rc.calls, rc.side)
	}
	if rc.mode == proxy.ContinuityTokens {
		for i, v := range main {
			if v.Path != "/v1/completions" {
				t.Errorf("request %d went to %s, not token-id completions (tokens mode)", i, v.Path)
			}
		}
	}
	if r := main[len(main)-1].Results; len(r) != 2 || !strings.Contains(r[1], "hello from hone") {
		t.Errorf("tool results %q, want the file's contents last", r)
	}
	sessions := sessionsOf(t, h.store, func(ss []*capture.Session) bool { return len(ss) == 1+rc.side })
	var run *capture.Session
	for _, s := range sessions {
		t.Logf("session %s: %d calls", s.ID, s.Calls)
		if s.Calls == rc.calls {
			run = s
		} else if s.Calls != 1 {
			t.Errorf("session %s: %d calls; want the run's %d, or a side call's 1", s.ID, s.Calls, rc.calls)
		}
	}
	if len(sessions) != 1+rc.side || run == nil {
		t.Fatalf("%d sessions captured, want the run as one session of %d calls and %d side calls", len(sessions), rc.calls, rc.side)
	}
	if rc.session != "" && run.ID != rc.session {
		t.Errorf("the run's session is %s, want %s (named by X-Hone-Session)", run.ID, rc.session)
	}
	checkOneTrajectory(t, h, run.ID, rc.calls)
}

// requirePackage returns the absolute path of a file of an npm package in
// acceptance/node_modules (path below node_modules), skipping the test when
// make deps has not installed it (failing it under HONE_REQUIRE_NODE=1).
func requirePackage(t *testing.T, pkg string, path ...string) string {
	t.Helper()
	p, _ := filepath.Abs(filepath.Join(append([]string{"node_modules"}, path...)...))
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("HONE_REQUIRE_NODE") == "1" {
			t.Fatalf("acceptance/node_modules has no %s; run make deps: %v", pkg, err)
		}
		t.Skipf("acceptance/node_modules has no %s; run make deps: %v", pkg, err)
	}
	return p
}
