package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/proxy/internal/sse"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
)

// msgUpdateGolden rewrites the Messages golden files (HONE_UPDATE_GOLDEN=1).
var msgUpdateGolden = os.Getenv("HONE_UPDATE_GOLDEN") == "1"

var msgRandomIDs = regexp.MustCompile(`"(msg|toolu)_[0-9a-f]{32}"`)

// msgNormalize replaces the ids a translation makes up by stable ones.
func msgNormalize(b []byte) []byte {
	seen := map[string]string{}
	return msgRandomIDs.ReplaceAllFunc(b, func(m []byte) []byte {
		if _, ok := seen[string(m)]; !ok {
			seen[string(m)] = string(m[:bytes.IndexByte(m, '_')+1]) + "x" + string(rune('0'+len(seen)%10)) + `"`
		}
		return []byte(seen[string(m)])
	})
}

func msgGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if msgUpdateGolden {
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

func msgIndent(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", " "); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	return append(out.Bytes(), '\n')
}

// msgUpstream returns the engine answers of a testdata/messages case: its
// own upstream.json/upstream.sse, or the vLLM fixtures its upstream file
// names (the non-stream case, then the stream case).
func msgUpstream(t *testing.T, dir string) (body, events []byte) {
	body, _ = os.ReadFile(filepath.Join(dir, "upstream.json"))
	events, _ = os.ReadFile(filepath.Join(dir, "upstream.sse"))
	names, _ := os.ReadFile(filepath.Join(dir, "upstream"))
	if f := strings.Fields(string(names)); len(f) == 2 {
		body, _ = os.ReadFile(fixture(t, f[0], "upstream.json"))
		events, _ = os.ReadFile(fixture(t, f[1], "upstream.sse"))
	}
	return body, events
}

// TestMessagesGolden translates each request in testdata/messages onto chat
// completions, and the engine's answer (whole and streamed) back into the
// Messages API, against golden files.
func TestMessagesGolden(t *testing.T) {
	dirs, _ := filepath.Glob("testdata/messages/*")
	if len(dirs) < 5 {
		t.Fatalf("only %d cases in testdata/messages", len(dirs))
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			req, err := os.ReadFile(filepath.Join(dir, "request.json"))
			if err != nil {
				t.Fatal(err)
			}
			tr, aerr := messagesSurface{}.translate(nil, "", req)
			if aerr != nil {
				t.Fatalf("translate: %v", aerr)
			}
			msgGolden(t, filepath.Join(dir, "chat.json"), msgIndent(t, tr.body))
			body, events := msgUpstream(t, dir)
			if len(body) == 0 || len(events) == 0 {
				t.Fatal("no upstream answers")
			}
			whole := tr.enc.body(body, 200)
			msgGolden(t, filepath.Join(dir, "response.json"), msgIndent(t, msgNormalize(whole)))
			tr, _ = messagesSurface{}.translate(nil, "", req)
			stream := msgEncodeStream(tr.enc, events)
			streamed := checkMessagesEvents(t, stream)
			msgGolden(t, filepath.Join(dir, "response.sse"), msgNormalize(stream))
			if !gjson.ValidBytes(streamed) {
				t.Fatalf("stream accumulates into %s", streamed)
			}
		})
	}
}

// msgEncodeStream feeds an engine SSE stream through an encoder as the
// stream body does.
func msgEncodeStream(enc encoder, events []byte) []byte {
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
	return out
}

