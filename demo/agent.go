package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/hone-rl/hone/model/chat"
)

// Agent is a minimal ReAct agent: it asks the model, runs the calculator
// tool calls the model makes, feeds the results back and stops at the
// first reply without tool calls. It speaks only the OpenAI chat API (to
// hone's data plane), adding hone's optional X-Hone-* headers.
//
// With Tools set, requests carry the calculator's tool definition and the
// engine's hermes parser returns tool_calls. Without it (text mode, what
// the demo's tiny model is trained for: the tool list would quadruple every
// prompt), the model writes the same hermes <tool_call> blocks into its
// content and the agent parses them; the conversation renders identically
// apart from the tool list in the system turn.
type Agent struct {
	BaseURL     string // the OpenAI base URL, e.g. http://127.0.0.1:8080/v1
	Model       string
	APIKey      string
	Client      *http.Client
	Tools       bool    // send the tool list (native tool calling)
	MaxTurns    int     // model calls per problem before giving up
	MaxTokens   int     // per call
	Temperature float64 // 0: greedy
}

// Attempt identifies one try at a task for hone: the session, the task
// group (X-Hone-Task), whether it is training data, and the sampling seed.
type Attempt struct {
	Session string
	Task    string
	Train   bool
	// Seed, when set, seeds the engine's sampler: the request of turn i
	// sends seed *Seed+i, so an attempt samples the same tokens every run.
	Seed *int64
}

// Result is the outcome of one attempt.
type Result struct {
	Task      string   `json:"task"`
	Session   string   `json:"session"`
	Answer    string   `json:"answer"` // the final reply
	Reward    float64  `json:"reward"` // 1 when the answer is right (see Reward)
	Turns     int      `json:"turns"`  // model calls
	ToolCalls int      `json:"tool_calls"`
	Tools     []string `json:"tools,omitempty"` // tool call arguments and results, "args -> result"
	Policy    string   `json:"policy"`          // X-Hone-Policy of the last call
	Result    string   `json:"result"`          // the last calculator result

	msgs []message // the conversation, for the closing request
}

