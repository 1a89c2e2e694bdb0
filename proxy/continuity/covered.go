package continuity

import (
	"encoding/json"
	"errors"

	"github.com/hone-rl/hone/model/chat"
	"github.com/tidwall/gjson"
)

// covered reports whether tokens mode can serve a chat request: forced
// tool calls are (continuity_forced.go); what else vLLM
// enforces on chat only (response formats), prefills and custom templates
// go to the chat endpoint as sent. Strict or single tool calls under auto
// are covered: vLLM engines get vLLM's structural tag (structuralTag).
func covered(doc gjson.Result) error {
	why := ""
	tc := doc.Get("tool_choice")
	force := tc.Type == gjson.String && tc.Str == "required" || tc.IsObject()
	switch {
	case tc.Exists() && tc.Type != gjson.Null && tc.String() != "auto" && tc.String() != "none" && !force:
		why = "tool_choice " + tc.Raw
	}
	if rf := doc.Get("response_format.type"); rf.Exists() && rf.String() != "text" {
		why = "response_format " + rf.String()
	}
	for _, k := range []string{"continue_final_message", "echo"} {
		if doc.Get(k).Bool() {
			why = k
		}
	}
	if g := doc.Get("add_generation_prompt"); g.Exists() && !g.Bool() {
		why = "add_generation_prompt false"
	}
	if r := doc.Get("include_reasoning"); r.Type == gjson.False {
		why = "include_reasoning false"
	}
	for _, k := range []string{"chat_template", "reasoning_effort", "structured_outputs", "guided_json", "guided_regex",
		"guided_choice", "guided_grammar"} {
		if v := doc.Get(k); v.Exists() && v.Type != gjson.Null {
			why = k
		}
	}
	if _, err := forcedCall(doc); err != nil {
		why = err.Error()
	}
	if why != "" {
		return errors.New(why + ": " + errNotCovered.Error())
	}
	return nil
}

// structuralTag is the structural tag vLLM 0.32's chat endpoint constrains
// a request's tool calls with, for its /v1/completions as
// structured_outputs.structural_tag; nil when it constrains nothing. With
// its defaults (VLLM_ENFORCE_STRICT_TOOL_CALLING, --tool-strict-level auto,
// the hermes tool parser: parser/abstract_parser.py _apply_structural_tag,
// tool_parsers/structural_tag_registry.py) it does for forced calls
// (tool_choice required: one or more calls of the function tools; a named
// function: one call of it) and, under auto, when parallel_tool_calls is
// false or a tool is strict (text free until "<tool_call>", then calls).
// A call is one of the tools in either hermes layout, its arguments held to
// the tool's parameters schema when the tool is strict (any JSON value
// otherwise); with parallel_tool_calls false generation stops after the
// first call. hone's embedded engine gets embeddedTag instead.
func structuralTag(doc gjson.Result) []byte {
	tc := doc.Get("tool_choice")
	named, auto := "", !tc.Exists() || tc.Type == gjson.Null || (tc.Type == gjson.String && tc.Str == "auto")
	switch {
	case tc.IsObject():
		named = tc.Get("function.name").String()
	case !auto && (tc.Type != gjson.String || tc.Str != "required"):
		return nil // none
	}
	single := doc.Get("parallel_tool_calls").Type == gjson.False
	var tools []gjson.Result
	anyStrict := false
	doc.Get("tools").ForEach(func(_, t gjson.Result) bool {
		if t.Get("type").String() == "function" && (named == "" || t.Get("function.name").String() == named) {
			tools = append(tools, t.Get("function"))
			anyStrict = anyStrict || t.Get("function.strict").Type == gjson.True
		}
		return true
	})
	if len(tools) == 0 || (auto && !single && !anyStrict) {
		return nil
	}
	tags := hermesTags(tools, false)
	format := map[string]any{"type": "tags_with_separator", "tags": tags, "separator": "", "at_least_one": true,
		"stop_after_first": single || named != ""}
	if auto {
		format = map[string]any{"type": "triggered_tags", "triggers": []string{"<tool_call>"}, "tags": tags,
			"at_least_one": false, "stop_after_first": single, "excludes": []string{}}
	}
	b, err := marshalPlain(map[string]any{"type": "structural_tag", "format": format})
	if err != nil {
		return nil
	}
	return b
}

