package acceptance

import (
	"strconv"
	"testing"
	"time"

	"github.com/hone-rl/hone/capture"
)

// TestResponsesAPIThroughHone runs the official openai client's Responses
// API (create and stream, function tools, several turns, plain and with
// previous_response_id) through hone to a stub replaying vLLM fixtures and
// to the embedded engine: every call completes and is captured as a chat
// call with token ids and logprobs.
func TestResponsesAPIThroughHone(t *testing.T) {
	node := requireNode(t)
	for _, tc := range []struct{ name, expect, model string }{
		{"stub", "stub", "Qwen/Qwen3-0.6B"}, {"engine", "engine", "tiny"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := stubEngine(t)
			if tc.name == "engine" {
				up = embeddedEngine(t)
			}
			base, rec := startHone(t, up)
			session := "responses-" + tc.name + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
			runNode(t, node, "responses_client.mjs", "OPENAI_BASE_URL="+base+"/v1", "OPENAI_API_KEY=dummy",
				"HONE_EXPECT="+tc.expect, "HONE_MODEL="+tc.model, "HONE_SESSION="+session)
			checkRecorded(t, rec)
			n := 0
			for _, c := range rec.Calls() {
				if c.Session == session && c.Route == capture.RouteChat && c.Status == capture.StatusOK {
					n++
				}
			}
			if n < 6 {
				t.Fatalf("%d Responses calls captured under session %s, want the client's 6", n, session)
			}
		})
	}
}
