package capture

import (
	"encoding/json"
	"strings"
	"testing"
)

// chatCall is a call whose request has msgs (and extra top-level fields)
// and whose one choice is reply.
func chatCall(t *testing.T, id string, msgs []map[string]any, reply Choice, extra map[string]any) *Call {
	t.Helper()
	req := map[string]any{"model": "m", "messages": msgs}
	for k, v := range extra {
		req[k] = v
	}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return &Call{ID: id, Route: RouteChat, Request: b, Choices: []Choice{reply}}
}

func toolMsg(args string) map[string]any {
	return map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": "x", "type": "function",
		"function": map[string]any{"name": "calc", "arguments": args}}}}
}

func TestClassifyDrift(t *testing.T) {
	sys := map[string]any{"role": "system", "content": "Be brief."}
	user := map[string]any{"role": "user", "content": "What is 6*7?"}
	result := map[string]any{"role": "tool", "tool_call_id": "x", "content": "42"}
	sampled := Choice{ToolCalls: []ToolCall{{Name: "calc", Arguments: `{"a": 6, "b": 7}`}}, Reasoning: "I need the tool."}
	first := chatCall(t, "c1", []map[string]any{sys, user}, sampled, nil)
	plain := chatCall(t, "c1", []map[string]any{sys, user}, Choice{Content: "42."}, nil)
	noThink := chatCall(t, "c1", []map[string]any{sys, user}, Choice{ToolCalls: sampled.ToolCalls}, nil)
	for _, tc := range []struct {
		name    string
		earlier []*Call
		msgs    []map[string]any
		route   string
		cause   string
		message int
		against string
		extra   map[string]any // the new call's fields besides messages
	}{
		// vLLM parses arguments and renders them with tojson: other spacing
		// alone renders alike, so what else differs is named first
		{"spacing, reasoning dropped", []*Call{first}, []map[string]any{sys, user, toolMsg(`{"a":6,"b":7}`), result}, "", DriftReasoning, 2, "c1", nil},
		{"spacing only", []*Call{noThink}, []map[string]any{sys, user, toolMsg(`{"a":6,"b":7}`), result}, "", DriftToolArguments, 2, "c1", nil},
		{"spacing, the template drops the reasoning", []*Call{first},
			[]map[string]any{sys, user, withField(toolMsg(`{ "a": 6, "b": 7 }`), "reasoning_content", "I need the tool."), result}, "", DriftReasoning, 2, "c1", nil},
		{"reordered keys", []*Call{first}, []map[string]any{sys, user, toolMsg(`{"b": 7, "a": 6}`), result}, "", DriftToolArguments, 2, "c1", nil},
		{"reasoning dropped", []*Call{first}, []map[string]any{sys, user, toolMsg(`{"a": 6, "b": 7}`), result}, "", DriftReasoning, 2, "c1", nil},
		{"reasoning kept, the template drops it", []*Call{first},
			[]map[string]any{sys, user, withField(toolMsg(`{"a": 6, "b": 7}`), "reasoning_content", "I need the tool."), result}, "", DriftReasoning, 2, "c1", nil},
		{"reasoning in the content", []*Call{chatCall(t, "c1", []map[string]any{sys, user}, Choice{Content: "<think>\nhmm\n</think>\n\n42."}, nil)},
			[]map[string]any{sys, user, {"role": "assistant", "content": "42."}, {"role": "user", "content": "Thanks"}}, "", DriftReasoning, 2, "c1", nil},
		{"enable_thinking false", []*Call{chatCall(t, "c1", []map[string]any{sys, user}, Choice{Content: "42."},
			map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": false}})},
			[]map[string]any{sys, user, {"role": "assistant", "content": "42."}, {"role": "user", "content": "Thanks"}}, "", DriftReasoning, 2, "c1",
			map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": false}}},
		{"edited user turn wins over re-serialised arguments", []*Call{first},
			[]map[string]any{sys, {"role": "user", "content": "What is 6*8?"}, toolMsg(`{"a":6,"b":7}`), result}, "", DriftEdited, 1, "c1", nil},
		{"edited arguments", []*Call{first}, []map[string]any{sys, user, toolMsg(`{"a": 6, "b": 8}`), result}, "", DriftEdited, 2, "c1", nil},
		{"cut arguments completed by the client", []*Call{chatCall(t, "c1", []map[string]any{sys, user},
			Choice{ToolCalls: []ToolCall{{Name: "calc", Arguments: `{"a": 6, "b`}}, FinishReason: "length"}, nil)},
			[]map[string]any{sys, user, toolMsg(`{"a": 6}`), result}, "", DriftEdited, 2, "c1", nil},
		{"dropped turn", []*Call{first}, []map[string]any{sys}, "", DriftEdited, 1, "c1", nil},
		{"same messages, other tokens", []*Call{plain},
			[]map[string]any{sys, user, {"role": "assistant", "content": "42."}, {"role": "user", "content": "Thanks"}}, "", DriftUnknown, -1, "c1", nil},
		{"forced call sent back as sampled", []*Call{chatCall(t, "c1", []map[string]any{sys, user},
			Choice{ToolCalls: []ToolCall{{Name: "calc", Arguments: `{"a": 6}`}}}, map[string]any{"tool_choice": "required"})},
			[]map[string]any{sys, user, toolMsg(`{"a": 6}`), result}, "", DriftUnknown, -1, "c1", nil},
		{"tools dropped", []*Call{chatCall(t, "c1", []map[string]any{sys, user}, Choice{Content: "42."},
			map[string]any{"tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "calc"}}}})},
			[]map[string]any{sys, user, {"role": "assistant", "content": "42."}, {"role": "user", "content": "Thanks"}}, "", DriftEdited, -1, "c1", nil},
		{"completions call", []*Call{first}, nil, RouteCompletions, DriftUnknown, -1, "", nil},
		{"closest of two conversations", []*Call{first, chatCall(t, "c2", []map[string]any{{"role": "user", "content": "Hi"}}, Choice{Content: "Hello"}, nil)},
			[]map[string]any{{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Bye"}},
			"", DriftUnknown, -1, "c2", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := chatCall(t, "new", tc.msgs, Choice{Content: "ok"}, tc.extra)
			if tc.route == RouteCompletions {
				c.Route, c.Request = RouteCompletions, []byte(`{"model":"m","prompt":"hi"}`)
			}
			d := classifyDrift(c, tc.earlier)
			if strings.HasPrefix(tc.name, "cut") && !strings.Contains(d.Detail, "not JSON") {
				t.Errorf("detail %q", d.Detail)
			}
			if tc.name == "spacing only" && !strings.Contains(d.Detail, "(spacing only)") {
				t.Errorf("detail %q", d.Detail)
			}
			if strings.HasPrefix(tc.name, "forced") && !strings.Contains(d.Detail, "forced tool call") {
				t.Errorf("detail %q", d.Detail)
			}
			if d.Cause != tc.cause || d.Message != tc.message || d.Against != tc.against || d.Call != "new" {
				t.Errorf("got %+v, want cause %s at message %d against %q", d, tc.cause, tc.message, tc.against)
			}
			if d.Message >= 0 && d.Role != tc.msgs[min(d.Message, len(tc.msgs)-1)]["role"] && tc.name != "dropped turn" {
				t.Errorf("role %q", d.Role)
			}
		})
	}
}

func withField(m map[string]any, k string, v any) map[string]any {
	m[k] = v
	return m
}

// TestDriftCounts: each build counts only the drifts the session's last
// build did not, per cause.
func TestDriftCounts(t *testing.T) {
	old := []Drift{{Cause: DriftEdited}}
	now := []Drift{{Cause: DriftEdited}, {Cause: DriftEdited}, {Cause: DriftToolArguments}}
	b, a := driftCounts(old), driftCounts(now)
	if a[DriftEdited]-b[DriftEdited] != 1 || a[DriftToolArguments]-b[DriftToolArguments] != 1 || a[DriftReasoning] != 0 {
		t.Errorf("before %v after %v", b, a)
	}
}