// hermesTag is one tool call layout of vLLM's hermes structural tag.
type hermesTag struct {
	Type    string `json:"type"`
	Begin   string `json:"begin"`
	Content struct {
		Type       string          `json:"type"`
		JSONSchema json.RawMessage `json:"json_schema"`
		Style      string          `json:"style"`
		AnyOrder   bool            `json:"any_order"`
		MaxWS      *int            `json:"max_whitespace_cnt"`
		Excludes   []string        `json:"excludes"`
	} `json:"content"`
	End string `json:"end"`
}

// The hermes layouts: a newline inside the tags (as the chat template
// writes calls), or none; vLLM's tag allows both.
var (
	hermesNewline = [2]string{"<tool_call>\n{\"name\": ", "}\n</tool_call>"}
	hermesLayouts = [][2]string{hermesNewline, {"<tool_call>{\"name\": ", "}</tool_call>"}}
)

// hermesTags lists each tool as vLLM's _hermes_tool_tags does: in both
// layouts, the name written as is, arguments held to the tool's parameters
// schema when the tool is strict (any JSON value otherwise), nothing
// excluded. For the embedded engine (embedded set) they are as its chat
// constraint has them: the newline layout only, the name a JSON string,
// every tool held to its schema, "</tool_call>" in no string.
func hermesTags(tools []gjson.Result, embedded bool) []hermesTag {
	layouts, excludes := hermesLayouts, []string{}
	if embedded {
		layouts, excludes = [][2]string{hermesNewline}, []string{"</tool_call>"}
	}
	var tags []hermesTag
	for _, fn := range tools {
		schema := json.RawMessage("true") // a tool not strict: any JSON value
		name := `"` + fn.Get("name").String() + `"`
		if p := fn.Get("parameters"); embedded {
			schema, name = embeddedArguments(p), templateString(fn.Get("name").String())
		} else if fn.Get("strict").Type == gjson.True && p.Exists() && p.Type != gjson.Null {
			schema = json.RawMessage(p.Raw)
		}
		for _, f := range layouts {
			t := hermesTag{Type: "tag", Begin: f[0] + name + `, "arguments": `, End: f[1]}
			t.Content.Type, t.Content.JSONSchema, t.Content.Style, t.Content.Excludes = "json_schema", schema, "json", excludes
			tags = append(tags, t)
		}
	}
	return tags
}

// embeddedArguments is the schema the embedded engine's chat holds a forced
// call's arguments to (engine toolArguments): no parameters, exactly {};
// an empty schema or true, any object; else the parameters.
func embeddedArguments(p gjson.Result) json.RawMessage {
	switch {
	case !p.Exists() || p.Type == gjson.Null:
		return json.RawMessage(`{"type":"object","additionalProperties":false}`)
	case p.Type == gjson.True || (p.IsObject() && len(p.Map()) == 0):
		return json.RawMessage(`{"type":"object"}`)
	}
	return json.RawMessage(p.Raw)
}

// templateString writes s as a JSON string as the chat template's tojson
// does (chat.ToJSON: no ASCII escapes), the way the embedded engine's chat
// constraint writes a tool's name.
func templateString(s string) string {
	q, _ := chat.ToJSON(quoted(s))
	return q
}

// embeddedTag is the structural tag equal to the constraint hone's embedded
// engine puts on a forced call on its chat endpoint (engine chatGuide):
// hermes calls in the template's newline layout, "\n" between them, the
// arguments held to each tool's schema, "</tool_call>" in no string; one
// call for a named function or with parallel_tool_calls false, else one
// or more. Sent with the token-id prompt, the engine samples what its chat
// would for the same prompt and seed. nil when the request forces no call.
func embeddedTag(doc gjson.Result) []byte {
	tc := doc.Get("tool_choice")
	named := ""
	switch {
	case tc.IsObject():
		named = tc.Get("function.name").String()
	case tc.Type != gjson.String || tc.Str != "required":
		return nil
	}
	var tools []gjson.Result
	doc.Get("tools").ForEach(func(_, t gjson.Result) bool {
		if named == "" || t.Get("function.name").String() == named {
			tools = append(tools, t.Get("function"))
		}
		return named == "" || len(tools) == 0 // the first tool of that name, as the engine
	})
	if len(tools) == 0 {
		return nil
	}
	single := named != "" || doc.Get("parallel_tool_calls").Type == gjson.False
	format := map[string]any{"type": "tags_with_separator", "tags": hermesTags(tools, true), "separator": "\n",
		"at_least_one": true, "stop_after_first": single}
	b, err := marshalPlain(map[string]any{"type": "structural_tag", "format": format})
	if err != nil {
		return nil
	}
	return b
}

// quoted is s as a JSON string.
func quoted(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}
