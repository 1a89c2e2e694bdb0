package peers

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/proxy"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// exchange is one request hone sent to vLLM and vLLM's answer, byte for byte.
type exchange struct {
	path     string
	request  []byte
	response []byte
}

// tee sits between hone and vLLM and keeps every exchange, so a test knows
// exactly what vLLM sent hone.
type tee struct {
	url string
	mu  sync.Mutex
	ex  []*exchange
}

func newTee(t *testing.T, upstream string) *tee {
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	tp := &tee{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	rp.ModifyResponse = func(resp *http.Response) error {
		ex := resp.Request.Context().Value(exKey{}).(*exchange)
		resp.Body = &teeBody{ReadCloser: resp.Body, ex: ex, tp: tp}
		return nil
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		ex := &exchange{path: r.URL.Path, request: body}
		rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), exKey{}, ex)))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	tp.url = "http://" + ln.Addr().String()
	return tp
}

type exKey struct{}

type teeBody struct {
	io.ReadCloser
	ex  *exchange
	buf bytes.Buffer
	tp  *tee
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.buf.Write(p[:n])
	return n, err
}

func (b *teeBody) Close() error {
	b.ex.response = bytes.Clone(b.buf.Bytes())
	b.tp.mu.Lock()
	b.tp.ex = append(b.tp.ex, b.ex)
	b.tp.mu.Unlock()
	return b.ReadCloser.Close()
}

func (tp *tee) count() int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return len(tp.ex)
}

// next waits for the first exchange on path after the first n to finish
// (the proxy closes vLLM's body a moment after hone has answered its client;
// hone's health checks pass through the tee too) and returns it.
func (tp *tee) next(n int, path string) *exchange {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		tp.mu.Lock()
		for _, ex := range tp.ex[n:] {
			if ex.path == path {
				tp.mu.Unlock()
				return ex
			}
		}
		tp.mu.Unlock()
	}
	return nil
}

// startHone runs hone's data plane in front of engineURL with an in-memory
// recorder, as acceptance/ does.
func startHone(t *testing.T, engineURL string) (string, *proxy.MemRecorder) {
	return startHoneOpts(t, engineURL, func(*proxy.Options) {})
}

// volatile are the fields that differ between two otherwise equal vLLM
// answers: response ids and creation times.
var volatile = regexp.MustCompile(`"id":"(chatcmpl|cmpl)-[^"]*"|"created":[0-9]+`)

func normalize(b []byte) string {
	return volatile.ReplaceAllStringFunc(string(b), func(s string) string {
		if strings.HasPrefix(s, `"created"`) {
			return `"created":0`
		}
		return `"id":"ID"`
	})
}

// tokens is what vLLM said about the tokens of one answer.
type tokens struct {
	prompt  []int32         // chat: top level; completions: choice 0's
	ids     map[int][]int32 // per choice index
	lps     map[int][]float64
	prompts map[int][]int32 // completions: per choice
}

// vllmTokens reads the prompt/completion token ids and sampled-token
// logprobs out of a vLLM answer (JSON, or SSE for streams).
func vllmTokens(body []byte, stream bool) tokens {
	tk := tokens{ids: map[int][]int32{}, lps: map[int][]float64{}, prompts: map[int][]int32{}}
	objs := [][]byte{body}
	if stream {
		objs = nil
		for _, ev := range strings.Split(string(body), "\n\n") {
			ev = strings.TrimSpace(ev)
			if !strings.HasPrefix(ev, "data: ") || ev == "data: [DONE]" {
				continue
			}
			objs = append(objs, []byte(strings.TrimPrefix(ev, "data: ")))
		}
	}
	ints := func(r gjson.Result) []int32 {
		var out []int32
		for _, v := range r.Array() {
			out = append(out, int32(v.Int()))
		}
		return out
	}
	for _, o := range objs {
		if p := gjson.GetBytes(o, "prompt_token_ids"); p.IsArray() {
			tk.prompt = ints(p)
		}
		for _, ch := range gjson.GetBytes(o, "choices").Array() {
			i := int(ch.Get("index").Int())
			if p := ch.Get("prompt_token_ids"); p.IsArray() {
				tk.prompts[i] = ints(p)
				if i == 0 {
					tk.prompt = tk.prompts[i]
				}
			}
			tk.ids[i] = append(tk.ids[i], ints(ch.Get("token_ids"))...)
			for _, lp := range ch.Get("logprobs.content").Array() { // chat
				tk.lps[i] = append(tk.lps[i], lp.Get("logprob").Float())
			}
			for _, lp := range ch.Get("logprobs.token_logprobs").Array() { // completions
				tk.lps[i] = append(tk.lps[i], lp.Float())
			}
		}
	}
	return tk
}

