package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/prometheus/client_golang/prometheus"
)

// TestHeaderRewardDurableWhenAnswered: the answer to a call carrying
// X-Hone-Reward and X-Hone-Commit ends only once both are in the store,
// streaming or not, even with a slow capture batch.
func TestHeaderRewardDurableWhenAnswered(t *testing.T) {
	co := capture.DefaultOptions()
	co.Queue.BatchDelay = 300 * time.Millisecond // without the wait the answer would beat the batch
	store, err := capture.Open(t.TempDir(), co, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	for _, stream := range []bool{false, true} {
		stub := newStub(t)
		file := "upstream.json"
		name := "chat"
		if stream {
			name, file = "chat_stream", "upstream.sse"
		}
		stub.answer = replay(t, fixture(t, name, file), 0)
		h := startHoneWith(t, store, nil, stub)
		session := "durable-" + name
		r := post(t, h.url, "/v1/chat/completions", chatReq(stream),
			map[string]string{"x-hone-session": session, "x-hone-reward": "0.75", "x-hone-commit": "1"})
		if r.status != 200 || len(r.header.Values("X-Hone-Warning")) > 0 {
			t.Fatalf("%s: status %d warnings %v", name, r.status, r.header.Values("X-Hone-Warning"))
		}
		rec, calls, err := store.GetSession(context.Background(), session)
		if err != nil || rec == nil {
			t.Fatalf("%s: session not stored when the answer ended: %v", name, err)
		}
		if len(calls) != 1 || len(rec.Rewards) != 1 || rec.Rewards[0].Value != 0.75 || rec.State == capture.StateOpen {
			t.Fatalf("%s: answered before durable: %d calls, rewards %+v, state %s", name, len(calls), rec.Rewards, rec.State)
		}
	}
}

// TestFeedbackRightAfterStream: a streamed call without hone's reward
// headers is handed to the recorder before data: [DONE] reaches the agent,
// so feedback posted right after the stream finds the session, even with a
// slow capture batch (recorded after the last byte, it got "not found").
func TestFeedbackRightAfterStream(t *testing.T) {
	co := capture.DefaultOptions()
	co.Queue.BatchDelay = 300 * time.Millisecond
	store, err := capture.Open(t.TempDir(), co, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	stub := newStub(t)
	stub.answer = replay(t, fixture(t, "chat_stream", "upstream.sse"), 0)
	h := startHoneWith(t, store, nil, stub)
	r := post(t, h.url, "/v1/chat/completions", chatReq(true), map[string]string{"x-hone-session": "fb-after-stream"})
	if r.status != 200 {
		t.Fatalf("status %d", r.status)
	}
	reward := 1.0
	if _, err := store.Feedback(context.Background(), capture.FeedbackReq{Session: "fb-after-stream", Reward: &reward}); err != nil {
		t.Fatalf("feedback right after the stream: %v", err)
	}
}
