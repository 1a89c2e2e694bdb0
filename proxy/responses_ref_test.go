package proxy

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hone-rl/hone/internal/jsonwalk"
	"github.com/tidwall/gjson"
)

// The Responses translation as gjson reads it, each key looked up with Get
// and each list walked with ForEach: the reference responses.go's one-pass
// walk of the input items is held to (FuzzResponsesWalk).

// refResponsesTranslate is the translation with gjson's reading of the
// input.
func refResponsesTranslate(s *Server, owner string, body []byte) (*translation, *apiError) {
	return translateInput(s, owner, body, (*chatBuilder).refAddInput)
}

func (b *chatBuilder) refAddInput(in gjson.Result) *apiError {
	switch {
	case in.Type == gjson.String:
		b.add(chatMessage{Role: "user", Content: contentString(in.Raw)})
		return nil
	case in.IsArray():
		var err *apiError
		in.ForEach(func(_, item gjson.Result) bool {
			err = b.refAddItem(item)
			return err == nil
		})
		return err
	case !in.Exists():
		return nil
	}
	return badResponses("input", "input must be a string or a list of items")
}

func (b *chatBuilder) refAddItem(it gjson.Result) *apiError {
	if !it.IsObject() {
		return badResponses("input", "every input item must be an object")
	}
	typ := it.Get("type").String()
	if typ == "" && it.Get("role").Exists() {
		typ = "message"
	}
	switch typ {
	case "message":
		return b.refAddMessage(it)
	case "function_call":
		return b.refAddFunctionCall(it, flatToolName(it.Get("namespace").String(), it.Get("name").String()),
			it.Get("arguments").String())
	case "custom_tool_call":
		return b.refAddFunctionCall(it, flatToolName(it.Get("namespace").String(), it.Get("name").String()),
			customArguments(it.Get("input").String()))
	case "function_call_output", "custom_tool_call_output":
		id := it.Get("call_id").String()
		if !b.calls[id] {
			return badResponses("input", "No tool call found for function call output with call_id "+id+".")
		}
		out := it.Get("output")
		text := out.String()
		if out.IsArray() {
			text = refJoinTextParts(out)
		}
		b.add(chatMessage{Role: "tool", ToolCallID: id, Content: jsonString(text)})
	case "reasoning":
		var parts []string
		for _, key := range []string{"content", "summary"} {
			if v := it.Get(key); v.IsArray() { // lists of parts; a null content (Codex's) is none
				v.ForEach(func(_, p gjson.Result) bool {
					parts = append(parts, p.Get("text").String())
					return true
				})
			}
			if len(parts) > 0 {
				break
			}
		}
		b.reasoning += strings.Join(parts, "\n") // encrypted_content is for OpenAI's models: left out
	case "item_reference":
		return b.refAddReference(it.Get("id").String())
	case "additional_tools":
		return b.ts.addList(it.Get("tools"), "input")
	case "tool_search_call", "tool_search_output":
		if it.Get("execution").String() == "server" { // OpenAI's own search: nothing the engine did
			b.skipped[typ]++
			return nil
		}
		if typ == "tool_search_call" {
			args := it.Get("arguments")
			a := args.Raw
			if args.Type == gjson.String {
				a = args.String()
			} else if !args.Exists() {
				a = "{}"
			}
			return b.refAddFunctionCall(it, "tool_search", a)
		}
		id := it.Get("call_id").String()
		if !b.calls[id] {
			return badResponses("input", "No tool call found for tool search output with call_id "+id+".")
		}
		loaded, err := b.ts.load(it.Get("tools"))
		if err != nil {
			return err
		}
		b.add(chatMessage{Role: "tool", ToolCallID: id, Content: jsonString(string(loaded))})
	default:
		if respSkippedItems[typ] {
			b.skipped[typ]++
			return nil
		}
		return badResponses("input", "input item type '"+typ+"' is not supported by hone")
	}
	return nil
}