// waitCall waits for the recorder to hold n calls and returns the n-th.
func waitCall(t *testing.T, rec *proxy.MemRecorder, n int) *capture.Call {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if calls := rec.Calls(); len(calls) >= n {
			return calls[n-1]
		}
		select {
		case <-rec.Added():
		case <-deadline:
			t.Fatalf("hone recorded %d calls, want %d", len(rec.Calls()), n)
		}
	}
}

// TestWireFidelity sends chat and completion requests, streamed and not,
// through hone to a real vLLM and checks that
//   - the client gets, byte for byte, what vLLM sends for the same request
//     sent to it directly (ids and creation times aside): what hone injected
//     (logprobs, token ids, the usage chunk) is gone unless asked for;
//   - the call hone recorded holds exactly the prompt and completion token
//     ids and logprobs vLLM sent hone;
//   - those equal what vLLM answers directly when asked for return_token_ids
//     and logprobs at temperature 0.
func TestWireFidelity(t *testing.T) {
	v := needVLLM(t)
	tp := newTee(t, v.URL)
	honeURL, rec := startHone(t, tp.url)
	chat := `{"model":"tiny","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Name a colour."}],"max_tokens":12,"temperature":0`
	comp := `{"model":"tiny","prompt":"The colour of the sky is","max_tokens":12,"temperature":0`
	cases := []wireCase{
		{"chat", "/v1/chat/completions", chat + `}`, false, false},
		{"chat_stream", "/v1/chat/completions", chat + `,"stream":true}`, true, false},
		{"chat_stream_usage", "/v1/chat/completions", chat + `,"stream":true,"stream_options":{"include_usage":true}}`, true, false},
		{"chat_asked", "/v1/chat/completions", chat + `,"logprobs":true,"return_token_ids":true}`, false, true},
		{"chat_stream_asked", "/v1/chat/completions", chat + `,"stream":true,"logprobs":true,"return_token_ids":true}`, true, true},
		{"completions", "/v1/completions", comp + `}`, false, false},
		{"completions_stream", "/v1/completions", comp + `,"stream":true}`, true, false},
		{"completions_asked", "/v1/completions", comp + `,"logprobs":1,"return_token_ids":true}`, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkWire(t, v, tp, honeURL, rec, c) })
	}
}

// wireCase is one request a client sends through hone.
type wireCase struct {
	name, path, body string
	stream           bool
	askedAll         bool // the client asked for logprobs and token ids itself
}

