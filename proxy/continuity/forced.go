package continuity

import (
	"errors"

	"github.com/tidwall/gjson"
)

// Forced tool calls in continuity mode tokens: tool_choice "required" or a
// named function. They go as token ids with a structural tag of hermes
// calls (continuity_covered.go): towards vLLM the tag its own chat endpoint
// builds (structuralTag), towards hone's embedded engine the tag equal to
// its chat endpoint's constraint (embeddedTag). The output is parsed as
// hermes calls, as those chat endpoints parse it. The message's content is
// "" (vLLM's `content or ""`), the finish reason "tool_calls" for required
// when the engine stopped, the engine's otherwise (named: "stop"). A chat
// template that writes no hermes calls leaves forced calls to the chat
// endpoint (vLLM constrains those with its model's own format).

// forced is a plan's forced tool call.
type forced struct {
	named string // the named function; "" for required
}

// forcedCall reads a covered request's forced tool call: nil when
// tool_choice does not force one; an error when tokens mode leaves the call
// to the chat endpoint (no tools, an unknown name).
func forcedCall(doc gjson.Result) (*forced, error) {
	tc := doc.Get("tool_choice")
	named := ""
	switch {
	case tc.Type == gjson.String && tc.Str == "required":
	case tc.IsObject() && tc.Get("function.name").Type == gjson.String && tc.Get("function.name").Str != "":
		named = tc.Get("function.name").Str
	case tc.IsObject():
		return nil, errors.New("tool_choice " + tc.Raw)
	default:
		return nil, nil
	}
	tools := doc.Get("tools")
	if !tools.IsArray() || len(tools.Array()) == 0 {
		return nil, errors.New("forced tool call without tools")
	}
	if named == "" {
		for _, t := range tools.Array() {
			if !t.Get("type").Exists() || t.Get("type").String() == "function" {
				return &forced{}, nil
			}
		}
		return nil, errors.New("forced tool call without function tools")
	}
	for _, t := range tools.Array() {
		if t.Get("function.name").String() == named {
			return &forced{named: named}, nil
		}
	}
	return nil, errors.New("tool_choice names no tool of the request")
}

// forcedFinish is vLLM's chat finish reason for a forced call: tool_calls
// for required when the engine stopped, else the engine's.
func (f *forced) finish(v gjson.Result) *string {
	if v.Type != gjson.String {
		return nil
	}
	s := v.Str
	if f.named == "" && s == "stop" {
		s = "tool_calls"
	}
	return &s
}