// refAddReference adds the output item of an earlier response that id names,
// as the agent would have sent it back in full: the AI SDK's Responses
// provider sends its earlier answers as references unless store is false.
// An item hone does not keep (another owner's, expired, or of a response
// made with store false) is answered as OpenAI answers it.
func (b *chatBuilder) refAddReference(id string) *apiError {
	if b.refs[id] {
		return badResponses("input", "Duplicate item found with id "+clip(id)+".")
	}
	if b.refs == nil {
		b.refs = map[string]bool{}
	}
	b.refs[id] = true
	var item gjson.Result
	if raw, ok := b.ref(id); ok && id != "" {
		if b.refRoom -= len(raw); b.refRoom < 0 {
			return &apiError{413, "invalid_request_error", "request_too_large",
				"the items input references exceed the size limit (proxy.max_body_bytes)", "input"}
		}
		item = gjson.ParseBytes(raw)
	}
	if !item.IsObject() || item.Get("type").String() == "item_reference" {
		return &apiError{404, "invalid_request_error", "", "Item with id '" + clip(id) + "' not found. Items are not " +
			"persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input.",
			"input"}
	}
	return b.refAddItem(item)
}

func (b *chatBuilder) refAddMessage(it gjson.Result) *apiError {
	role := it.Get("role").String()
	switch role {
	case "developer":
		role = "system"
	case "user", "system", "assistant":
	default:
		return badResponses("input", "message role '"+role+"' is not one of user, system, developer, assistant")
	}
	content, err := refChatContent(it.Get("content"))
	if err != nil {
		return err
	}
	m := chatMessage{Role: role, Content: content}
	if role == "assistant" {
		m.ReasoningContent, b.reasoning = b.reasoning, ""
	}
	b.add(m)
	return nil
}

// refAddFunctionCall adds a function or custom tool call (name: the engine's
// function name, args: its arguments).
func (b *chatBuilder) refAddFunctionCall(it gjson.Result, name, args string) *apiError {
	var tc chatToolCall
	tc.ID, tc.Type = it.Get("call_id").String(), "function"
	tc.Function.Name, tc.Function.Arguments = name, args
	if tc.ID == "" || (it.Get("name").String() == "" && name != "tool_search") {
		return badResponses("input", "a "+it.Get("type").String()+" item needs call_id and name")
	}
	b.calls[tc.ID] = true
	if n := len(b.msgs); n > 0 && b.msgs[n-1].Role == "assistant" && b.reasoning == "" {
		b.msgs[n-1].ToolCalls = append(b.msgs[n-1].ToolCalls, tc)
		return nil
	}
	m := chatMessage{Role: "assistant", ToolCalls: []chatToolCall{tc}}
	m.ReasoningContent, b.reasoning = b.reasoning, ""
	b.msgs = append(b.msgs, m)
	return nil
}