// checkMessagesEvents checks the event sequence clients rely on and
// accumulates it into the Message it describes, as the SDK's MessageStream
// does: every event names its type in an event: line and in its data;
// message_start, ping, then blocks started in index order, one open at a
// time, each delta of its block's kind and for the open block; then
// message_delta and message_stop, nothing after.
func checkMessagesEvents(t testing.TB, out []byte) []byte {
	t.Helper()
	var msg map[string]any
	var content []map[string]any
	var jsonBuf []string
	open := -1
	step := "start" // start, ping, blocks, delta, stop, done
	for i, ev := range splitEvents(out) {
		lines := strings.SplitN(string(ev), "\n", 2)
		typ := strings.TrimPrefix(lines[0], "event: ")
		data, ok := sse.Data(ev)
		d := gjson.ParseBytes(data)
		if !ok || !strings.HasPrefix(lines[0], "event: ") || d.Get("type").String() != typ || !strings.HasSuffix(string(ev), "\n\n") {
			t.Fatalf("event %d malformed: %q", i, ev)
		}
		fail := func(why string) { t.Helper(); t.Fatalf("event %d (%s after %s): %s: %s", i, typ, step, why, data) }
		idx := int(d.Get("index").Int())
		switch typ {
		case "message_start":
			if step != "start" {
				fail("not first")
			}
			if err := json.Unmarshal([]byte(d.Get("message").Raw), &msg); err != nil || d.Get("message.content.#").Int() != 0 ||
				d.Get("message.type").String() != "message" || !d.Get("message.usage.input_tokens").Exists() {
				fail("bad message")
			}
			step = "ping"
		case "ping":
			if step != "ping" {
				fail("ping not after message_start")
			}
			step = "blocks"
		case "content_block_start":
			if step != "blocks" || open != -1 || idx != len(content) {
				fail("block started out of order")
			}
			var bl map[string]any
			_ = json.Unmarshal([]byte(d.Get("content_block").Raw), &bl)
			switch bl["type"] {
			case "text", "thinking":
			case "tool_use":
				if id, _ := bl["id"].(string); id == "" || !reflect.DeepEqual(bl["input"], map[string]any{}) {
					fail("tool_use block without an id or an empty input")
				}
				if _, ok := bl["name"].(string); !ok {
					fail("tool_use block without a name") // empty only when the engine named no function
				}
			default:
				fail("unknown block type")
			}
			content = append(content, bl)
			jsonBuf = append(jsonBuf, "")
			open = idx
		case "content_block_delta":
			if open == -1 || idx != open {
				fail("delta for a block not open")
			}
			bl := content[idx]
			switch dt := d.Get("delta.type").String(); {
			case dt == "text_delta" && bl["type"] == "text":
				bl["text"] = bl["text"].(string) + d.Get("delta.text").String()
			case dt == "thinking_delta" && bl["type"] == "thinking":
				bl["thinking"] = bl["thinking"].(string) + d.Get("delta.thinking").String()
			case dt == "signature_delta" && bl["type"] == "thinking":
				bl["signature"] = d.Get("delta.signature").String()
			case dt == "input_json_delta" && bl["type"] == "tool_use":
				jsonBuf[idx] += d.Get("delta.partial_json").String()
			default:
				fail("delta of the wrong kind")
			}
		case "content_block_stop":
			if idx != open {
				fail("stop for a block not open")
			}
			if bl := content[idx]; bl["type"] == "tool_use" && jsonBuf[idx] != "" {
				var in any
				if err := json.Unmarshal([]byte(jsonBuf[idx]), &in); err != nil {
					// the SDK parses partial JSON (arguments cut off by
					// max_tokens); the test keeps what arrived
					if !strings.HasPrefix(strings.TrimSpace(jsonBuf[idx]), "{") {
						fail("tool input neither JSON nor a JSON object's start: " + jsonBuf[idx])
					}
					in = map[string]any{"partial_json": jsonBuf[idx]}
				}
				bl["input"] = in
			} else if bl["type"] == "thinking" && bl["signature"] == "" {
				fail("thinking block without a signature")
			}
			open = -1
		case "message_delta":
			if step != "blocks" || open != -1 {
				fail("message_delta with a block open")
			}
			if !d.Get("delta.stop_reason").Exists() || !d.Get("usage.output_tokens").Exists() {
				fail("message_delta without stop_reason or usage")
			}
			msg["stop_reason"], msg["stop_sequence"] = d.Get("delta.stop_reason").Value(), d.Get("delta.stop_sequence").Value()
			u := msg["usage"].(map[string]any)
			u["output_tokens"] = d.Get("usage.output_tokens").Value()
			if in := d.Get("usage.input_tokens"); in.Exists() {
				u["input_tokens"] = in.Value()
			}
			step = "stop"
		case "message_stop":
			if step != "stop" {
				fail("message_stop before message_delta")
			}
			step = "done"
		default:
			fail("unknown event")
		}
	}
	if step != "done" {
		t.Fatalf("stream ends in step %s", step)
	}
	if content == nil {
		content = []map[string]any{}
	}
	msg["content"] = content
	b, _ := json.Marshal(msg)
	return b
}