// checkWire sends c through hone (honeURL, in front of the tee tp in front
// of v) and checks what the client got and what hone recorded (see
// TestWireFidelity).
func checkWire(t *testing.T, v *VLLM, tp *tee, honeURL string, rec *proxy.MemRecorder, c wireCase) {
	t.Helper()
	ctx := context.Background()
	n, m := len(rec.Calls()), tp.count()
	status, hdr, got, err := Post(ctx, honeURL+c.path, []byte(c.body), nil)
	if err != nil || status != 200 {
		t.Fatalf("through hone: %d %v\n%s", status, err, got)
	}
	call := waitCall(t, rec, n+1)
	up := tp.next(m, c.path)
	if up == nil {
		t.Fatalf("the tee saw no exchange on %s", c.path)
	}
	t.Logf("hone sent vLLM: %s", up.request)
	if hdr.Get("X-Hone-Call") == "" {
		t.Errorf("no X-Hone-Call header")
	}
	// vLLM names its answer after the X-Request-Id hone sends, the call's
	// id: what lets capture find a Trinity msg_id without an index entry.
	prefix := "chatcmpl-"
	if c.path == "/v1/completions" {
		prefix = "cmpl-"
	}
	if call.ResponseID != prefix+call.ID || !strings.Contains(string(got), `"id":"`+prefix+call.ID+`"`) {
		t.Errorf("vLLM's answer through hone has id %q (recorded %q), want %s%s", gjson.GetBytes(got, "id"), call.ResponseID, prefix, call.ID)
	}

	// 1. The client sees vLLM's own answer to its own request.
	usageInjected := c.stream && !strings.Contains(c.body, `"include_usage":true`)
	if c.stream {
		// hone passes every event of vLLM's stream, less the usage
		// chunk it asked for itself.
		want := strings.Count(string(up.response), "\n\n")
		if usageInjected {
			want--
		}
		if c.path == "/v1/chat/completions" && !gjson.Get(c.body, "logprobs").Bool() && !gjson.Get(c.body, "return_token_ids").Bool() {
			// ... and the chunks vLLM sent only to carry the logprobs or
			// token ids hone asked for (nothing in their delta)
			want -= emptyDeltas(up.response)
		}
		if n := strings.Count(string(got), "\n\n"); n != want {
			t.Errorf("client got %d stream events, vLLM sent hone %d (usage chunk injected: %v)\nvLLM sent hone:\n%s\nclient got:\n%s", n, want, usageInjected, up.response, got)
		}
	}
	sameAsDirect(t, v.URL+c.path, c.body, got, usageInjected)

	// 2. The record equals what vLLM sent hone: tokens, and the parsed
	// content, reasoning and tool calls.
	sent := vllmTokens(up.response, c.stream)
	checkRecord(t, "vLLM's answer to hone", call, sent, c.path == "/v1/completions", 0)
	checkParsed(t, call, up.response, c.stream)

	// 3. ... which equals vLLM's direct answer with ids and logprobs.
	ask := strings.TrimSuffix(c.body, "}")
	if !c.askedAll {
		if c.path == "/v1/completions" {
			ask += `,"logprobs":1,"return_token_ids":true`
		} else {
			ask += `,"logprobs":true,"return_token_ids":true`
		}
	}
	ask = strings.Replace(ask, `"stream":true`, `"stream":false`, 1) + "}"
	ask = strings.Replace(ask, `,"stream_options":{"include_usage":true}`, "", 1)
	status, _, ref, err := Post(ctx, v.URL+c.path, []byte(ask), nil)
	if err != nil || status != 200 {
		t.Fatalf("direct with token ids: %d %v\n%s", status, err, ref)
	}
	checkRecord(t, "vLLM's direct answer with return_token_ids", call, vllmTokens(ref, false), c.path == "/v1/completions", 1e-5)
}

// fingerprint is the field vLLM stamps on a stream's terminal chunks when
// no usage chunk follows, and on the usage chunk otherwise.
var fingerprint = regexp.MustCompile(`,"system_fingerprint":"[^"]*"`)

