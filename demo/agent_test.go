package demo

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

func TestParseAnswerAndReward(t *testing.T) {
	task := Task{Answer: 391}
	for _, c := range []struct {
		reply string
		want  float64
	}{
		{"The answer is 391.", 1},
		{"391", 1},
		{"17*23 = 391", 1},
		{"The answer is 391.0.", 1},
		{"The answer is 390.", 0},
		{"391 or maybe 392", 0},
		{"I do not know.", 0},
		{"", 0},
		{"Done.", 0}, // the calculator's result does not count: the reply must state it
	} {
		if got := Reward(task, c.reply); got != c.want {
			t.Errorf("Reward(%q) = %v, want %v", c.reply, got, c.want)
		}
	}
	if n, ok := ParseAnswer("is -12."); !ok || n != "-12" {
		t.Errorf("ParseAnswer negative: %q %v", n, ok)
	}
}

func TestRunTool(t *testing.T) {
	for _, c := range []struct{ name, args, want string }{
		{"calculator", `{"expression": "6*7"}`, "42"},
		{"calculator", `{"expression": "6/7"}`, "0.8571428571428571"},
		{"calculator", `{"expression": "a*b"}`, "error: calculate \"a*b\": unexpected 'a' at 0"},
		{"calculator", `{"expression": "6/0"}`, "error: calculate \"6/0\": division by zero"},
		{"calculator", `not json`, "error: arguments are not a JSON object with an expression"},
		{"search", `{}`, `error: unknown tool "search"`},
	} {
		if got := RunTool(c.name, c.args); got != c.want {
			t.Errorf("RunTool(%s, %s) = %q, want %q", c.name, c.args, got, c.want)
		}
	}
}

// TestAgentConversation drives the agent against a scripted OpenAI server:
// a tool call, the tool result fed back, a final answer, then the closing
// request with the reward and commit headers.
func TestAgentConversation(t *testing.T) {
	var mu sync.Mutex
	var reqs []map[string]any
	var hdrs []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, "bad request", 400)
			return
		}
		mu.Lock()
		reqs, hdrs = append(reqs, body), append(hdrs, r.Header.Clone())
		n := len(reqs)
		mu.Unlock()
		w.Header().Set("X-Hone-Policy", "3")
		switch n {
		case 1:
			_, _ = w.Write([]byte(`{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"calculator","arguments":"{\"expression\": \"6*7\"}"}}]},"finish_reason":"tool_calls"}]}`))
		default:
			_, _ = w.Write([]byte(`{"choices":[{"message":{"role":"assistant","content":"The answer is 42."},"finish_reason":"stop"}]}`))
		}
	}))
	defer srv.Close()
	a := Agent{BaseURL: srv.URL + "/v1", Model: "hone", APIKey: "dummy", MaxTurns: 3, MaxTokens: 32}
	seed := int64(40)
	res, err := a.Solve(context.Background(), Task{ID: "t", Question: "6 boxes of 7?", A: 6, B: 7, Answer: 42},
		Attempt{Session: "s1", Task: "g1", Train: true, Seed: &seed})
	if err != nil {
		t.Fatal(err)
	}
	if res.Reward != 1 || res.Turns != 2 || res.ToolCalls != 1 || res.Policy != "3" {
		t.Fatalf("result %+v", res)
	}
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3 (tool call, answer, reward)", len(reqs))
	}
	msgs := reqs[1]["messages"].([]any)
	tool := msgs[2].(map[string]any)
	if len(msgs) != 3 || tool["role"] != "tool" || tool["content"] != "42" || tool["tool_call_id"] != "c1" {
		t.Fatalf("second request messages %v", msgs)
	}
	for i, h := range hdrs {
		if h.Get("X-Hone-Session") != "s1" || h.Get("X-Hone-Task") != "g1" || h.Get("X-Hone-Train") != "1" ||
			h.Get("Authorization") != "Bearer dummy" {
			t.Errorf("request %d headers %v", i, h)
		}
		if last := i == 2; (h.Get("X-Hone-Reward") != "") != last || (h.Get("X-Hone-Commit") == "1") != last {
			t.Errorf("request %d reward %q commit %q", i, h.Get("X-Hone-Reward"), h.Get("X-Hone-Commit"))
		}
	}
	if hdrs[2].Get("X-Hone-Reward") != "1" || reqs[2]["max_tokens"].(float64) != 1 {
		t.Errorf("closing request: reward %q body %v", hdrs[2].Get("X-Hone-Reward"), reqs[2])
	}
	for i, r := range reqs { // turn i samples with the attempt's seed + i
		if r["seed"] != float64(40+i) {
			t.Errorf("request %d seed %v, want %d", i, r["seed"], 40+i)
		}
	}
	// evaluation attempts are not training data and send no reward
	reqs, hdrs = nil, nil
	if _, err := a.Solve(context.Background(), Task{Answer: 1}, Attempt{Session: "e"}); err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 2 || hdrs[0].Get("X-Hone-Train") != "0" || hdrs[1].Get("X-Hone-Reward") != "" || reqs[0]["seed"] != nil {
		t.Fatalf("eval requests %d headers %v", len(reqs), hdrs)
	}
}

func TestAgentHTTPError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"no such model"}}`, 404)
	}))
	defer srv.Close()
	a := Agent{BaseURL: srv.URL + "/v1", Model: "x"}
	if _, err := a.Solve(context.Background(), Task{}, Attempt{Session: "s"}); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("err %v", err)
	}
}

func TestTextToolCalls(t *testing.T) {
	calls := TextToolCalls("<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"6*7\"}}\n</tool_call>")
	if len(calls) != 1 || calls[0].Function.Name != "calculator" || calls[0].Function.Arguments != `{"expression": "6*7"}` {
		t.Fatalf("calls %+v", calls)
	}
	if RunTool(calls[0].Function.Name, calls[0].Function.Arguments) != "42" {
		t.Fatal("tool result")
	}
	for _, s := range []string{"The answer is 42.", "<tool_call>\n{not json}\n</tool_call>", ""} {
		if c := TextToolCalls(s); len(c) != 0 {
			t.Errorf("TextToolCalls(%q) = %+v", s, c)
		}
	}
}

func FuzzTextToolCalls(f *testing.F) {
	f.Add("<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"1+2\"}}\n</tool_call>")
	f.Add("The answer is 3.")
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range TextToolCalls(s) {
			_ = RunTool(c.Function.Name, c.Function.Arguments)
		}
		_, _ = ParseAnswer(s)
	})
}
