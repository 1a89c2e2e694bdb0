package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/tidwall/gjson"
)

type testHone struct {
	s   *Server
	rec *MemRecorder
	url string
	reg *prometheus.Registry
}

func startHone(t *testing.T, mutate func(*Options), engines ...*stubEngine) *testHone {
	t.Helper()
	return startHoneWith(t, NewMemRecorder(), mutate, engines...)
}

// startHoneWith is startHone with another recorder (the capture store).
func startHoneWith(t *testing.T, rec Recorder, mutate func(*Options), engines ...*stubEngine) *testHone {
	t.Helper()
	return startHoneLog(t, rec, mutate, nil, engines...)
}

// startHoneLog is startHoneWith logging to log (nil: slog's default).
func startHoneLog(t *testing.T, rec Recorder, mutate func(*Options), log *slog.Logger, engines ...*stubEngine) *testHone {
	t.Helper()
	o := DefaultOptions()
	for _, e := range engines {
		o.Upstream.Engines = append(o.Upstream.Engines, EngineOptions{URL: e.url()})
	}
	o.Upstream.Health.Interval = 50 * time.Millisecond
	if mutate != nil {
		mutate(&o)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	s, err := New(o, rec, reg, log)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln) //nolint:errcheck
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	mem, _ := rec.(*MemRecorder)
	return &testHone{s: s, rec: mem, url: "http://" + ln.Addr().String(), reg: reg}
}

// rawResponse is an HTTP/1.1 response read off the wire, with the chunks of
// a chunked body kept apart so tests can see how the body was written.
type rawResponse struct {
	status  int
	header  http.Header
	body    []byte
	chunks  [][]byte
	readErr error
}

// post sends body over a fresh connection and reads the raw response.
func post(t *testing.T, base, path string, body []byte, hdr map[string]string) *rawResponse {
	t.Helper()
	return request(t, base, "POST", path, body, hdr)
}

func readRaw(t *testing.T, br *bufio.Reader) *rawResponse {
	t.Helper()
	tp := newTextReader(br)
	line, err := tp.ReadLine()
	if err != nil {
		t.Fatalf("read status: %v", err)
	}
	parts := strings.SplitN(line, " ", 3)
	r := &rawResponse{header: http.Header{}}
	r.status, _ = strconv.Atoi(parts[1])
	mh, err := tp.ReadMIMEHeader()
	if err != nil {
		t.Fatalf("read header: %v", err)
	}
	r.header = http.Header(mh)
	if cl := r.header.Get("Content-Length"); cl != "" {
		n, _ := strconv.Atoi(cl)
		r.body = make([]byte, n)
		_, r.readErr = io.ReadFull(br, r.body)
		return r
	}
	for {
		sz, err := br.ReadString('\n')
		if err != nil {
			r.readErr = err
			return r
		}
		n, err := strconv.ParseInt(strings.TrimSpace(sz), 16, 64)
		if err != nil {
			r.readErr = err
			return r
		}
		if n == 0 {
			return r
		}
		chunk := make([]byte, n+2)
		if _, err := io.ReadFull(br, chunk); err != nil {
			r.readErr = err
			return r
		}
		r.chunks = append(r.chunks, chunk[:n])
		r.body = append(r.body, chunk[:n]...)
	}
}