// sameAsDirect sends body to vLLM directly and compares its answer with got,
// the client's bytes through hone, ids and creation times aside. vLLM
// coalesces stream events when its API server falls behind the engine, so a
// stream is fetched again (up to 4 times) until it has as many events as got;
// if the bytes still differ (another count, or as many events split at other
// tokens), the streams are compared event by event with the generated text
// taken out (canonStream) and the text compared whole.
//
// usageInjected: hone added stream_options.include_usage for a stream whose
// client did not ask for usage. vLLM then stamps system_fingerprint on the
// usage chunk instead of the terminal chunk, and hone, which drops that
// chunk, must put the field back on the terminal chunk (proxy/stream.go,
// release): a client that lost it fails the test, saying so.
func sameAsDirect(t *testing.T, url, body string, got []byte, usageInjected bool) {
	t.Helper()
	g := normalize(got)
	var d string
	for attempt := 0; attempt < 4; attempt++ {
		status, _, direct, err := Post(context.Background(), url, []byte(body), nil)
		if err != nil || status != 200 {
			t.Fatalf("direct: %d %v\n%s", status, err, direct)
		}
		d = normalize(direct)
		if !strings.Contains(body, `"stream":true`) || strings.Count(d, "\n\n") == strings.Count(g, "\n\n") {
			break
		}
		t.Logf("vLLM coalesced the direct stream differently (%d events, %d through hone); again", strings.Count(d, "\n\n"), strings.Count(g, "\n\n"))
	}
	if g == d {
		return
	}
	if gjson.Get(body, "n").Int() > 1 && byChoice(g) == byChoice(d) {
		return // vLLM interleaves the choices' events in no fixed order
	}
	if strings.Contains(body, `"stream":true`) {
		// vLLM coalesces tokens into events by its own timing: the same
		// number of events can still split the text at other places
		gc, dc := canonStream(g), canonStream(d)
		if gjson.Get(body, "n").Int() > 1 { // choices interleaved and coalesced differently
			gc, dc = canonStream(strings.ReplaceAll(byChoice(g), "\n", "\n\n")), canonStream(strings.ReplaceAll(byChoice(d), "\n", "\n\n"))
		}
		if gc == dc {
			return
		}
		g, d = gc, dc
	}
	if usageInjected && g == fingerprint.ReplaceAllString(d, "") {
		t.Error("hone injected stream_options.include_usage and dropped the usage chunk without putting back " +
			"the system_fingerprint vLLM moved onto it: the client lost it")
		return
	}
	t.Errorf("client bytes through hone differ from vLLM's direct answer (ids and times aside) %s\nthrough hone:\n%s\ndirect:\n%s", firstDiff(g, d), g, d)
}

// canonStream is a stream with the generated text, tool-call arguments and
// per-token arrays taken out of every event (consecutive equal events then
// collapse), and the text of each choice appended whole: equal for two
// streams that differ only in how vLLM coalesced tokens into events.
func canonStream(s string) string {
	var events []string
	text := map[string]*strings.Builder{}
	var keys []string
	add := func(k, v string) {
		if text[k] == nil {
			text[k] = &strings.Builder{}
			keys = append(keys, k)
		}
		text[k].WriteString(v)
	}
	for _, ev := range strings.Split(s, "\n\n") {
		ev = strings.TrimSpace(ev)
		if !strings.HasPrefix(ev, "data: {") {
			if ev != "" {
				events = append(events, ev)
			}
			continue
		}
		js := strings.TrimPrefix(ev, "data: ")
		for _, ch := range gjson.Get(js, "choices").Array() {
			i := ch.Get("index").String()
			for _, f := range []string{"text", "delta.content", "delta.reasoning", "delta.reasoning_content"} {
				if r := ch.Get(f); r.Type == gjson.String {
					add(i+"."+f, r.String())
				}
			}
			for _, f := range []string{"token_ids", "logprobs.content", "logprobs.tokens", "logprobs.token_logprobs", "logprobs.top_logprobs", "logprobs.text_offset"} {
				if r := ch.Get(f); r.IsArray() {
					add(i+"."+f, r.Raw[1:len(r.Raw)-1]+",")
				}
			}
			for _, tc := range ch.Get("delta.tool_calls").Array() {
				if r := tc.Get("function.arguments"); r.Type == gjson.String {
					add(i+".tool_calls."+tc.Get("index").String()+".arguments", r.String())
				}
			}
		}
		blank := js
		for n, ch := range gjson.Get(js, "choices").Array() {
			for _, f := range []string{"text", "delta.content", "delta.reasoning", "delta.reasoning_content", "token_ids",
				"logprobs.content", "logprobs.tokens", "logprobs.token_logprobs", "logprobs.top_logprobs", "logprobs.text_offset"} {
				if r := ch.Get(f); r.Type == gjson.String || r.IsArray() {
					blank, _ = sjson.Set(blank, fmt.Sprintf("choices.%d.%s", n, f), "…")
				}
			}
			for k, tc := range ch.Get("delta.tool_calls").Array() {
				if tc.Get("function.arguments").Type == gjson.String {
					blank, _ = sjson.Set(blank, fmt.Sprintf("choices.%d.delta.tool_calls.%d.function.arguments", n, k), "…")
				}
			}
		}
		if len(events) == 0 || events[len(events)-1] != blank {
			events = append(events, blank)
		}
	}
	for _, k := range keys {
		events = append(events, k+": "+text[k].String())
	}
	return strings.Join(events, "\n")
}

