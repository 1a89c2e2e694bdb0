package engine

import (
	"encoding/json"
	"testing"
)

// TestSingleToolCall: parallel_tool_calls false keeps the first of two
// sampled tool calls, in the message and in the stream's deltas, as vLLM's
// chat does (maybe_filter_parallel_tool_calls).
func TestSingleToolCall(t *testing.T) {
	e := &Engine{opts: Options{ToolCallParser: "hermes"}}
	text := "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": {}}\n</tool_call>"
	f := false
	for _, par := range []*bool{nil, &f} {
		job := &chatJob{req: chatRequest{Tools: json.RawMessage(`[{"type":"function","function":{"name":"f"}}]`), ParallelToolCalls: par}}
		want := 2
		if par != nil {
			want = 1
		}
		if _, _, calls := e.parseOutput(text, job); len(calls) != want {
			t.Errorf("parallel %v: %d calls, want %d", par, len(calls), want)
		}
		p := e.newDeltaParser(job)
		seen := map[int]bool{}
		for _, d := range append([]msgDelta{p.Feed(text)}, p.Close()) {
			for _, tc := range d.ToolCalls {
				seen[tc.Index] = true
			}
		}
		if len(seen) != want {
			t.Errorf("parallel %v: streamed calls %v, want %d", par, seen, want)
		}
	}
}
