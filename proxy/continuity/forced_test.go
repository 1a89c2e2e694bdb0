package continuity

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestForcedNoHermes: with a chat template that writes no hermes calls (a
// Llama 3 template, say: vLLM constrains forced calls with that model's own
// format, which hone does not build), a forced call is not planned (it goes
// to the chat endpoint as sent) and is counted observed; a free call of the
// same session is planned as token ids.
func TestForcedNoHermes(t *testing.T) {
	k, err := New(tinyModel, nil, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	k.parse.Tools = false // as loaded from a template without <tool_call>
	msgs := []any{map[string]any{"role": "user", "content": "What is 17 * 23?"}}
	for i, choice := range []any{"required", "none"} {
		body, _ := json.Marshal(map[string]any{"model": "Qwen/Qwen3-0.6B", "messages": msgs, "max_tokens": 64,
			"tools": []json.RawMessage{json.RawMessage(calcTool)}, "tool_choice": choice})
		p, err := k.Plan("call-"+string(rune('a'+i)), "nh", body, body)
		switch {
		case choice == "required" && (err == nil || !strings.Contains(err.Error(), "hermes")):
			t.Errorf("forced call planned (%v), want it observed for want of hermes calls", err)
		case choice == "none" && (err != nil || p == nil):
			t.Errorf("free call not planned: %v", err)
		}
	}
	if n := testutil.ToFloat64(k.calls.WithLabelValues("observe")); n != 1 {
		t.Errorf("%v calls observed, want 1", n)
	}
}