// TestMessagesStreamMatchesBody: a streamed answer accumulates into the
// Message the same answer gives whole.
func TestMessagesStreamMatchesBody(t *testing.T) {
	req := []byte(`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"calculator","input_schema":{}}]}`)
	for _, pair := range [][2]string{{"chat", "chat_stream"}, {"chat_tools", "chat_tools_stream"}} {
		body, _ := os.ReadFile(fixture(t, pair[0], "upstream.json"))
		events, _ := os.ReadFile(fixture(t, pair[1], "upstream.sse"))
		tr, _ := messagesSurface{}.translate(nil, "", req)
		whole := msgNormalize(tr.enc.body(body, 200))
		tr, _ = messagesSurface{}.translate(nil, "", req)
		streamed := msgNormalize(checkMessagesEvents(t, msgEncodeStream(tr.enc, events)))
		var a, b any
		_ = json.Unmarshal(whole, &a)
		_ = json.Unmarshal(streamed, &b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: whole %s\nstreamed %s", pair[0], whole, streamed)
		}
	}
}

// TestMessagesToolArguments: arguments that are not a JSON object reach
// the agent as a string input (whole or streamed) and come back as the
// same arguments.
func TestMessagesToolArguments(t *testing.T) {
	for _, args := range []string{`{"a": 1}`, ``, `{"a": `, `not json`, `[1,2]`, `  {"b":2}`} {
		in := anthInput([]byte(args))
		back := toolArguments(jval(gjson.ParseBytes(in).Raw))
		switch {
		case args == "":
			if string(in) != "{}" || back != "{}" {
				t.Errorf("%q: input %s, back %q", args, in, back)
			}
		case json.Valid([]byte(args)) && strings.HasPrefix(strings.TrimSpace(args), "{"):
			if !gjson.ParseBytes(in).IsObject() || canonJSON(back) != canonJSON(args) {
				t.Errorf("%q: input %s, back %q", args, in, back)
			}
		default:
			if back != args {
				t.Errorf("%q: input %s, back %q", args, in, back)
			}
		}
		chunk := `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":` +
			string(jsonString(args)) + `}}]},"finish_reason":"tool_calls"}]}`
		enc := newMessagesEncoder("m")
		out := append(enc.event([]byte(chunk)), enc.end()...)
		got := gjson.GetBytes(checkMessagesEvents(t, out), "content.0.input")
		want := gjson.ParseBytes(in)
		if got.Get("partial_json").String() == args {
			continue // a cut-off object streams as it came; whole, it is a string
		}
		if canonJSON(got.Raw) != canonJSON(want.Raw) {
			t.Errorf("%q: streamed input %s, whole %s", args, got.Raw, want.Raw)
		}
	}
}

