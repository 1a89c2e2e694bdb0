package acceptance

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/tidwall/gjson"
)

// TestAnthropicClientThroughHone runs the official Anthropic client
// (@anthropic-ai/sdk: messages.create and messages.stream with tools over
// several turns, thinking blocks sent back, the raw event stream,
// countTokens, errors) through hone's Messages API to a stub replaying vLLM
// hermes tool-call and reasoning fixtures and to the embedded engine: every
// call completes and is captured as a chat call with token ids and logprobs.
func TestAnthropicClientThroughHone(t *testing.T) {
	node := requireNode(t)
	requirePackage(t, "@anthropic-ai/sdk", "@anthropic-ai", "sdk", "package.json")
	for _, tc := range []struct{ name, model string }{{"stub", "Qwen/Qwen3-0.6B"}, {"engine", "tiny"}} {
		t.Run(tc.name, func(t *testing.T) {
			up := messagesStubEngine(t)
			if tc.name == "engine" {
				up = embeddedEngine(t)
			}
			base, rec := startHone(t, up)
			session := "anthropic-" + tc.name + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
			runNode(t, node, "anthropic_client.mjs", "ANTHROPIC_BASE_URL="+base, "ANTHROPIC_API_KEY=dummy",
				"HONE_EXPECT="+tc.name, "HONE_MODEL="+tc.model, "HONE_SESSION="+session)
			checkRecorded(t, rec)
			n, tools := 0, 0
			for _, c := range rec.Calls() {
				if c.Session != session || c.Route != capture.RouteChat || c.Status != capture.StatusOK {
					continue
				}
				n++
				if strings.Contains(string(c.Request), `"role":"tool"`) {
					tools++
				}
			}
			// create: 1 + 3 turns, stream: 3 turns, raw stream: 1
			if n < 8 || tools < 4 {
				t.Fatalf("%d Messages calls captured under session %s (%d with a tool result), want the client's 8 (4)", n, session, tools)
			}
		})
	}
}

// messagesStubEngine replays the proxy's vLLM fixtures for a tool-using
// conversation: the hermes tool call while the last message is the user's,
// the reasoning answer once it is a tool result (streamed when asked), and
// /tokenize for count_tokens.
func messagesStubEngine(t *testing.T) string {
	cases := filepath.Join("..", "proxy", "testdata", "cases")
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"object":"list","data":[{"id":"Qwen/Qwen3-0.6B","object":"model","created":1,"owned_by":"vllm","root":"Qwen/Qwen3-0.6B","parent":null,"max_model_len":40960,"permission":[]}]}`))
	})
	mux.HandleFunc("/tokenize", func(w http.ResponseWriter, r *http.Request) {
		var body bytes.Buffer
		body.ReadFrom(r.Body)
		n := len(gjson.GetBytes(body.Bytes(), "messages").Raw) / 4 // a stand-in count; the engine case counts for real
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"count":` + strconv.Itoa(n) + `,"max_model_len":40960,"tokens":[],"token_strs":null}`))
	})
	mux.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var body bytes.Buffer
		body.ReadFrom(r.Body)
		req := body.Bytes()
		name, stream := "chat", "chat_stream"
		msgs := gjson.GetBytes(req, "messages").Array()
		switch {
		case len(msgs) > 0 && msgs[len(msgs)-1].Get("role").String() == "tool":
			name, stream = "chat_reasoning", "chat_reasoning_content_stream"
		case gjson.GetBytes(req, "tools").Exists():
			name, stream = "chat_tools", "chat_tools_stream"
		}
		if !gjson.GetBytes(req, "stream").Bool() {
			w.Header().Set("Content-Type", "application/json")
			b, _ := os.ReadFile(filepath.Join(cases, name, "upstream.json"))
			w.Write(b)
			return
		}
		b, _ := os.ReadFile(filepath.Join(cases, stream, "upstream.sse"))
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range strings.SplitAfter(string(b), "\n\n") {
			w.Write([]byte(ev))
			w.(http.Flusher).Flush()
		}
	})
	ln := listen(t)
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}
