package proxy

import (
	"encoding/json"
	"errors"

	"github.com/tidwall/gjson"
)

// covered reports whether tokens mode can serve a chat request: forced
// tool calls are (continuity_forced.go, continuity_forced_stream.go); what else vLLM
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
// a request's tool calls with under tool_choice auto, for its
// /v1/completions as structured_outputs.structural_tag; nil when it
// constrains nothing. With its defaults (VLLM_ENFORCE_STRICT_TOOL_CALLING,
// --tool-strict-level auto, the hermes tool parser:
// parser/abstract_parser.py _apply_structural_tag,
// tool_parsers/structural_tag_registry.py) it does when
// parallel_tool_calls is false or a tool is strict: text is free until
// "<tool_call>", then a call must be one of the function tools in either
// hermes layout, its arguments held to the tool's parameters schema when
// the tool is strict (any JSON value otherwise), and with
// parallel_tool_calls false generation stops after the first call.
// Forced calls are constrained by a JSON schema instead
// (continuity_forced.go). hone's embedded engine constrains neither, so it
// gets no tag.
func structuralTag(doc gjson.Result) []byte {
	if tc := doc.Get("tool_choice"); tc.Exists() && tc.Type != gjson.Null && (tc.Type != gjson.String || tc.Str != "auto") {
		return nil
	}
	single := doc.Get("parallel_tool_calls").Type == gjson.False
	var tools []gjson.Result
	anyStrict := false
	doc.Get("tools").ForEach(func(_, t gjson.Result) bool {
		if t.Get("type").String() == "function" {
			tools = append(tools, t.Get("function"))
			anyStrict = anyStrict || t.Get("function.strict").Type == gjson.True
		}
		return true
	})
	if len(tools) == 0 || (!single && !anyStrict) {
		return nil
	}
	type content struct {
		Type       string          `json:"type"`
		JSONSchema json.RawMessage `json:"json_schema"`
		Style      string          `json:"style"`
		AnyOrder   bool            `json:"any_order"`
		MaxWS      *int            `json:"max_whitespace_cnt"`
		Excludes   []string        `json:"excludes"`
	}
	type tag struct {
		Type    string  `json:"type"`
		Begin   string  `json:"begin"`
		Content content `json:"content"`
		End     string  `json:"end"`
	}
	var tags []tag
	for _, fn := range tools {
		schema := json.RawMessage("true") // a tool not strict: any JSON value
		if p := fn.Get("parameters"); fn.Get("strict").Type == gjson.True && p.Exists() && p.Type != gjson.Null {
			schema = json.RawMessage(p.Raw)
		}
		for _, f := range [][2]string{{"<tool_call>\n{\"name\": \"", "}\n</tool_call>"}, {"<tool_call>{\"name\": \"", "}</tool_call>"}} {
			tags = append(tags, tag{Type: "tag", Begin: f[0] + fn.Get("name").String() + `", "arguments": `,
				Content: content{Type: "json_schema", JSONSchema: schema, Style: "json", Excludes: []string{}}, End: f[1]})
		}
	}
	b, err := marshalPlain(map[string]any{"type": "structural_tag", "format": map[string]any{"type": "triggered_tags",
		"triggers": []string{"<tool_call>"}, "tags": tags, "at_least_one": false, "stop_after_first": single, "excludes": []string{}}})
	if err != nil {
		return nil
	}
	return b
}
