package proxy

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hone-rl/hone/internal/jsonenc"
	"github.com/hone-rl/hone/internal/jsonwalk"
	"github.com/tidwall/gjson"
)

// The Messages translation as gjson reads it, each key looked up with
// Get and each list walked with ForEach: the reference messages.go's
// one-pass walk is held to (FuzzMessagesWalk).

// refContentString is contentString of a gjson value.
func refContentString(v gjson.Result) json.RawMessage {
	if jsonenc.Encoded(v.Raw) {
		return json.RawMessage(v.Raw)
	}
	return jsonString(v.String())
}

// refMessagesChatWarn is messagesChatWarn with gjson's reading of the
// conversation.
func refMessagesChatWarn(doc gjson.Result, count bool) ([]byte, []string, *apiError) {
	return messagesChatFrom(doc, count, "", (*anthBuilder).refAddConversation, nil)
}

// refAddConversation is addConversation by gjson.
func (b *anthBuilder) refAddConversation(system, msgs gjson.Result) *apiError {
	if err := b.refAddSystem(system); err != nil {
		return err
	}
	if !msgs.IsArray() || len(msgs.Array()) == 0 {
		return badMessages("messages: Field required (a non-empty list)")
	}
	var err *apiError
	i := 0
	msgs.ForEach(func(_, m gjson.Result) bool {
		err = b.refAddMessage(i, m)
		i++
		return err == nil
	})
	return err
}

func (b *anthBuilder) refAddSystem(sys gjson.Result) *apiError {
	switch {
	case !sys.Exists() || sys.Type == gjson.Null:
		return nil
	case sys.Type == gjson.String:
		if sys.String() != "" {
			b.msgs = append(b.msgs, chatMessage{Role: "system", Content: refContentString(sys)})
		}
		return nil
	case sys.IsArray():
		c, err := refTextOnly(sys, "system")
		if err != nil {
			return err
		}
		if c != nil {
			b.msgs = append(b.msgs, chatMessage{Role: "system", Content: c})
		}
		return nil
	}
	return badMessages("system: Input should be a string or a list of text blocks")
}

// refTextOnly is the chat content of a list of text blocks (nil when empty).
func refTextOnly(blocks gjson.Result, where string) (json.RawMessage, *apiError) {
	var parts []map[string]any
	var err *apiError
	i := 0
	blocks.ForEach(func(_, bl gjson.Result) bool {
		if typ := bl.Get("type").String(); typ != "text" {
			err = badMessages(where + "." + strconv.Itoa(i) + ": block type '" + typ + "' is not supported here (text only)")
			return false
		}
		parts = append(parts, map[string]any{"type": "text", "text": bl.Get("text").String()})
		i++
		return true
	})
	if err != nil || len(parts) == 0 {
		return nil, err
	}
	return refPartsContent(parts), nil
}

func (b *anthBuilder) refAddMessage(i int, m gjson.Result) *apiError {
	where := "messages." + strconv.Itoa(i)
	if !m.IsObject() {
		return badMessages(where + ": Input should be an object")
	}
	role := m.Get("role").String()
	c := m.Get("content")
	if c.Type == gjson.String {
		switch role {
		case "user", "assistant", "system":
			b.msgs = append(b.msgs, chatMessage{Role: role, Content: refContentString(c)})
			return nil
		}
	} else if !c.IsArray() {
		return badMessages(where + ".content: Input should be a string or a list of content blocks")
	}
	switch role {
	case "user":
		return b.refAddUser(where, c)
	case "assistant":
		return b.refAddAssistant(where, c)
	case "system":
		content, err := refTextOnly(c, where+".content")
		if err != nil {
			return err
		}
		if content == nil {
			content = jsonString("")
		}
		b.msgs = append(b.msgs, chatMessage{Role: "system", Content: content})
		return nil
	}
	return badMessages(where + ".role: Input should be 'user' or 'assistant'")
}

