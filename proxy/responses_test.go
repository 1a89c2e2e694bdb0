package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/proxy/internal/sse"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tidwall/gjson"
)

// updateGolden rewrites golden files instead of comparing (HONE_UPDATE_GOLDEN=1).
var updateGolden = os.Getenv("HONE_UPDATE_GOLDEN") == "1"

func testServer() *Server { return &Server{responses: newConversations(100, time.Hour)} }

// randomIDs are the ids and times a translation makes up.
var randomIDs = regexp.MustCompile(`"(resp|msg|fc|ctc|rs|call)_[0-9a-f]{32}"|"created_at":\d+`)

func normalize(b []byte) []byte {
	n := map[string]string{}
	return randomIDs.ReplaceAllFunc(b, func(m []byte) []byte {
		if bytes.HasPrefix(m, []byte(`"created_at"`)) {
			return []byte(`"created_at":0`)
		}
		if _, ok := n[string(m)]; !ok {
			n[string(m)] = string(m[:bytes.IndexByte(m, '_')+1]) + strings.Repeat("x", 3) + string(rune('0'+len(n)%10)) + `"`
		}
		return []byte(n[string(m)])
	})
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if updateGolden {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (HONE_UPDATE_GOLDEN=1 writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs:\n got %s\nwant %s", path, got, want)
	}
}

func indentJSON(t *testing.T, b []byte) []byte {
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", " "); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	return append(out.Bytes(), '\n')
}

// TestResponsesGolden translates each request in testdata/responses onto
// chat completions, and the engine's answer (a vLLM fixture, whole and
// streamed) back into the Responses API, against golden files.
func TestResponsesGolden(t *testing.T) {
	dirs, _ := filepath.Glob("testdata/responses/*")
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			req, err := os.ReadFile(filepath.Join(dir, "request.json"))
			if err != nil {
				t.Fatal(err)
			}
			s := testServer()
			tr, aerr := responsesSurface{}.translate(s, "", req)
			if aerr != nil {
				t.Fatalf("translate: %v", aerr)
			}
			golden(t, filepath.Join(dir, "chat.json"), indentJSON(t, tr.body))
			up, _ := os.ReadFile(filepath.Join(dir, "upstream")) // "<whole fixture|-> <stream fixture|->"
			fx := strings.Fields(string(up))
			if body, err := os.ReadFile(fixture(t, fx[0], "upstream.json")); fx[0] != "-" && err == nil {
				golden(t, filepath.Join(dir, "response.json"), indentJSON(t, normalize(tr.enc.body(body, 200))))
			}
			if events, err := os.ReadFile(fixture(t, fx[1], "upstream.sse")); fx[1] != "-" && err == nil {
				tr, _ = responsesSurface{}.translate(s, "", req)
				golden(t, filepath.Join(dir, "response.sse"), normalize(encodeStream(t, tr.enc, events)))
			}
		})
	}
}

// encodeStream feeds an engine SSE stream through an encoder as the stream
// body does.
func encodeStream(t *testing.T, enc encoder, events []byte) []byte {
	var out []byte
	for _, ev := range splitEvents(events) {
		data, ok := sse.Data(ev)
		if !ok {
			continue
		}
		if string(data) == "[DONE]" {
			out = append(out, enc.end()...)
			continue
		}
		out = append(out, enc.event(data)...)
	}
	checkResponsesEvents(t, out)
	return out
}