func canonJSON(s string) string {
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// TestMessagesBadInput: every malformed request is an Anthropic 4xx.
func TestMessagesBadInput(t *testing.T) {
	for name, body := range map[string]string{
		"no model":              `{"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		"no max_tokens":         `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		"zero max_tokens":       `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`,
		"float max_tokens":      `{"model":"m","max_tokens":1.5,"messages":[{"role":"user","content":"hi"}]}`,
		"no messages":           `{"model":"m","max_tokens":5}`,
		"empty messages":        `{"model":"m","max_tokens":5,"messages":[]}`,
		"message not object":    `{"model":"m","max_tokens":5,"messages":["hi"]}`,
		"bad role":              `{"model":"m","max_tokens":5,"messages":[{"role":"tool","content":"hi"}]}`,
		"content number":        `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":3}]}`,
		"unknown block":         `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"audio"}]}]}`,
		"document block":        `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{}}]}]}`,
		"unknown tool id":       `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_nope","content":"1"}]}]}`,
		"tool_use by user":      `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]}]}`,
		"tool_result by asst":   `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"a"}]}]}`,
		"tool_use without id":   `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","name":"f","input":{}}]}]}`,
		"image file source":     `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"f"}}]}]}`,
		"bad tool_result block": `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"thinking"}]}]}]}`,
		"system image":          `{"model":"m","max_tokens":5,"system":[{"type":"image"}],"messages":[{"role":"user","content":"hi"}]}`,
		"system number":         `{"model":"m","max_tokens":5,"system":1,"messages":[{"role":"user","content":"hi"}]}`,
		"unknown tool type":     `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"teleport_20250101","name":"t"}]}`,
		"tool without name":     `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":[{"input_schema":{}}]}`,
		"tools not list":        `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":{}}`,
		"bad tool_choice":       `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tool_choice":{"type":"sometimes"}}`,
		"tool choice no name":   `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tool_choice":{"type":"tool"}}`,
		"string temperature":    `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"temperature":"hot"}`,
		"bad top_k":             `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"top_k":-1}`,
		"stop not strings":      `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"stop_sequences":[1]}`,
	} {
		if _, err := (messagesSurface{}).translate(nil, "", []byte(body)); err == nil || err.status != 400 {
			t.Errorf("%s: %v, want a 400", name, err)
		}
	}
}

func TestAnthropicErrorTypes(t *testing.T) {
	for status, want := range map[int]string{400: "invalid_request_error", 401: "authentication_error",
		403: "permission_error", 404: "not_found_error", 413: "request_too_large", 422: "invalid_request_error",
		429: "rate_limit_error", 500: "api_error", 502: "api_error", 503: "overloaded_error", 504: "timeout_error"} {
		b := appendAnthropicError(nil, status, `say "hi"`)
		d := gjson.ParseBytes(b)
		if !gjson.ValidBytes(b) || d.Get("type").String() != "error" || d.Get("error.type").String() != want ||
			d.Get("error.message").String() != `say "hi"` {
			t.Errorf("%d: %s, want type %s", status, b, want)
		}
	}
	enc := newMessagesEncoder("m")
	b := enc.body([]byte(`{"object":"error","message":"This model's maximum context length is 40960 tokens.","type":"BadRequestError","param":null,"code":400}`), 400)
	if gjson.GetBytes(b, "error.type").String() != "invalid_request_error" ||
		!strings.Contains(gjson.GetBytes(b, "error.message").String(), "maximum context length") {
		t.Errorf("engine error re-shaped as %s", b)
	}
}

// wantAnthropicError checks an answer is an Anthropic error of status.
func wantAnthropicError(t *testing.T, r *rawResponse, status int) {
	t.Helper()
	d := gjson.ParseBytes(r.body)
	if r.status != status || d.Get("type").String() != "error" || d.Get("error.type").String() != anthropicErrorType(status) ||
		d.Get("error.message").String() == "" || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Fatalf("want an Anthropic %d error, got %d %s", status, r.status, r.body)
	}
}