// refChatContent turns a Responses message content (a string or a list of
// parts) into chat content: a string when it is all text, else parts.
func refChatContent(c gjson.Result) (json.RawMessage, *apiError) {
	if c.Type == gjson.String {
		return contentString(c.Raw), nil
	}
	if !c.IsArray() {
		return nil, badResponses("input", "message content must be a string or a list of parts")
	}
	var parts []map[string]any
	allText := true
	var err *apiError
	c.ForEach(func(_, p gjson.Result) bool {
		switch p.Get("type").String() {
		case "input_text", "output_text", "text", "refusal":
			parts = append(parts, map[string]any{"type": "text", "text": p.Get("text").String()})
		case "input_image":
			allText = false
			parts = append(parts, map[string]any{"type": "image_url", "image_url": map[string]any{"url": p.Get("image_url").String()}})
		default:
			err = badResponses("input", "content part type '"+p.Get("type").String()+"' is not supported by hone")
		}
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	if allText {
		return jsonString(refJoinTextParts(c)), nil
	}
	b, _ := json.Marshal(parts)
	return b, nil
}

func refJoinTextParts(parts gjson.Result) string {
	var sb strings.Builder
	parts.ForEach(func(_, p gjson.Result) bool {
		sb.WriteString(p.Get("text").String())
		return true
	})
	return sb.String()
}

// walkServer is a server whose store holds the items and the conversation
// that the generated and fuzzed requests refer to.
func walkServer() *Server {
	s := testServer()
	s.responses.put("", "msg_1", []byte(`{"type":"message","role":"assistant","id":"msg_1","content":[{"type":"output_text","text":"done <ok>"}]}`), false)
	s.responses.put("", "fc_1", []byte(`{"type":"function_call","id":"fc_1","call_id":"a","name":"shell","arguments":"{\"cmd\":\"ls\"}"}`), false)
	s.responses.put("", "ref_1", []byte(`{"type":"item_reference","id":"msg_1"}`), false)
	s.responses.put("", "bad_1", []byte(`[1]`), false)
	s.responses.put("", "resp_1", []byte(`[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"b","type":"function","function":{"name":"f","arguments":"{}"}}]}]`), false)
	return s
}

// sameResponsesTranslation fails t unless the walk and gjson's reading
// translate body alike: the engine's request, the warnings, the
// conversation kept, or the error.
func sameResponsesTranslation(t *testing.T, s *Server, body []byte) {
	t.Helper()
	got, gotErr := responsesSurface{}.translate(s, "", body)
	want, wantErr := refResponsesTranslate(s, "", body)
	if (gotErr == nil) != (wantErr == nil) || gotErr != nil && *gotErr != *wantErr {
		t.Fatalf("%s:\nwalk  error %+v\ngjson error %+v", body, gotErr, wantErr)
	}
	if gotErr != nil {
		return
	}
	g, w := got.enc.(*responsesEncoder), want.enc.(*responsesEncoder)
	gc, _ := appendChatMessages(nil, g.conv)
	wc, _ := appendChatMessages(nil, w.conv)
	if !bytes.Equal(got.body, want.body) || !reflect.DeepEqual(g.warns, w.warns) || !bytes.Equal(gc, wc) {
		t.Fatalf("%s:\nwalk  %s %q %s\ngjson %s %q %s", body, got.body, g.warns, gc, want.body, w.warns, wc)
	}
}

// FuzzResponsesWalk: on any valid body the one-pass translation of the
// input items gives what gjson's reading of them gives.
func FuzzResponsesWalk(f *testing.F) {
	files, _ := filepath.Glob("testdata/responses/*/request.json")
	files = append(files, "../testdata/requests/responses-coding-40.json")
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	f.Add([]byte(codexRequest))
	r := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		f.Add([]byte(randResponsesBody(r)))
	}
	s := walkServer()
	f.Fuzz(func(t *testing.T, body []byte) {
		if jsonwalk.IsObject(body) {
			sameResponsesTranslation(t, s, body)
		}
	})
}

// TestResponsesWalkRandom holds the walk to gjson's reading on generated
// Responses bodies: every item type, members in any order, repeated and
// mistyped, references to stored items.
func TestResponsesWalkRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	s := walkServer()
	for range 20000 {
		body := []byte(randResponsesBody(r))
		if !jsonwalk.IsObject(body) {
			t.Fatalf("generated invalid JSON %s", body)
		}
		sameResponsesTranslation(t, s, body)
	}
}

func randResponsesBody(r *rand.Rand) string {
	var b strings.Builder
	b.WriteString(`{"model":"m"`)
	if r.IntN(3) == 0 {
		b.WriteString(`,"instructions":` + pick(r, `"Be brief <3."`, `"x"`, `null`, `1`))
	}
	if r.IntN(8) == 0 {
		b.WriteString(`,"previous_response_id":` + pick(r, `"resp_1"`, `"msg_1"`, `"nope"`))
	}
	if r.IntN(5) == 0 {
		b.WriteString(`,"store":false`)
	}
	b.WriteString(`,"input":`)
	if r.IntN(15) == 0 {
		b.WriteString(randValue(r, 1) + `}`)
		return b.String()
	}
	b.WriteByte('[')
	for i := range 1 + r.IntN(6) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(randItem(r))
	}
	b.WriteString(`]}`)
	return b.String()
}

var itemTypes = []string{"message", "message", "function_call", "function_call", "function_call_output", "function_call_output",
	"custom_tool_call", "custom_tool_call_output", "reasoning", "reasoning", "item_reference", "tool_search_call",
	"tool_search_output", "additional_tools", "web_search_call", "bogus", ""}