func waitCalls(t *testing.T, rec *MemRecorder, n int) []*capture.Call {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c := rec.Calls(); len(c) >= n {
			return c
		}
		select {
		case <-rec.Added():
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("recorder has %d calls, want %d", len(rec.Calls()), n)
	return nil
}

// TestFixtures replays every vLLM fixture: the agent must receive exactly
// what vLLM sends for its own request, and the recorded call must hold the
// fixture's token ids and logprobs.
func TestFixtures(t *testing.T) {
	entries, err := os.ReadDir("testdata/cases")
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range entries {
		name := ent.Name()
		t.Run(name, func(t *testing.T) {
			stub := newStub(t)
			h := startHone(t, nil, stub)
			req, _ := os.ReadFile(fixture(t, name, "request.json"))
			stream := gjson.GetBytes(req, "stream").Bool()
			up, cl := "upstream.json", "client.json"
			if stream {
				up, cl = "upstream.sse", "client.sse"
			}
			stub.answer = replay(t, fixture(t, name, up), 2*time.Millisecond)
			path := "/v1/chat/completions"
			route := capture.RouteChat
			if strings.HasPrefix(name, "completions") {
				path, route = "/v1/completions", capture.RouteCompletions
			}
			resp := post(t, h.url, path, req, map[string]string{"X-Hone-Session": "s-" + name, "Authorization": "Bearer sk-agent"})
			if resp.status != 200 || resp.readErr != nil {
				t.Fatalf("status %d err %v body %s", resp.status, resp.readErr, resp.body)
			}
			want, _ := os.ReadFile(fixture(t, name, cl))
			if !bytes.Equal(resp.body, want) {
				t.Fatalf("agent got:\n%s\nwant (vLLM's answer to the agent's own request):\n%s", resp.body, want)
			}
			if stream {
				for i, ch := range resp.chunks {
					if n := bytes.Count(ch, []byte("\n\n")); n != 1 || !bytes.HasSuffix(ch, []byte("\n\n")) {
						t.Fatalf("chunk %d holds %d events, want each event in its own write: %q", i, n, ch)
					}
				}
			}
			checkUpstreamRequest(t, stub, req, route)
			if got := resp.header.Get("X-Hone-Session"); got != "s-"+name {
				t.Errorf("X-Hone-Session = %q", got)
			}
			if resp.header.Get("X-Hone-Call") == "" || resp.header.Get("X-Hone-Policy") != "0" {
				t.Errorf("hone headers missing: %v", resp.header)
			}
			calls := waitCalls(t, h.rec, 1)
			checkRecord(t, calls[0], fixture(t, name, "record.json"), route)
		})
	}
}

// checkUpstreamRequest asserts what hone asked the engine for.
func checkUpstreamRequest(t *testing.T, stub *stubEngine, client []byte, route string) {
	t.Helper()
	body, hdr := stub.lastRequest()
	g := gjson.ParseBytes(body)
	if route == capture.RouteChat && !g.Get("logprobs").Bool() {
		t.Errorf("upstream request lacks logprobs: %s", body)
	}
	if route == capture.RouteCompletions && g.Get("logprobs").Type != gjson.Number {
		t.Errorf("upstream completions request lacks numeric logprobs: %s", body)
	}
	if !g.Get("return_token_ids").Bool() {
		t.Errorf("upstream request lacks return_token_ids: %s", body)
	}
	if c := gjson.GetBytes(client, "top_logprobs"); c.Exists() && g.Get("top_logprobs").Int() != c.Int() {
		t.Errorf("client's top_logprobs not kept: %s", body)
	}
	if gjson.GetBytes(client, "stream").Bool() && !g.Get("stream_options.include_usage").Bool() {
		t.Errorf("stream without include_usage: %s", body)
	}
	for k := range hdr {
		if strings.HasPrefix(strings.ToLower(k), "x-hone") {
			t.Errorf("hone header %s forwarded upstream", k)
		}
	}
	if hdr["Authorization"] != "Bearer sk-agent" {
		t.Errorf("agent's Authorization not forwarded: %v", hdr)
	}
}

func checkRecord(t *testing.T, c *capture.Call, path, route string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		PromptIDs []int32 `json:"prompt_token_ids"`
		Choices   []struct {
			TokenIDs  []int32   `json:"token_ids"`
			Logprobs  []float64 `json:"logprobs"`
			Content   string    `json:"content"`
			Reasoning string    `json:"reasoning"`
			Finish    string    `json:"finish_reason"`
			ToolCalls []struct {
				Name, Arguments string
			} `json:"tool_calls"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if c.Status != capture.StatusOK || c.ResponseID == "" || c.Request == nil || c.Response == nil {
		t.Errorf("record: status %s response id %q", c.Status, c.ResponseID)
	}
	stored := nulled(c.Response, c.ResponseNulls)
	if !gjson.ValidBytes(stored) {
		t.Errorf("recorded response is not JSON: %s", stored)
	}
	for _, p := range []string{"prompt_token_ids", "choices.#.prompt_token_ids"} { // kept once, as PromptIDs
		if v := gjson.GetBytes(stored, p); v.IsArray() && len(v.Array()) > 0 && (p == "prompt_token_ids" || v.Array()[0].IsArray()) {
			t.Errorf("recorded response keeps %s: %s", p, v.Raw)
		}
	}
	if len(c.Choices) != len(want.Choices) {
		t.Fatalf("recorded %d choices, want %d", len(c.Choices), len(want.Choices))
	}
	for i, w := range want.Choices {
		got := c.Choices[i]
		prompt := c.PromptIDs
		if route == capture.RouteCompletions {
			prompt = got.PromptIDs
		}
		if fmt.Sprint(prompt) != fmt.Sprint(want.PromptIDs) {
			t.Errorf("choice %d prompt ids %v, want %v", i, prompt, want.PromptIDs)
		}
		if fmt.Sprint(got.TokenIDs) != fmt.Sprint(w.TokenIDs) {
			t.Errorf("choice %d token ids %v, want %v", i, got.TokenIDs, w.TokenIDs)
		}
		if len(got.Logprobs) != len(w.Logprobs) {
			t.Fatalf("choice %d: %d logprobs, want %d", i, len(got.Logprobs), len(w.Logprobs))
		}
		for k := range w.Logprobs {
			if got.Logprobs[k] != float32(w.Logprobs[k]) {
				t.Errorf("choice %d logprob %d = %v, want %v", i, k, got.Logprobs[k], w.Logprobs[k])
			}
		}
		if got.Content != w.Content || got.Reasoning != w.Reasoning || got.FinishReason != w.Finish {
			t.Errorf("choice %d: content %q reasoning %q finish %q, want %q %q %q", i, got.Content, got.Reasoning,
				got.FinishReason, w.Content, w.Reasoning, w.Finish)
		}
		if len(got.ToolCalls) != len(w.ToolCalls) {
			t.Fatalf("choice %d: tool calls %+v, want %+v", i, got.ToolCalls, w.ToolCalls)
		}
		for k, tc := range w.ToolCalls {
			if got.ToolCalls[k].Name != tc.Name || got.ToolCalls[k].Arguments != tc.Arguments {
				t.Errorf("tool call %d = %+v, want %+v", k, got.ToolCalls[k], tc)
			}
		}
	}
}