// checkResponsesEvents checks the invariants clients rely on: every event
// names its type in an event: line and in its data, sequence numbers count
// up from 0, deltas name an item that was added and not yet done, and the
// stream ends with response.completed or response.incomplete.
func checkResponsesEvents(t *testing.T, out []byte) {
	t.Helper()
	open := map[string]bool{}
	last := ""
	for i, ev := range splitEvents(out) {
		lines := strings.SplitN(string(ev), "\n", 2)
		typ := strings.TrimPrefix(lines[0], "event: ")
		data, ok := sse.Data(ev)
		d := gjson.ParseBytes(data)
		if !ok || d.Get("type").String() != typ || d.Get("sequence_number").Int() != int64(i) {
			t.Fatalf("event %d malformed: %q", i, ev)
		}
		switch {
		case typ == "response.output_item.added":
			open[d.Get("item.id").String()] = true
		case typ == "response.output_item.done":
			if !open[d.Get("item.id").String()] {
				t.Fatalf("event %d: done for an item never added: %s", i, data)
			}
			delete(open, d.Get("item.id").String())
		case strings.HasSuffix(typ, ".delta"):
			if !open[d.Get("item_id").String()] {
				t.Fatalf("event %d: delta for an item not open: %s", i, data)
			}
		}
		last = typ
	}
	if len(open) > 0 || (last != "response.completed" && last != "response.incomplete") {
		t.Fatalf("stream ends with %s, items left open %v", last, open)
	}
}

func TestResponsesBadInput(t *testing.T) {
	s := testServer()
	for name, body := range map[string]string{
		"no model":             `{"input":"hi"}`,
		"no input":             `{"model":"m"}`,
		"input number":         `{"model":"m","input":3}`,
		"unknown item":         `{"model":"m","input":[{"type":"item_reference","id":"x"}]}`,
		"unknown part":         `{"model":"m","input":[{"role":"user","content":[{"type":"input_audio"}]}]}`,
		"bad role":             `{"model":"m","input":[{"role":"tool","content":"x"}]}`,
		"unknown call id":      `{"model":"m","input":[{"type":"function_call_output","call_id":"nope","output":"1"}]}`,
		"unknown tool type":    `{"model":"m","input":"hi","tools":[{"type":"teleport"}]}`,
		"bad tool choice":      `{"model":"m","input":"hi","tool_choice":"sometimes"}`,
		"string temperature":   `{"model":"m","input":"hi","temperature":"hot"}`,
		"unknown previous":     `{"model":"m","input":"hi","previous_response_id":"resp_nope"}`,
		"function_call no id":  `{"model":"m","input":[{"type":"function_call","name":"f","arguments":"{}"}]}`,
		"instructions not str": `{"model":"m","input":"hi","instructions":[1]}`,
	} {
		if _, err := (responsesSurface{}).translate(s, "", []byte(body)); err == nil || err.status/100 != 4 {
			t.Errorf("%s: %v, want a 4xx", name, err)
		}
	}
	// an error that quotes the request quotes a bounded part of it
	huge := strings.Repeat("é", 1<<19)
	for name, body := range map[string]string{
		"huge previous id": `{"model":"m","input":"hi","previous_response_id":"` + huge + `"}`,
		"huge item type":   `{"model":"m","input":[{"type":"` + huge + `"}]}`,
		"huge role":        `{"model":"m","input":[{"role":"` + huge + `","content":"x"}]}`,
	} {
		_, err := (responsesSurface{}).translate(s, "", []byte(body))
		if err == nil || len(err.msg) > maxEchoMessage+3 || !utf8.ValidString(err.msg) {
			t.Errorf("%s: a %d-byte message (valid UTF-8: %v)", name, len(err.msg), err == nil || utf8.ValidString(err.msg))
		}
	}
	if err := badMessages("block type '" + huge + "'"); len(err.msg) > maxEchoMessage+3 || !utf8.ValidString(err.msg) {
		t.Errorf("Messages: a %d-byte message", len(err.msg))
	}
}

