package proxy

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/prometheus/client_golang/prometheus"
)

// TestContinuitySurvivesRestart: in tokens mode, an agent in the middle of
// a session when hone restarts (the data plane stopped, the store closed
// and opened again, a new Server) goes on with the token ids the engine
// sampled: the new Server restores the served turns from the store's
// latest calls, splices the sampled ids back into the second call's prompt
// and the session stays one path (drift 0). Without the restore the
// client's re-serialised history (tool-call arguments compacted, reasoning
// dropped) would be rendered afresh and start a new path.
func TestContinuitySurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	v := newScriptedVLLM(t, calcOutputs...)
	stub := newStub(t)
	stub.answer = v.handle
	start := func() (*testHone, *capture.Store) {
		store, err := capture.Open(dir, capture.DefaultOptions(), prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = store.Close() })
		h := startHoneWith(t, store, func(o *Options) {
			o.Continuity = ContinuityTokens
			o.Upstream.Tokenizer = tinyModel
		}, stub)
		waitProbe(t, h.s, stub.url())
		return h, store
	}
	h, store := start()
	msgs := []any{
		map[string]any{"role": "system", "content": "You are a calculator agent."},
		map[string]any{"role": "user", "content": "What is 17 * 23?"},
	}
	m1, _ := chatTurn(t, h, "r1", msgs, false)
	waitRecorded(t, store, "r1", 1, false)
	tcs, _ := m1["tool_calls"].([]any)
	if len(tcs) != 1 {
		t.Fatalf("first answer has no tool call: %v", m1)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	h, store = start()
	msgs = append(msgs, reserialise(t, m1), map[string]any{"role": "tool", "tool_call_id": tcs[0].(map[string]any)["id"],
		"content": "391"})
	chatTurn(t, h, "r1", msgs, false, "X-Hone-Reward", "1", "X-Hone-Commit", "1")
	drift, leaves, cs := sessionDrift(t, store, "r1", 2)
	if drift != 0 || leaves != 1 {
		t.Fatalf("after the restart: drift %d, %d trajectories; want one path", drift, leaves)
	}
	glue := v.tok.Encode("\n<|im_start|>user\n<tool_response>\n391\n</tool_response><|im_end|>\n<|im_start|>assistant\n")
	if want := slices.Concat(cs[0].PromptIDs, cs[0].Choices[0].TokenIDs, glue); !slices.Equal(cs[1].PromptIDs, want) {
		t.Errorf("second prompt %q,\nwant %q", v.tok.Decode(cs[1].PromptIDs), v.tok.Decode(want))
	}
	if n := metricValue(t, h, "hone_continuity_calls_total", "result", "spliced"); n != 1 {
		t.Errorf("spliced calls after the restart %v, want 1", n)
	}
}