func randItem(r *rand.Rand) string {
	if r.IntN(40) == 0 {
		return randValue(r, 1)
	}
	typ := itemTypes[r.IntN(len(itemTypes))]
	must := map[string][]string{"message": {`"role"`, `"content"`}, "function_call": {`"call_id"`, `"name"`, `"arguments"`},
		"custom_tool_call": {`"call_id"`, `"name"`, `"input"`}, "function_call_output": {`"call_id"`, `"output"`},
		"custom_tool_call_output": {`"call_id"`, `"output"`}, "reasoning": {`"summary"`, `"content"`}, "item_reference": {`"id"`},
		"tool_search_call": {`"call_id"`, `"execution"`}, "tool_search_output": {`"call_id"`, `"execution"`, `"tools"`},
		"additional_tools": {`"tools"`}, "": {`"role"`, `"content"`}}[typ]
	if typ != "" {
		must = append([]string{`"type"`}, must...)
	}
	extra := []string{`"namespace"`, `"content"`, `"arguments"`, `"role"`, `"name"`, `"id"`, `"status"`, `"encrypted_content"`, `"n\u0061me"`}
	return randObject(r, must, extra, func(k string) string {
		switch k {
		case `"type"`:
			if r.IntN(30) == 0 {
				return pick(r, `1`, `null`, `"message"`)
			}
			return `"` + typ + `"`
		case `"role"`:
			return pick(r, `"user"`, `"assistant"`, `"developer"`, `"system"`, `"user"`, `"assistant"`, `"tool"`)
		case `"call_id"`:
			return pick(r, `"a"`, `"b"`, `"a"`, `"c"`, `""`)
		case `"name"`, `"n\u0061me"`:
			return pick(r, `"shell"`, `"f"`, `"__g"`, `""`, `"shell"`)
		case `"namespace"`:
			return pick(r, `"ns_"`, `""`, `"mcp"`)
		case `"arguments"`, `"input"`:
			return pick(r, `"{\"cmd\": [\"ls\", \"-la\"]}"`, `"x < y"`, `{"a":1}`, `"{}"`, `""`)
		case `"id"`:
			return pick(r, `"msg_1"`, `"fc_1"`, `"ref_1"`, `"bad_1"`, `"none"`, `"msg_1"`)
		case `"execution"`:
			return pick(r, `"client"`, `"server"`, `"client"`)
		case `"tools"`:
			return pick(r, `[{"type":"function","name":"g","parameters":{"type":"object"}}]`, `[]`, `null`, `[1]`)
		case `"output"`:
			return pick(r, `"{\"output\":\"a\\nb <c>\",\"metadata\":{\"exit_code\":0}}"`, `"ok"`, `[{"type":"input_text","text":"x"},{"text":"y"}]`, `3`, `null`, `""`)
		case `"summary"`, `"content"`:
			if typ == "reasoning" || typ == "" && r.IntN(2) == 0 {
				return pick(r, `[{"type":"summary_text","text":"**Plan** a"},{"text":"b"}]`, `null`, `[]`, `[{"type":"reasoning_text","text":"r\u00e9"}]`, `"s"`, `{"text":"o"}`)
			}
			if r.IntN(3) == 0 {
				return pick(r, `"hello \u003cb\u003e"`, `"plain"`, `3`, `null`)
			}
			var c strings.Builder
			c.WriteByte('[')
			for j := range 1 + r.IntN(3) {
				if j > 0 {
					c.WriteByte(',')
				}
				ptyp := pick(r, `"input_text"`, `"output_text"`, `"input_text"`, `"input_image"`, `"refusal"`, `"text"`, `"input_file"`)
				c.WriteString(randObject(r, []string{`"type"`, `"text"`}, []string{`"image_url"`, `"text"`, `"annotations"`}, func(k string) string {
					switch k {
					case `"type"`:
						return ptyp
					case `"image_url"`:
						return pick(r, `"data:image/png;base64,QQ=="`, `"https://x/y.png"`)
					}
					return randValue(r, 1)
				}))
			}
			c.WriteByte(']')
			return c.String()
		}
		return randValue(r, 1)
	})
}