// TestResponsesPreviousResponse continues a conversation by id: the
// follow-up's chat messages are the stored ones plus its own input.
func TestResponsesPreviousResponse(t *testing.T) {
	s := testServer()
	tr, _ := responsesSurface{}.translate(s, "", []byte(`{"model":"m","instructions":"Be brief.","input":"What is 17 * 23?",
		"tools":[{"type":"function","name":"calculator","parameters":{}}]}`))
	body, _ := os.ReadFile(fixture(t, "chat_tools", "upstream.json"))
	first := gjson.ParseBytes(tr.enc.body(body, 200))
	call := first.Get(`output.#(type=="function_call")`)
	follow := `{"model":"m","instructions":"Be kind.","previous_response_id":"` + first.Get("id").String() +
		`","input":[{"type":"function_call_output","call_id":"` + call.Get("call_id").String() + `","output":"391"}]}`
	tr2, err := responsesSurface{}.translate(s, "", []byte(follow))
	if err != nil {
		t.Fatal(err)
	}
	msgs := gjson.GetBytes(tr2.body, "messages")
	roles := []string{}
	msgs.ForEach(func(_, m gjson.Result) bool { roles = append(roles, m.Get("role").String()); return true })
	if strings.Join(roles, ",") != "system,user,assistant,tool" || msgs.Get("0.content").String() != "Be kind." ||
		msgs.Get("2.tool_calls.0.function.arguments").String() != `{"expression": "17 * 23"}` {
		t.Fatalf("follow-up messages %s", msgs.Raw)
	}
	if gjson.GetBytes(tr2.enc.body(body, 200), "previous_response_id").String() != first.Get("id").String() {
		t.Fatal("previous_response_id not echoed")
	}
}

// TestResponsesItemReference: an item_reference to an output item of an
// earlier response (what the AI SDK's Responses provider sends for its
// earlier answers unless store is false) stands for that item in full: the
// engine gets the messages a previous_response_id would have given it. An
// item hone does not keep is a 404, as OpenAI answers it.
func TestResponsesItemReference(t *testing.T) {
	s := testServer()
	const first = `{"model":"m","input":"What is 17 * 23?","tools":[{"type":"function","name":"calculator","parameters":{}}]}`
	tr, _ := responsesSurface{}.translate(s, "alice", []byte(first))
	body, _ := os.ReadFile(fixture(t, "chat_tools", "upstream.json"))
	out := gjson.ParseBytes(tr.enc.body(body, 200))
	call := out.Get(`output.#(type=="function_call")`)
	var refs []string
	out.Get("output").ForEach(func(_, it gjson.Result) bool {
		refs = append(refs, `{"type":"item_reference","id":"`+it.Get("id").String()+`"}`)
		return true
	})
	result := `{"type":"function_call_output","call_id":"` + call.Get("call_id").String() + `","output":"391"}`
	byRef := `{"model":"m","input":[{"role":"user","content":"What is 17 * 23?"},` + strings.Join(refs, ",") + `,` + result + `]}`
	byPrev := `{"model":"m","previous_response_id":"` + out.Get("id").String() + `","input":[` + result + `]}`
	messages := func(owner, req string) (string, *apiError) {
		tr, err := responsesSurface{}.translate(s, owner, []byte(req))
		if err != nil {
			return "", err
		}
		return gjson.GetBytes(tr.body, "messages").Raw, nil
	}
	got, err := messages("alice", byRef)
	if err != nil {
		t.Fatalf("item references to %d output items: %v", len(refs), err)
	}
	want, _ := messages("alice", byPrev)
	if got != want || !strings.Contains(got, `"tool_calls"`) {
		t.Fatalf("messages from item references\n%s\nwant those from previous_response_id\n%s", got, want)
	}
	for name, c := range map[string]struct{ owner, req, param string }{
		"another owner's item":   {"bob", byRef, "input"},
		"an unknown item":        {"alice", `{"model":"m","input":[{"type":"item_reference","id":"msg_nope"}]}`, "input"},
		"a response id":          {"alice", `{"model":"m","input":[{"type":"item_reference","id":"` + out.Get("id").String() + `"}]}`, "input"},
		"an item id as previous": {"alice", `{"model":"m","input":"hi","previous_response_id":"` + call.Get("id").String() + `"}`, "previous_response_id"},
	} {
		if _, err := messages(c.owner, c.req); err == nil || err.status != 404 || err.param != c.param {
			t.Errorf("%s: %v, want a 404 naming %s", name, err, c.param)
		}
	}
	// an item named twice is refused, as OpenAI refuses it, and the items
	// references stand for are bounded in bytes by max_body_bytes
	twice := `{"model":"m","input":[` + refs[0] + `,` + refs[0] + `]}`
	if _, err := messages("alice", twice); err == nil || err.status != 400 || !strings.Contains(err.msg, "Duplicate item") {
		t.Fatalf("an item referenced twice: %v, want 400", err)
	}
	room := s.opts.MaxBodyBytes
	s.opts.MaxBodyBytes = 10
	_, err = messages("alice", byRef)
	s.opts.MaxBodyBytes = room
	if err == nil || err.status != 413 {
		t.Fatalf("references to more bytes than max_body_bytes: %v, want 413", err)
	}
	s.opts.MaxBodyBytes = 10
	_, err = messages("alice", byPrev)
	s.opts.MaxBodyBytes = room
	if err == nil || err.status != 413 || err.param != "previous_response_id" {
		t.Fatalf("a conversation of more bytes than max_body_bytes: %v, want 413", err)
	}
	// store false keeps neither the conversation nor its items
	tr, _ = responsesSurface{}.translate(s, "alice", []byte(`{"model":"m","store":false,"input":"hi"}`))
	plain, _ := os.ReadFile(fixture(t, "chat", "upstream.json"))
	id := gjson.GetBytes(tr.enc.body(plain, 200), "output.0.id").String()
	if _, err := messages("alice", `{"model":"m","input":[{"type":"item_reference","id":"`+id+`"}]}`); err == nil || err.status != 404 {
		t.Fatalf("a reference to an item of a response made with store false: %v, want 404", err)
	}
}