// message is an OpenAI chat message as the agent sends and receives it.
type message struct {
	Role       string     `json:"role"`
	Content    *string    `json:"content"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

type toolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatResponse struct {
	Choices []struct {
		Message      message `json:"message"`
		FinishReason string  `json:"finish_reason"`
	} `json:"choices"`
}

func text(s string) *string { return &s }

// Solve runs one attempt at t and, with at.Train set, closes it (Commit).
func (a *Agent) Solve(ctx context.Context, t Task, at Attempt) (Result, error) {
	res, err := a.Try(ctx, t, at)
	if err != nil || !at.Train {
		return res, err
	}
	return res, a.Commit(ctx, at, res)
}

// Try runs one attempt at t: it asks the model, runs the calculator calls
// it writes, and stops at the first reply without tool calls. It does not
// close the session (Commit does).
func (a *Agent) Try(ctx context.Context, t Task, at Attempt) (Result, error) {
	res := Result{Task: t.ID, Session: at.Session}
	msgs := []message{{Role: "user", Content: text(t.Question)}}
	for res.Turns < max(a.MaxTurns, 1) {
		reply, policy, err := a.chat(ctx, msgs, a.MaxTokens, at, res.Turns, nil)
		if err != nil {
			return res, err
		}
		res.Turns++
		res.Policy = policy
		msgs = append(msgs, reply)
		calls := reply.ToolCalls
		if len(calls) == 0 && reply.Content != nil {
			calls = TextToolCalls(*reply.Content)
		}
		if len(calls) == 0 {
			if reply.Content != nil {
				res.Answer = *reply.Content
			}
			break
		}
		for _, tc := range calls {
			res.ToolCalls++
			out := RunTool(tc.Function.Name, tc.Function.Arguments)
			res.Tools = append(res.Tools, tc.Function.Arguments+" -> "+out)
			res.Result = out
			msgs = append(msgs, message{Role: "tool", ToolCallID: tc.ID, Content: text(out)})
		}
	}
	res.Reward = Reward(t, res.Answer)
	res.msgs = msgs
	return res, nil
}

// Commit sends the attempt's closing request: the reward (X-Hone-Reward)
// and the end of the session (X-Hone-Commit) on a one-token request after
// the answer, since the reward is only known then.
func (a *Agent) Commit(ctx context.Context, at Attempt, res Result) error {
	msgs := append(append([]message(nil), res.msgs...), message{Role: "user", Content: text("Thanks.")})
	_, _, err := a.chat(ctx, msgs, 1, at, res.Turns, map[string]string{
		"X-Hone-Reward": strconv.FormatFloat(res.Reward, 'g', -1, 64), "X-Hone-Commit": "1"})
	return err
}

// TextToolCalls parses hermes <tool_call> blocks written into a reply's
// content (text mode); nil when there are none or one is malformed.
func TextToolCalls(content string) []toolCall {
	out := chat.ParseOutput(content, chat.ParseOptions{Tools: true})
	calls := make([]toolCall, 0, len(out.ToolCalls))
	for _, c := range out.ToolCalls {
		tc := toolCall{ID: c.ID, Type: "function"}
		tc.Function.Name, tc.Function.Arguments = c.Name, c.Arguments
		calls = append(calls, tc)
	}
	return calls
}

// RunTool executes a tool call and returns what the tool message carries:
// the result, or an error text the model can read.
func RunTool(name, arguments string) string {
	if name != ToolName {
		return "error: unknown tool " + strconv.Quote(name)
	}
	var args struct {
		Expression string `json:"expression"`
	}
	if err := json.Unmarshal([]byte(arguments), &args); err != nil {
		return "error: arguments are not a JSON object with an expression"
	}
	v, err := Calculate(args.Expression)
	if err != nil {
		return "error: " + err.Error()
	}
	return v
}

var lastNumber = regexp.MustCompile(`-?\d+(\.\d+)?`)

// ParseAnswer returns the last number in a final reply.
func ParseAnswer(reply string) (string, bool) {
	all := lastNumber.FindAllString(reply, -1)
	if len(all) == 0 {
		return "", false
	}
	return all[len(all)-1], true
}

// Reward is 1 when the last number of the final reply equals the task's
// answer, else 0.
func Reward(t Task, reply string) float64 {
	n, ok := ParseAnswer(reply)
	if !ok {
		return 0
	}
	v, err := strconv.ParseFloat(n, 64)
	if err != nil || v != float64(t.Answer) {
		return 0
	}
	return 1
}

// chat sends one chat completion (the attempt's turn-th) and returns the
// reply message and the policy version hone reports.
func (a *Agent) chat(ctx context.Context, msgs []message, maxTokens int, at Attempt, turn int, extra map[string]string) (message, string, error) {
	req := map[string]any{"model": a.Model, "messages": msgs, "max_tokens": maxTokens, "temperature": a.Temperature}
	if at.Seed != nil {
		req["seed"] = *at.Seed + int64(turn)
	}
	if a.Tools {
		req["tools"] = []json.RawMessage{CalculatorTool}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return message{}, "", fmt.Errorf("encode chat request: %w", err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(a.BaseURL, "/")+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return message{}, "", fmt.Errorf("chat request: %w", err)
	}
	return a.send(hr, at, extra)
}

// send adds the headers, posts and decodes the reply.
func (a *Agent) send(req *http.Request, at Attempt, extra map[string]string) (message, string, error) {
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+a.APIKey)
	req.Header.Set("X-Hone-Session", at.Session)
	if at.Task != "" {
		req.Header.Set("X-Hone-Task", at.Task)
	}
	req.Header.Set("X-Hone-Train", map[bool]string{true: "1", false: "0"}[at.Train])
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	client := a.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return message{}, "", fmt.Errorf("chat: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return message{}, "", fmt.Errorf("chat: read response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return message{}, "", fmt.Errorf("chat: HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(raw))
	}
	var cr chatResponse
	if err := json.Unmarshal(raw, &cr); err != nil || len(cr.Choices) == 0 {
		return message{}, "", fmt.Errorf("chat: unexpected response %.200s", raw)
	}
	m := cr.Choices[0].Message
	m.Role = "assistant"
	return m, resp.Header.Get("X-Hone-Policy"), nil
}
