package proxy

import (
	"errors"

	"github.com/tidwall/gjson"
)

// covered reports whether tokens mode can serve a chat request: forced
// tool calls are (continuity_forced.go, continuity_forced_stream.go); what else vLLM
// enforces on chat only (response formats), prefills and custom templates
// go to the chat endpoint as sent. Strict or single tool calls under auto
// are covered here and left to the chat endpoint per engine
// (chatConstrained).
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

// chatConstrained says why vLLM (0.32) would constrain a chat request's
// tool calls where tool_choice is auto: with its default
// VLLM_ENFORCE_STRICT_TOOL_CALLING it builds a hermes structural tag for
// parallel_tool_calls false or strict tools
// (tool_parsers/structural_tag_registry.py), which its /v1/completions
// would take as structured_outputs.structural_tag, but in a form hone does
// not rebuild yet; "" when it would not. A forced call is constrained by
// its JSON schema instead (continuity_forced.go). hone's embedded engine
// constrains neither, so its engines get such calls as token ids
// (tokensOn).
func chatConstrained(doc gjson.Result) string {
	tools := doc.Get("tools")
	if !tools.IsArray() || len(tools.Array()) == 0 {
		return ""
	}
	if tc := doc.Get("tool_choice"); tc.IsObject() || tc.Type == gjson.String && tc.Str != "auto" {
		return "" // forced (constrained by a JSON schema) or none
	}
	why := ""
	if doc.Get("parallel_tool_calls").Type == gjson.False {
		why = "parallel_tool_calls false"
	}
	tools.ForEach(func(_, t gjson.Result) bool {
		if t.Get("strict").Bool() || t.Get("function.strict").Bool() {
			why = "strict tools"
		}
		return true
	})
	return why
}

// tokensOn reports whether engine e gets the plan's token-id request: any
// engine unless vLLM would constrain the call on its chat endpoint
// (chatConstrained), which only engines of kind embedded do not.
func (p *plan) tokensOn(e *engine) bool {
	if e.kind == "embedded" {
		return true
	}
	if why := chatConstrained(gjson.ParseBytes(p.up)); why != "" {
		p.k.log.Debug("continuity: chat body kept", "engine", e.url, "why", why)
		return false
	}
	return true
}