// TestResponsesBadInputThroughHone: a bad Responses request gets an
// API-shaped 4xx, reaches no engine, records nothing, and hone keeps serving.
func TestResponsesBadInputThroughHone(t *testing.T) {
	stub := newStub(t)
	stub.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
	h := startHone(t, nil, stub)
	for _, body := range []string{`{"model":`, `{"model":"m","input":[{"type":"item_reference","id":"x"}]}`,
		`{"model":"m","input":[{"type":"function_call_output","call_id":"nope","output":"1"}]}`,
		`{"model":"m","input":"hi","previous_response_id":"resp_nope"}`} {
		r := post(t, h.url, "/v1/responses", []byte(body), nil)
		if r.status/100 != 4 {
			t.Fatalf("%s: status %d", body, r.status)
		}
		wantOpenAIError(t, r, r.status)
	}
	if stub.served.Load() != 0 || len(h.rec.Calls()) != 0 {
		t.Fatalf("bad requests reached the engine (%d) or the recorder (%d)", stub.served.Load(), len(h.rec.Calls()))
	}
	r := post(t, h.url, "/v1/responses", []byte(`{"model":"m","input":"hi"}`), nil)
	if r.status != 200 || gjson.GetBytes(r.body, "object").String() != "response" {
		t.Fatalf("after bad input: %d %s", r.status, r.body)
	}
	// the answer's id is made from the call's, and the call is recorded with it
	id := gjson.GetBytes(r.body, "id").String()
	if call := r.header.Get("X-Hone-Call"); id != "resp_"+call {
		t.Fatalf("response id %q, want resp_ and the call's id %q", id, call)
	}
	if calls := waitCalls(t, h.rec, 1); calls[0].ResponseID != id {
		t.Fatalf("recorded response id %q, want the one the agent saw, %q", calls[0].ResponseID, id)
	}
	// the call is counted under the API the agent called, not the engine's
	if n := testutil.ToFloat64(h.s.m.requests.WithLabelValues("responses", "200")); n != 1 {
		t.Fatalf(`hone_requests_total{route="responses",status="200"} = %v, want 1`, n)
	}
	if n := testutil.ToFloat64(h.s.m.requests.WithLabelValues("chat", "200")); n != 0 {
		t.Fatalf(`hone_requests_total{route="chat",status="200"} = %v after a Responses call, want 0`, n)
	}
}