// checkRecord compares the recorded call's token ids and logprobs with
// vLLM's. tol bounds |logprob difference| (0: equal as float32).
func checkRecord(t *testing.T, what string, call *capture.Call, want tokens, completions bool, tol float64) {
	t.Helper()
	if len(want.prompt) == 0 {
		t.Fatalf("%s has no prompt token ids", what)
	}
	prompt := call.PromptIDs
	if completions && len(call.Choices) > 0 && len(call.Choices[0].PromptIDs) > 0 {
		prompt = call.Choices[0].PromptIDs
	}
	if !slices.Equal(prompt, want.prompt) {
		t.Errorf("recorded prompt ids differ from %s:\nrecorded %v\nvLLM     %v", what, prompt, want.prompt)
	}
	if len(call.Choices) != len(want.ids) {
		t.Fatalf("recorded %d choices, %s has %d", len(call.Choices), what, len(want.ids))
	}
	for _, ch := range call.Choices {
		ids := want.ids[ch.Index]
		if len(ids) == 0 {
			t.Errorf("choice %d: %s has no completion token ids", ch.Index, what)
		}
		if !slices.Equal(ch.TokenIDs, ids) {
			t.Errorf("choice %d: recorded completion ids differ from %s:\nrecorded %v\nvLLM     %v", ch.Index, what, ch.TokenIDs, ids)
		}
		lps := want.lps[ch.Index]
		if len(ch.Logprobs) != len(lps) {
			t.Errorf("choice %d: recorded %d logprobs, %s has %d", ch.Index, len(ch.Logprobs), what, len(lps))
			continue
		}
		worst := 0.0
		for i, lp := range lps {
			d := math.Abs(float64(ch.Logprobs[i]) - lp)
			if tol == 0 {
				if ch.Logprobs[i] != float32(lp) {
					t.Errorf("choice %d token %d: recorded logprob %v, %s %v", ch.Index, i, ch.Logprobs[i], what, lp)
				}
				continue
			}
			worst = max(worst, d)
		}
		if worst > tol {
			t.Errorf("choice %d: logprobs differ from %s by up to %g (> %g)", ch.Index, what, worst, tol)
		}
	}
}

// firstDiff names the first line (SSE event or JSON body) where a and b
// differ, and the bytes around the first difference in it.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < max(len(al), len(bl)); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x == y {
			continue
		}
		j := 0
		for j < len(x) && j < len(y) && x[j] == y[j] {
			j++
		}
		lo := max(0, j-60)
		return fmt.Sprintf("at line %d, byte %d:\n  through hone: ...%s\n  direct:       ...%s", i+1, j, clip(x, lo, j+80), clip(y, lo, j+80))
	}
	return "(equal)"
}

func clip(s string, lo, hi int) string {
	return s[min(lo, len(s)):min(hi, len(s))]
}

// parsedChoice is what vLLM said one choice was: text, reasoning, tool
// calls (name and arguments, in order) and finish reason.
type parsedChoice struct {
	content, reasoning, finish string
	tools                      []string // "name(arguments)"
}

