package acceptance

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/proxy"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"
)

// conversationAPI sends a two-turn conversation (system prompt, question,
// the model's answer, a follow-up) in one agent API and returns the model's
// replies.
type conversationAPI struct {
	name string
	path string
	turn func(history []string, user string) map[string]any // request body for the next turn
	text func(body []byte) string                           // the reply's text
}

const (
	sysPrompt = "You are terse."
	question  = "Hello!"
	followUp  = "Say more."
)

var conversationAPIs = []conversationAPI{
	{"chat", "/v1/chat/completions", func(h []string, u string) map[string]any {
		msgs := []map[string]any{{"role": "system", "content": sysPrompt}, {"role": "user", "content": question}}
		if len(h) > 0 {
			msgs = append(msgs, map[string]any{"role": "assistant", "content": h[0]}, map[string]any{"role": "user", "content": u})
		}
		return map[string]any{"messages": msgs, "max_tokens": 12, "temperature": 0}
	}, func(b []byte) string { return gjson.GetBytes(b, "choices.0.message.content").String() }},
	{"responses", "/v1/responses", func(h []string, u string) map[string]any {
		in := []map[string]any{{"role": "user", "content": question}}
		if len(h) > 0 {
			in = append(in, map[string]any{"type": "message", "role": "assistant",
				"content": []map[string]any{{"type": "output_text", "text": h[0]}}}, map[string]any{"role": "user", "content": u})
		}
		return map[string]any{"instructions": sysPrompt, "input": in, "max_output_tokens": 12, "temperature": 0}
	}, func(b []byte) string {
		return gjson.GetBytes(b, `output.#(type=="message").content.0.text`).String()
	}},
	{"messages", "/v1/messages", func(h []string, u string) map[string]any {
		msgs := []map[string]any{{"role": "user", "content": question}}
		if len(h) > 0 {
			msgs = append(msgs, map[string]any{"role": "assistant", "content": []map[string]any{{"type": "text", "text": h[0]}}},
				map[string]any{"role": "user", "content": u})
		}
		return map[string]any{"system": sysPrompt, "messages": msgs, "max_tokens": 12, "temperature": 0}
	}, func(b []byte) string {
		return gjson.GetBytes(b, `content.#(type=="text").text`).String()
	}},
}

// TestOneConversationEveryAPI sends the same conversation through each
// agent API (chat completions, Responses, Anthropic Messages) to the same greedy engine: the captured trajectories must have
// identical token ids, loss masks and logprobs, since every API is captured
// as the engine's chat completions.
func TestOneConversationEveryAPI(t *testing.T) {
	engineURL := serveEngineAs(t, tinyModel(t), "tiny")
	store, err := capture.Open(filepath.Join(t.TempDir(), "capture"), capture.DefaultOptions(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	o := proxy.DefaultOptions()
	o.Upstream.Engines = []proxy.EngineOptions{{URL: engineURL}}
	s, err := proxy.New(o, store, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(t)
	go s.Serve(ln)
	defer s.Shutdown(context.Background())
	base := "http://" + ln.Addr().String()

	got := map[string]capture.Experience{}
	for _, api := range conversationAPIs {
		session := "apis-" + api.name
		var history []string
		for turn := 0; turn < 2; turn++ {
			body := api.turn(history, followUp)
			body["model"] = "tiny"
			b, _ := json.Marshal(body)
			req, _ := http.NewRequest("POST", base+api.path, bytes.NewReader(b))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("x-hone-session", session)
			if turn == 1 {
				req.Header.Set("x-hone-reward", "1")
				req.Header.Set("x-hone-commit", "1")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			out.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("%s turn %d: HTTP %d %s", api.name, turn, resp.StatusCode, out.Bytes())
			}
			history = append(history, api.text(out.Bytes()))
		}
		got[api.name] = experienceOf(t, store, session)
	}
	ref := got["chat"]
	if len(ref.Tokens) == 0 || slices.Index(ref.Mask, 1) < 0 {
		t.Fatalf("chat trajectory empty: %+v", ref)
	}
	for name, e := range got {
		if !slices.Equal(e.Tokens, ref.Tokens) || !slices.Equal(e.Mask, ref.Mask) || !slices.Equal(e.Logprobs, ref.Logprobs) {
			t.Errorf("%s trajectory differs from chat's:\n%v\n%v", name, e.Tokens, ref.Tokens)
		}
		if len(e.Steps) != 2 {
			t.Errorf("%s: %d steps, want 2", name, len(e.Steps))
		}
	}
}

// experienceOf waits for the session's one ready experience.
func experienceOf(t *testing.T, store *capture.Store, session string) capture.Experience {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		exps, err := store.Experiences(context.Background(), 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		var mine []capture.Experience
		for _, e := range exps {
			if e.Session == session {
				mine = append(mine, e)
			}
		}
		if len(mine) == 1 {
			return mine[0]
		}
		if len(mine) > 1 {
			t.Fatalf("session %s split into %d trajectories", session, len(mine))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("session %s never became ready", session)
	return capture.Experience{}
}