// TestMessagesThroughHone: the Messages API through hone to a stub engine
// replaying vLLM fixtures: the engine gets chat completions with capture's
// fields, the agent gets a Message (whole) or Anthropic's events (streamed,
// each event in its own chunk), the call is captured with the fixture's
// token ids, and bad input is answered in Anthropic's shape while hone keeps
// serving and records nothing for it.
func TestMessagesThroughHone(t *testing.T) {
	stub := newStub(t)
	stub.answer = func(ctx *fasthttp.RequestCtx) {
		req := ctx.PostBody()
		name := "chat"
		if gjson.GetBytes(req, "tools").Exists() {
			name = "chat_tools"
		}
		if gjson.GetBytes(req, "stream").Bool() {
			replay(t, fixture(t, name+"_stream", "upstream.sse"), time.Millisecond)(ctx)
			return
		}
		replay(t, fixture(t, name, "upstream.json"), 0)(ctx)
	}
	h := startHone(t, nil, stub)
	hdr := map[string]string{"anthropic-version": "2023-06-01", "x-api-key": "sk-ant-dummy", "X-Hone-Session": "anth-1"}

	r := post(t, h.url, "/v1/messages", []byte(`{"model":"Qwen/Qwen3-0.6B","max_tokens":64,"system":"Be brief.",`+
		`"messages":[{"role":"user","content":"Hello!"}]}`), hdr)
	d := gjson.ParseBytes(r.body)
	if r.status != 200 || d.Get("type").String() != "message" || d.Get("content.0.text").String() != "Hello! How can I help?" ||
		d.Get("stop_reason").String() != "end_turn" || d.Get("usage.input_tokens").Int() != 10 ||
		d.Get("usage.output_tokens").Int() != 7 || d.Get("model").String() != "Qwen/Qwen3-0.6B" ||
		r.header.Get("X-Hone-Call") == "" || d.Get("choices").Exists() {
		t.Fatalf("non-stream answer %d %s", r.status, r.body)
	}
	firstCall, firstID := r.header.Get("X-Hone-Call"), d.Get("id").String()
	if firstID != "msg_"+firstCall {
		t.Fatalf("message id %q, want msg_ and the call's id %q (so Trinity msg_ids finds it)", firstID, firstCall)
	}
	up, _ := stub.lastRequest()
	if u := gjson.ParseBytes(up); u.Get("messages.0.role").String() != "system" || u.Get("max_tokens").Int() != 64 ||
		!u.Get("logprobs").Bool() {
		t.Fatalf("engine got %s", up)
	}

	r = post(t, h.url, "/v1/messages", []byte(`{"model":"Qwen/Qwen3-0.6B","max_tokens":64,"stream":true,`+
		`"messages":[{"role":"user","content":"What is 17 * 23?"}],"tools":[{"name":"calculator","input_schema":{"type":"object"}}]}`), hdr)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream answer %d %s", r.status, r.body)
	}
	streamed := gjson.ParseBytes(checkMessagesEvents(t, r.body))
	if streamed.Get("stop_reason").String() != "tool_use" || streamed.Get("content.0.type").String() != "tool_use" ||
		streamed.Get("content.0.input.expression").String() != "17 * 23" || streamed.Get("usage.input_tokens").Int() != 10 {
		t.Fatalf("stream accumulates into %s", streamed.Raw)
	}
	for i, c := range r.chunks {
		if n := bytes.Count(c, []byte("\n\n")); n != 1 || !bytes.HasSuffix(c, []byte("\n\n")) {
			t.Fatalf("chunk %d holds %d events: %q", i, n, c)
		}
	}
	if bytes.Contains(r.body, []byte("token_ids")) || bytes.Contains(r.body, []byte("logprob")) {
		t.Fatalf("injected fields reached the agent: %s", r.body)
	}

	calls := waitCalls(t, h.rec, 2)
	for _, c := range calls {
		if c.Route != capture.RouteChat || c.Status != capture.StatusOK || len(c.PromptIDs) == 0 ||
			len(c.Choices) != 1 || len(c.Choices[0].TokenIDs) == 0 || len(c.Choices[0].TokenIDs) != len(c.Choices[0].Logprobs) ||
			c.Session != "anth-1" {
			t.Fatalf("call recorded as %+v", c)
		}
	}

	served := stub.served.Load()
	for name, body := range map[string]string{
		"malformed":       `{"model":`,
		"not an object":   `[1]`,
		"unknown block":   `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"audio","data":"x"}]}]}`,
		"unknown tool id": `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_x","content":"1"}]}]}`,
		"no max_tokens":   `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
	} {
		r := post(t, h.url, "/v1/messages", []byte(body), hdr)
		t.Logf("%s: %s", name, r.body)
		wantAnthropicError(t, r, 400)
	}
	if stub.served.Load() != served {
		t.Fatal("bad input reached the engine")
	}

	// an engine error is re-shaped
	stub.answer = func(ctx *fasthttp.RequestCtx) {
		ctx.SetStatusCode(400)
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"object":"error","message":"max_tokens is too large","type":"BadRequestError","param":null,"code":400}`)
	}
	r = post(t, h.url, "/v1/messages", []byte(`{"model":"Qwen/Qwen3-0.6B","max_tokens":999999,"stream":true,`+
		`"messages":[{"role":"user","content":"hi"}]}`), hdr)
	wantAnthropicError(t, r, 400)
	if !strings.Contains(string(r.body), "max_tokens is too large") {
		t.Fatalf("engine message lost: %s", r.body)
	}

	// hone keeps serving
	stub.answer = func(ctx *fasthttp.RequestCtx) { replay(t, fixture(t, "chat", "upstream.json"), 0)(ctx) }
	r = post(t, h.url, "/v1/messages", []byte(`{"model":"Qwen/Qwen3-0.6B","max_tokens":8,"messages":[{"role":"user","content":"Hello!"}]}`), hdr)
	if r.status != 200 || gjson.GetBytes(r.body, "content.0.text").String() == "" {
		t.Fatalf("after bad input: %d %s", r.status, r.body)
	}
	for _, c := range waitCalls(t, h.rec, 4) {
		if c.HTTPStatus == 400 && c.Status != capture.StatusUpstreamError {
			t.Fatalf("engine error recorded as %+v", c)
		}
		if c.ID == firstCall && c.ResponseID != firstID {
			t.Fatalf("call %s recorded with response id %q, want the one the agent saw, %q", c.ID, c.ResponseID, firstID)
		}
	}
	if n := len(h.rec.Calls()); n != 4 {
		t.Fatalf("%d calls recorded, want 4 (2 answers, the engine error, the last answer)", n)
	}
}