// A Responses conversation of a session capture skips (sampling,
// X-Hone-Train: 0) is kept in memory only: previous_response_id continues
// it, and the store, after a restart, holds none of its content. A captured
// session's conversation is in the store.
func TestSkippedConversationNotStored(t *testing.T) {
	dir := t.TempDir()
	co := capture.DefaultOptions()
	co.Selection.SampleRate = 0
	store, err := capture.Open(dir, co, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	stub := newStub(t)
	stub.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
	h := startHoneWith(t, store, nil, stub)
	h.s.SetConversations(store.Conversations(time.Hour, 16))
	id := func(hdr map[string]string, body string) string {
		t.Helper()
		r := post(t, h.url, "/v1/responses", []byte(body), hdr)
		if r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		return gjson.GetBytes(r.body, "id").String()
	}
	skipped := id(map[string]string{"X-Hone-Train": "0"}, `{"model":"Qwen/Qwen3-0.6B","input":"do not keep me"}`)
	id(nil, `{"model":"Qwen/Qwen3-0.6B","input":"and me?","previous_response_id":"`+skipped+`"}`) // continues from memory
	kept := id(map[string]string{"X-Hone-Train": "1"}, `{"model":"Qwen/Qwen3-0.6B","input":"keep me"}`)
	time.Sleep(200 * time.Millisecond) // the store writes conversations behind the answer
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := capture.Open(dir, co, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	convs := again.Conversations(time.Hour, 16)
	if conv, ok, _ := convs.Conversation("", skipped); ok {
		t.Errorf("a skipped session's conversation is in the store: %s", conv)
	}
	if conv, ok, _ := convs.Conversation("", kept); !ok || !strings.Contains(string(conv), "keep me") {
		t.Errorf("a captured session's conversation is not in the store: %v %s", ok, conv)
	}
}

// The in-memory conversations are bounded in bytes as well as count: the
// oldest go first, one larger than the bound is refused, and a replaced
// one is counted once.
func TestMemConversationsBytes(t *testing.T) {
	m := newMemConversations(100, time.Hour)
	m.max = 1000
	conv := func(n int) []byte { return bytes.Repeat([]byte("x"), n) }
	for i := range 3 {
		if err := m.PutConversation("o", fmt.Sprint(i), conv(400)); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, _ := m.Conversation("o", "0"); ok || m.bytes.Load() != 800 {
		t.Fatalf("after 1200 bytes into 1000: the oldest kept %v, %d bytes held", ok, m.bytes.Load())
	}
	if _, ok, _ := m.Conversation("o", "2"); !ok {
		t.Fatal("the newest conversation was evicted")
	}
	_ = m.PutConversation("o", "2", conv(100))
	if m.bytes.Load() != 500 {
		t.Fatalf("a replaced conversation: %d bytes held, want 500", m.bytes.Load())
	}
	if err := m.PutConversation("o", "big", conv(1001)); err == nil {
		t.Fatal("a conversation larger than the bound was kept")
	}
}

// TestResponsesReasoningNullContent: a reasoning item sent back with
// "content": null (the OpenAI Python SDK's model_dump of an output item)
// gives the engine its summary as the next assistant message's reasoning,
// as an item without content does.
func TestResponsesReasoningNullContent(t *testing.T) {
	for _, content := range []string{`"content":null,`, ``, `"content":[],`} {
		body := `{"model":"m","input":[{"role":"user","content":"hi"},{"type":"reasoning","id":"rs_1",` + content +
			`"summary":[{"type":"summary_text","text":"plan"}],"encrypted_content":"gAAA"},` +
			`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]}]}`
		tr, err := responsesSurface{}.translate(testServer(), "", []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if got := gjson.GetBytes(tr.body, "messages.1.reasoning_content").String(); got != "plan" {
			t.Errorf("%s: reasoning_content %q in %s", content, got, tr.body)
		}
	}
}
