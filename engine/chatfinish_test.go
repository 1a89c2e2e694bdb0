package engine

import (
	"encoding/json"
	"testing"
)

// TestChatFinish: finish_reason as vLLM 0.32's serving.py reports it for
// tool calls, streamed and not.
func TestChatFinish(t *testing.T) {
	named := `{"type": "function", "function": {"name": "search"}}`
	for _, c := range []struct {
		choice, finish string
		called, stream bool
		want           string
	}{
		{``, "stop", false, false, "stop"},
		{``, "stop", true, false, "tool_calls"},
		{``, "length", true, false, "tool_calls"}, // auto_tools_called wins non-streamed
		{``, "length", true, true, "length"},      // streamed: only when the engine stopped
		{`"auto"`, "stop", true, true, "tool_calls"},
		{`"required"`, "stop", true, false, "tool_calls"},
		{`"required"`, "length", true, false, "length"},
		{`"required"`, "stop", true, true, "tool_calls"},
		{named, "stop", true, false, "stop"},
		{named, "stop", true, true, "stop"},
		{named, "length", true, false, "length"},
		{`"none"`, "", false, false, "stop"},
	} {
		req := &chatRequest{ToolChoice: json.RawMessage(c.choice)}
		if got := chatFinish(req, c.called, c.finish, c.stream); got != c.want {
			t.Errorf("tool_choice %s finish %s called %v stream %v: %q, want %q", c.choice, c.finish, c.called, c.stream, got, c.want)
		}
	}
}