// refAddUser adds a user turn: its tool results first, as tool messages right
// after the assistant's tool calls (Anthropic puts tool_result blocks first
// in the turn), then its text and images as one user message.
func (b *anthBuilder) refAddUser(where string, blocks gjson.Result) *apiError {
	var parts []map[string]any
	var results []chatMessage
	var err *apiError
	j := 0
	blocks.ForEach(func(_, bl gjson.Result) bool {
		at := where + ".content." + strconv.Itoa(j)
		j++
		switch typ := bl.Get("type").String(); typ {
		case "text", "image":
			var p map[string]any
			if p, err = refContentPart(at, bl); err == nil {
				parts = append(parts, p)
			}
		case "tool_result":
			id := bl.Get("tool_use_id").String()
			if !b.calls[id] {
				err = badMessages(at + ": unexpected `tool_use_id` found in `tool_result` blocks: " + id +
					". Each `tool_result` block must have a corresponding `tool_use` block in a previous message.")
				return false
			}
			var content json.RawMessage
			if content, err = refToolResultContent(at, bl.Get("content")); err == nil {
				results = append(results, chatMessage{Role: "tool", ToolCallID: id, Content: content})
			}
		default:
			if anthServerBlocks[typ] {
				b.skipped[typ]++
				return true
			}
			err = badMessages(at + ": content block type '" + typ + "' is not supported by hone in a user message")
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	b.msgs = append(b.msgs, results...)
	if len(parts) > 0 || len(results) == 0 {
		b.msgs = append(b.msgs, chatMessage{Role: "user", Content: refPartsContent(parts)})
	}
	return nil
}

// refContentPart turns a text or image block into a chat content part.
func refContentPart(at string, bl gjson.Result) (map[string]any, *apiError) {
	if bl.Get("type").String() == "text" {
		return map[string]any{"type": "text", "text": bl.Get("text").String()}, nil
	}
	src := bl.Get("source")
	var url string
	switch src.Get("type").String() {
	case "base64":
		url = "data:" + src.Get("media_type").String() + ";base64," + src.Get("data").String()
	case "url":
		url = src.Get("url").String()
	default:
		return nil, badMessages(at + ".source: image source type '" + src.Get("type").String() +
			"' is not supported by hone (base64 or url)")
	}
	return map[string]any{"type": "image_url", "image_url": map[string]any{"url": url}}, nil
}

// refToolResultContent is a tool_result's content (a string or text and image
// blocks) as chat content.
func refToolResultContent(at string, c gjson.Result) (json.RawMessage, *apiError) {
	switch {
	case !c.Exists() || c.Type == gjson.Null:
		return jsonString(""), nil
	case c.Type == gjson.String:
		return refContentString(c), nil
	case !c.IsArray():
		return nil, badMessages(at + ".content: Input should be a string or a list of content blocks")
	}
	var parts []map[string]any
	var err *apiError
	k := 0
	c.ForEach(func(_, bl gjson.Result) bool {
		in := at + ".content." + strconv.Itoa(k)
		k++
		switch typ := bl.Get("type").String(); typ {
		case "text", "image":
			var p map[string]any
			if p, err = refContentPart(in, bl); err == nil {
				parts = append(parts, p)
			}
		default:
			err = badMessages(in + ": content block type '" + typ + "' is not supported by hone in a tool_result")
		}
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	return refPartsContent(parts), nil
}

// refAddAssistant adds an assistant turn: text as content, thinking as
// reasoning_content, tool_use blocks as tool calls. redacted_thinking is
// accepted and left out: its data is encrypted for another model.
func (b *anthBuilder) refAddAssistant(where string, blocks gjson.Result) *apiError {
	var parts []map[string]any
	m := chatMessage{Role: "assistant"}
	var err *apiError
	j := 0
	blocks.ForEach(func(_, bl gjson.Result) bool {
		at := where + ".content." + strconv.Itoa(j)
		j++
		switch typ := bl.Get("type").String(); typ {
		case "text":
			parts = append(parts, map[string]any{"type": "text", "text": bl.Get("text").String()})
		case "thinking":
			m.ReasoningContent += bl.Get("thinking").String()
		case "redacted_thinking":
		case "tool_use":
			var tc chatToolCall
			tc.ID, tc.Type = bl.Get("id").String(), "function"
			tc.Function.Name = bl.Get("name").String()
			if tc.ID == "" || tc.Function.Name == "" {
				err = badMessages(at + ": a tool_use block needs id and name")
				return false
			}
			tc.Function.Arguments = refToolArguments(bl.Get("input"))
			b.calls[tc.ID] = true
			m.ToolCalls = append(m.ToolCalls, tc)
		default:
			if anthServerBlocks[typ] {
				b.skipped[typ]++
				return true
			}
			err = badMessages(at + ": content block type '" + typ + "' is not supported by hone in an assistant message")
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	if len(parts) > 0 || len(m.ToolCalls) == 0 {
		m.Content = refPartsContent(parts)
	}
	b.msgs = append(b.msgs, m)
	return nil
}

// refToolArguments is the chat arguments string of a tool_use input: the
// input's JSON, compacted; a string input is the model's own arguments
// that were not a JSON object (see anthInput), passed back as they were.
func refToolArguments(in gjson.Result) string {
	switch {
	case !in.Exists() || in.Type == gjson.Null:
		return "{}"
	case in.Type == gjson.String:
		return in.String()
	}
	var buf bytes.Buffer
	if json.Compact(&buf, []byte(in.Raw)) != nil {
		return in.Raw
	}
	return buf.String()
}

// refPartsContent is chat content for parts: a string for one text part, the
// parts otherwise (engines join text parts with "\n", as for any chat request).
func refPartsContent(parts []map[string]any) json.RawMessage {
	if len(parts) == 0 {
		return jsonString("")
	}
	if len(parts) == 1 && parts[0]["type"] == "text" {
		return jsonString(parts[0]["text"].(string))
	}
	b, _ := json.Marshal(parts)
	return b
}

// FuzzMessagesWalk: on any valid body the one-pass translation writes the
// bytes, warnings and errors that gjson's reading of it does.
func FuzzMessagesWalk(f *testing.F) {
	files, _ := filepath.Glob("testdata/messages/*/request.json")
	files = append(files, "../testdata/requests/messages-coding-40.json")
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	for _, s := range []string{
		`{"model":"m","max_tokens":1,"system":" s <b>","messages":[{"content":"x","role":"user","role":"assistant"}]}`,
		`{"model":"m","max_tokens":1,"system":[{"type":"text","text":"a\u00e9"},{"text":1.50,"type":"text"}],"messages":[{"role":"user","content":[],"content":"x"}]}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{"b": 1,"a":[2]}},{"type":"text","text":"t"},{"type":"thinking","thinking":"r"},{"type":"thinking","thinking":"s"}]},` +
			`{"role":"user","content":[{"type":"text"},{"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"x"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"QQ=="}}]},{"type":"image","source":{"type":"url","url":"u<&>"}}]}]}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"u"}},{"type":"text","text":"t"}]},{"role":"system","content":[]},{"role":"user","content":[{"type":"web_search_tool_result"}]}]}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"z"}]}]}`,
		`{"model":"m","max_tokens":1,"messages":[1,{"role":"user","content":{"a":1}}]}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":"x"}]}]}`,
		`{"model":"m","max_tokens":1,"messages":[]}`, `{"model":"m","max_tokens":1,"messages":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !jsonwalk.IsObject(body) {
			return // refused before translation
		}
		for _, count := range []bool{false, true} {
			got, gotWarns, gotErr := messagesChatWarn(gjson.ParseBytes(body), count, "")
			want, wantWarns, wantErr := refMessagesChatWarn(gjson.ParseBytes(body), count)
			if !bytes.Equal(got, want) || !reflect.DeepEqual(gotWarns, wantWarns) || !reflect.DeepEqual(gotErr, wantErr) {
				t.Fatalf("%s (count %v):\nwalk  %s %q %+v\ngjson %s %q %+v", body, count, got, gotWarns, gotErr, want, wantWarns, wantErr)
			}
		}
	})
}

// TestMessagesWalkRandom holds the walk to gjson's reading on Messages-shaped
// bodies made from the names and values a translation reads, in any order,
// repeated and mistyped (the fuzzer, mutating bytes, seldom keeps a body
// valid).
func TestMessagesWalkRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		body := []byte(randMessagesBody(r))
		if !jsonwalk.IsObject(body) {
			t.Fatalf("generated invalid JSON %s", body)
		}
		for _, count := range []bool{false, true} {
			got, gotWarns, gotErr := messagesChatWarn(gjson.ParseBytes(body), count, "")
			want, wantWarns, wantErr := refMessagesChatWarn(gjson.ParseBytes(body), count)
			if !bytes.Equal(got, want) || !reflect.DeepEqual(gotWarns, wantWarns) || !reflect.DeepEqual(gotErr, wantErr) {
				t.Fatalf("%s (count %v):\nwalk  %s %q %+v\ngjson %s %q %+v", body, count, got, gotWarns, gotErr, want, wantWarns, wantErr)
			}
		}
	}
}

func randMessagesBody(r *rand.Rand) string {
	var b strings.Builder
	b.WriteString(`{"model":"m","max_tokens":8`)
	switch r.IntN(12) {
	case 0:
		b.WriteString(`,"system":` + randValue(r, 2))
	case 1, 2:
		b.WriteString(`,"system":[` + randBlock(r, "text", nil) + `,` + randBlock(r, "text", nil) + `]`)
	}
	b.WriteString(`,"messages":[`)
	calls := []string{`"a"`, `"b"`}
	for i := range 1 + r.IntN(5) {
		if i > 0 {
			b.WriteByte(',')
		}
		if r.IntN(40) == 0 {
			b.WriteString(randValue(r, 1))
			continue
		}
		role := "assistant"
		switch n := r.IntN(40); {
		case n == 0:
			role = "tool"
		case n < 3:
			role = "system"
		case n < 20 && i > 0:
			role = "user"
		}
		b.WriteString(randObject(r, []string{`"role"`, `"content"`}, []string{`"role"`, `"content"`, `"x"`}, func(k string) string {
			if k == `"role"` {
				if r.IntN(20) == 0 {
					return pick(r, `1`, `"us\u0065r"`)
				}
				return `"` + role + `"`
			}
			if r.IntN(20) == 0 {
				return randValue(r, 2)
			}
			types := map[string][]string{"user": {"text", "tool_result", "image", "text"}, "assistant": {"text", "tool_use", "thinking", "redacted_thinking", "tool_use"}, "system": {"text"}}[role]
			if types == nil || r.IntN(30) == 0 {
				types = []string{"text", "tool_use", "tool_result", "image", "thinking", "web_search_tool_result", "document", "te\\u0078t"}
			}
			var c strings.Builder
			c.WriteByte('[')
			for j := range r.IntN(4) {
				if j > 0 {
					c.WriteByte(',')
				}
				c.WriteString(randBlock(r, types[r.IntN(len(types))], calls))
			}
			c.WriteByte(']')
			return c.String()
		}))
	}
	b.WriteString(`]}`)
	return b.String()
}

// randBlock writes a block of type typ with its fields, or now and then
// one mistyped or with fields of another type.
func randBlock(r *rand.Rand, typ string, calls []string) string {
	if r.IntN(40) == 0 {
		return randValue(r, 1)
	}
	must := map[string][]string{"text": {`"text"`}, "tool_use": {`"id"`, `"name"`, `"input"`}, "tool_result": {`"tool_use_id"`, `"content"`},
		"image": {`"source"`}, "thinking": {`"thinking"`}}[typ]
	extra := []string{`"type"`, `"text"`, `"thinking"`, `"id"`, `"name"`, `"input"`, `"tool_use_id"`, `"content"`, `"source"`, `"t\u0065xt"`, `"cache_control"`}
	return randObject(r, append([]string{`"type"`}, must...), extra, func(k string) string {
		switch k {
		case `"type"`:
			if r.IntN(30) == 0 {
				return pick(r, `2`, `null`, `"other"`)
			}
			return `"` + typ + `"`
		case `"id"`, `"tool_use_id"`:
			if r.IntN(20) == 0 {
				return pick(r, `""`, `3`, `"z"`)
			}
			return pick(r, append(calls, `"a"`)...)
		case `"name"`:
			if r.IntN(20) == 0 {
				return pick(r, `""`, `1`)
			}
			return pick(r, `"f"`, `"g\u00e9"`)
		case `"source"`:
			return randObject(r, []string{`"type"`, `"url"`, `"media_type"`, `"data"`}, nil, func(k string) string {
				if k == `"type"` {
					return pick(r, `"url"`, `"base64"`, `"url"`, `"base64"`, `"file"`, `null`)
				}
				return randValue(r, 0)
			})
		case `"content"`:
			if r.IntN(2) == 0 {
				return `[` + randBlock(r, pick(r, "text", "image", "text"), calls) + `,` + randBlock(r, "text", calls) + `]`
			}
		}
		return randValue(r, 2)
	})
}

// randObject writes an object with the keys of must in any order, some of
// extra, and now and then a key twice; val writes each value.
func randObject(r *rand.Rand, must, extra []string, val func(k string) string) string {
	keys := slices.Clone(must)
	for range r.IntN(3) {
		if len(extra) > 0 && r.IntN(2) == 0 {
			keys = append(keys, extra[r.IntN(len(extra))])
		}
	}
	if r.IntN(25) == 0 {
		keys = keys[:r.IntN(len(keys)+1)]
	}
	r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(pick(r, ",", " , "))
		}
		b.WriteString(k + ":" + val(k))
	}
	b.WriteByte('}')
	return b.String()
}

func randValue(r *rand.Rand, depth int) string {
	switch n := r.IntN(10); {
	case n < 4:
		return pick(r, `""`, `"x"`, `" a<b> & c\n"`, `"\u00e9\ud83d\ude00"`, `"tab\tq\"uote"`, `"é"`, `"\/"`, `"{\"k\": [1, 2]}"`)
	case n < 6:
		return pick(r, `0`, `1.50`, `-2`, `1e3`, `true`, `false`, `null`)
	case depth == 0:
		return `"leaf"`
	case n < 8:
		return `[` + randValue(r, depth-1) + `,` + randValue(r, depth-1) + `]`
	default:
		return `{"text":` + randValue(r, depth-1) + `,"type":"text","b": 1}`
	}
}

func pick(r *rand.Rand, vs ...string) string { return vs[r.IntN(len(vs))] }