// vllmParsed reads the parsed output of every choice out of a vLLM answer
// (JSON, or SSE for streams, where deltas are concatenated).
func vllmParsed(body []byte, stream bool) map[int]*parsedChoice {
	out := map[int]*parsedChoice{}
	objs := [][]byte{body}
	if stream {
		objs = nil
		for _, ev := range strings.Split(string(body), "\n\n") {
			ev = strings.TrimSpace(ev)
			if strings.HasPrefix(ev, "data: {") {
				objs = append(objs, []byte(strings.TrimPrefix(ev, "data: ")))
			}
		}
	}
	for _, o := range objs {
		for _, ch := range gjson.GetBytes(o, "choices").Array() {
			i := int(ch.Get("index").Int())
			p := out[i]
			if p == nil {
				p = &parsedChoice{}
				out[i] = p
			}
			msg := ch.Get("message")
			if stream {
				msg = ch.Get("delta")
			}
			p.content += ch.Get("text").String() + msg.Get("content").String()
			p.reasoning += msg.Get("reasoning").String() + msg.Get("reasoning_content").String()
			for _, tc := range msg.Get("tool_calls").Array() {
				k := len(p.tools) - 1
				if !stream || tc.Get("function.name").Exists() {
					p.tools = append(p.tools, tc.Get("function.name").String()+"(")
					k++
				}
				if k >= 0 {
					p.tools[k] += tc.Get("function.arguments").String()
				}
			}
			if f := ch.Get("finish_reason"); f.Type == gjson.String {
				p.finish = f.String()
			}
		}
	}
	for _, p := range out {
		for k := range p.tools {
			p.tools[k] += ")"
		}
	}
	return out
}

// checkParsed compares the recorded content, reasoning, tool calls and
// finish reasons with vLLM's answer to hone.
func checkParsed(t *testing.T, call *capture.Call, body []byte, stream bool) {
	t.Helper()
	want := vllmParsed(body, stream)
	for _, ch := range call.Choices {
		w := want[ch.Index]
		if w == nil {
			t.Errorf("choice %d: not in vLLM's answer", ch.Index)
			continue
		}
		var tools []string
		for _, tc := range ch.ToolCalls {
			tools = append(tools, tc.Name+"("+tc.Arguments+")")
		}
		if ch.Content != w.content || ch.Reasoning != w.reasoning || ch.FinishReason != w.finish || !slices.Equal(tools, w.tools) {
			t.Errorf("choice %d: recorded content %q reasoning %q tools %q finish %q;\nvLLM said content %q reasoning %q tools %q finish %q",
				ch.Index, ch.Content, ch.Reasoning, tools, ch.FinishReason, w.content, w.reasoning, w.tools, w.finish)
		}
	}
}

// emptyDeltas counts the events of a chat stream whose choices have an
// empty delta and do not finish.
func emptyDeltas(stream []byte) int {
	n := 0
	for _, ev := range strings.Split(string(stream), "\n\n") {
		ev = strings.TrimSpace(ev)
		if !strings.HasPrefix(ev, "data: {") {
			continue
		}
		chs := gjson.Get(ev[6:], "choices").Array()
		empty := len(chs) > 0
		for _, ch := range chs {
			empty = empty && ch.Get("delta").Raw == "{}" && ch.Get("finish_reason").Type != gjson.String
		}
		if empty {
			n++
		}
	}
	return n
}

// byChoice is a stream's events grouped by choice index (in order within a
// choice), then the events without choices in order.
func byChoice(s string) string {
	groups := map[int64][]string{}
	var rest []string
	for _, ev := range strings.Split(s, "\n\n") {
		ev = strings.TrimSpace(ev)
		if ch := gjson.Get(strings.TrimPrefix(ev, "data: "), "choices.0.index"); strings.HasPrefix(ev, "data: {") && ch.Exists() {
			groups[ch.Int()] = append(groups[ch.Int()], ev)
			continue
		}
		rest = append(rest, ev)
	}
	var out []string
	for i := int64(0); i < int64(len(groups)); i++ {
		out = append(out, groups[i]...)
	}
	return strings.Join(append(out, rest...), "\n")
}
