package proxy

import (
	"errors"

	"github.com/tidwall/gjson"
)

// covered reports whether tokens mode can serve a chat request: forced
// tool calls are (continuity_forced.go, non-streamed); what else vLLM
// enforces on chat only (response formats, strict or single tool calls
// under auto), prefills and custom templates go to the chat endpoint as
// sent.
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
	// vLLM (0.32) constrains tool calls with a structural tag for a single
	// call or strict tools, even with tool_choice auto (a forced call is
	// constrained by its JSON schema, continuity_forced.go)
	if tools := doc.Get("tools"); tools.IsArray() && len(tools.Array()) > 0 && !force {
		if doc.Get("parallel_tool_calls").Type == gjson.False {
			why = "parallel_tool_calls false"
		}
		tools.ForEach(func(_, t gjson.Result) bool {
			if t.Get("strict").Bool() || t.Get("function.strict").Bool() {
				why = "strict tools"
			}
			return true
		})
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