// TestMessagesCountTokens: count_tokens asks the engine's /tokenize with the
// translated chat messages and tools, and answers {"input_tokens": N}.
func TestMessagesCountTokens(t *testing.T) {
	stub := newStub(t)
	var got []byte
	stub.answer = func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) != "/tokenize" {
			ctx.SetStatusCode(404)
			return
		}
		got = append([]byte(nil), ctx.PostBody()...)
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"count":5,"max_model_len":40960,"tokens":[1,2,3,4,5],"token_strs":null}`)
	}
	h := startHone(t, nil, stub)
	r := post(t, h.url, "/v1/messages/count_tokens", []byte(`{"model":"Qwen/Qwen3-0.6B","system":"Be brief.",`+
		`"messages":[{"role":"user","content":"Hello!"}],"tools":[{"name":"f","input_schema":{"type":"object"}}]}`), nil)
	if r.status != 200 || string(r.body) != `{"input_tokens":5}` {
		t.Fatalf("count_tokens answered %d %s", r.status, r.body)
	}
	g := gjson.ParseBytes(got)
	if g.Get("model").String() != "Qwen/Qwen3-0.6B" || g.Get("messages.#").Int() != 2 || g.Get("tools.0.function.name").String() != "f" ||
		!g.Get("add_generation_prompt").Bool() || g.Get("max_tokens").Exists() {
		t.Fatalf("/tokenize got %s", got)
	}
	wantAnthropicError(t, post(t, h.url, "/v1/messages/count_tokens", []byte(`{"model":"m","messages":[{"role":"user","content":[{"type":"nope"}]}]}`), nil), 400)
	stub.answer = func(ctx *fasthttp.RequestCtx) {
		ctx.SetStatusCode(400)
		ctx.SetBodyString(`{"object":"error","message":"bad messages","type":"BadRequestError","code":400}`)
	}
	r = post(t, h.url, "/v1/messages/count_tokens", []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), nil)
	wantAnthropicError(t, r, 400)
	if len(h.rec.Calls()) != 0 {
		t.Fatal("count_tokens was captured")
	}
	// hone's own refusals on these routes are Anthropic's shape too
	keyed := startHone(t, func(o *Options) { o.ClientKeys = []string{"sk-a"} }, stub)
	wantAnthropicError(t, request(t, keyed.url, "POST", "/v1/messages/count_tokens", []byte(`{}`), nil), 401)
	wantAnthropicError(t, request(t, keyed.url, "GET", "/v1/messages/count_tokens", nil, map[string]string{"x-api-key": "sk-a"}), 405)
	wantAnthropicError(t, request(t, keyed.url, "GET", "/v1/messages", nil, map[string]string{"x-api-key": "sk-a"}), 405)
}

// TestStreamBodyOneEventPerRead: several pending events go out one per Read.
func TestStreamBodyOneEventPerRead(t *testing.T) {
	s := &Server{m: newMetrics(nil)}
	b := &streamBody{c: &call{s: s}, pending: []byte("event: a\ndata: {}\n\nevent: b\ndata: {}\n\ndata: c\n\n")}
	p := make([]byte, 4096)
	for _, want := range []string{"event: a\ndata: {}\n\n", "event: b\ndata: {}\n\n", "data: c\n\n"} {
		n, err := b.Read(p)
		if err != nil || string(p[:n]) != want {
			t.Fatalf("Read = %q, %v; want %q", p[:n], err, want)
		}
	}
	b.pending = []byte("data: long event\n\n")
	n, _ := b.Read(p[:5])
	m, _ := b.Read(p[5:])
	if string(p[:n+m]) != "data: long event\n\n" {
		t.Fatalf("a Read smaller than the event: %q", p[:n+m])
	}
}

// TestMessagesSessionInferred: without session headers, a Messages
// conversation that resends the answers it got (tool_use blocks, thinking
// blocks with hone's signature) joins one inferred session, as the same
// conversation in chat completions would.
func TestMessagesSessionInferred(t *testing.T) {
	store, err := capture.Open(t.TempDir(), capture.DefaultOptions(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	stub := newStub(t)
	stub.answer = func(ctx *fasthttp.RequestCtx) {
		msgs := gjson.GetBytes(ctx.PostBody(), "messages").Array()
		name := "chat_tools"
		if msgs[len(msgs)-1].Get("role").String() == "tool" {
			name = "chat_reasoning"
		}
		replay(t, fixture(t, name, "upstream.json"), 0)(ctx)
	}
	h := startHoneWith(t, store, nil, stub)
	tools := `"tools":[{"name":"calculator","input_schema":{"type":"object","properties":{"expression":{"type":"string"}}}}]`
	history := `{"role":"user","content":"What is 17 * 23?"}`
	var session string
	for turn := 0; turn < 3; turn++ {
		r := post(t, h.url, "/v1/messages", []byte(`{"model":"Qwen/Qwen3-0.6B","max_tokens":64,"system":"Be brief.",`+
			tools+`,"messages":[`+history+`]}`), nil)
		s := r.header.Get("X-Hone-Session")
		if r.status != 200 || s == "" || (turn > 0 && s != session) {
			t.Fatalf("turn %d: %d session %q (first %q) %s", turn, r.status, s, session, r.body)
		}
		session = s
		content := gjson.GetBytes(r.body, "content")
		history += `,{"role":"assistant","content":` + content.Raw + `}`
		if use := content.Get(`#(type=="tool_use")`); use.Exists() {
			history += `,{"role":"user","content":[{"type":"tool_result","tool_use_id":"` + use.Get("id").String() + `","content":"391"}]}`
		} else {
			history += `,{"role":"user","content":"And 391 / 17?"}`
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, calls, err := store.GetSession(context.Background(), session)
		if err == nil && len(calls) == 3 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s holds %d calls (%v), want 3", session, len(calls), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
