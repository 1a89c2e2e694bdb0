package proxy

import (
	"context"
	"testing"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/proxy/internal/sse"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"
)

// TestResponsesConversationSurvivesRestart: with the capture store's
// conversations (as hone serve wires them), a Responses API conversation
// outlives hone: after the data plane is stopped and the store closed and
// opened again, a new Server continues it by previous_response_id (the
// engine gets the earlier turns), for its client only. A Server left with
// the in-memory default does not know it.
func TestResponsesConversationSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	stub := newStub(t)
	keys := func(o *Options) { o.ClientKeys = []string{"sk-a", "sk-b"} }
	auth := func(k string) map[string]string { return map[string]string{"Authorization": "Bearer " + k} }
	start := func(durable bool) (*testHone, *capture.Store) {
		store, err := capture.Open(dir, capture.DefaultOptions(), prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = store.Close() }) // after the Server's shutdown (cleanups run last first)
		h := startHoneWith(t, store, keys, stub)
		if durable {
			o := DefaultOptions()
			h.s.SetConversations(store.Conversations(o.Responses.TTL, o.Responses.Max))
		}
		return h, store
	}

	h, store := start(true)
	stub.answer = replay(t, fixture(t, "chat_tools_stream", "upstream.sse"), 0)
	r := post(t, h.url, "/v1/responses", []byte(`{"model":"Qwen/Qwen3-0.6B","instructions":"Be brief.",
		"input":"What is 17 * 23?","stream":true,"tools":[{"type":"function","name":"calculator","parameters":{}}]}`),
		auth("sk-a"))
	var done gjson.Result
	for _, ev := range splitEvents(r.body) {
		if data, ok := sse.Data(ev); ok && gjson.GetBytes(data, "type").String() == "response.completed" {
			done = gjson.ParseBytes(data).Get("response")
		}
	}
	id, callID := done.Get("id").String(), done.Get(`output.#(type=="function_call").call_id`).String()
	if r.status != 200 || id == "" || callID == "" {
		t.Fatalf("first response: %d %s", r.status, r.body)
	}

	// a graceful restart: the data plane stops, then the store closes
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	h, _ = start(true)
	stub.answer = replay(t, fixture(t, "chat", "upstream.json"), 0)
	follow := []byte(`{"model":"Qwen/Qwen3-0.6B","instructions":"Be kind.","previous_response_id":"` + id +
		`","input":[{"type":"function_call_output","call_id":"` + callID + `","output":"391"}]}`)
	served := stub.served.Load()
	wantOpenAIError(t, post(t, h.url, "/v1/responses", follow, auth("sk-b")), 404) // another client's id
	r = post(t, h.url, "/v1/responses", follow, auth("sk-a"))
	if r.status != 200 || gjson.GetBytes(r.body, "previous_response_id").String() != id {
		t.Fatalf("follow-up after the restart: %d %s", r.status, r.body)
	}
	if n := stub.served.Load() - served; n != 1 {
		t.Fatalf("the engine got %d requests for the follow-ups, want 1", n)
	}
	req, _ := stub.lastRequest()
	msgs := gjson.GetBytes(req, "messages")
	var roles []string
	msgs.ForEach(func(_, m gjson.Result) bool { roles = append(roles, m.Get("role").String()); return true })
	if len(roles) != 4 || roles[0] != "system" || roles[1] != "user" || roles[2] != "assistant" || roles[3] != "tool" ||
		msgs.Get("0.content").String() != "Be kind." || msgs.Get("1.content").String() != "What is 17 * 23?" ||
		msgs.Get("2.tool_calls.0.id").String() != callID || msgs.Get("2.tool_calls.0.function.name").String() != "calculator" ||
		msgs.Get("3.tool_call_id").String() != callID || msgs.Get("3.content").String() != "391" {
		t.Fatalf("the engine did not get the earlier turns: %s", msgs.Raw)
	}
	// the follow-up's own response continues in turn, on the same Server
	next := []byte(`{"model":"Qwen/Qwen3-0.6B","input":"Thanks.","previous_response_id":"` +
		gjson.GetBytes(r.body, "id").String() + `"}`)
	if r := post(t, h.url, "/v1/responses", next, auth("sk-a")); r.status != 200 {
		t.Fatalf("second follow-up: %d %s", r.status, r.body)
	}
	req, _ = stub.lastRequest()
	if n := gjson.GetBytes(req, "messages.#").Int(); n != 5 { // user, assistant, tool, assistant, user: instructions are not inherited
		t.Fatalf("second follow-up sent %d messages: %s", n, req)
	}

	// without the store's conversations a new Server does not know the id
	mem := startHoneWith(t, nil, keys, stub)
	wantOpenAIError(t, post(t, mem.url, "/v1/responses", follow, auth("sk-a")), 404)
}
