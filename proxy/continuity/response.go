package continuity

import (
	"bytes"
	"crypto/rand"
	hexenc "encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/hone-rl/hone/internal/jsonwalk"
	"github.com/hone-rl/hone/model/chat"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// The engine answers a token-id prompt in the completions format; these
// types are the chat completion it would have sent for the chat request, in
// vLLM's field order (model/chat parses reasoning and hermes tool calls as
// vLLM's qwen3 and hermes parsers do). Raw numbers (logprobs, usage) are
// copied as the engine wrote them.

type contMessage struct {
	Role         string         `json:"role"`
	Content      *string        `json:"content"`
	Refusal      *string        `json:"refusal"`
	Annotations  *struct{}      `json:"annotations"`
	Audio        *struct{}      `json:"audio"`
	FunctionCall *struct{}      `json:"function_call"`
	ToolCalls    []contToolCall `json:"tool_calls,omitempty"`
	Reasoning    *string        `json:"reasoning"`
}

type contToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function contFunction `json:"function"`
}

type contFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type contLogprob struct {
	Token   string          `json:"token"`
	Logprob json.RawMessage `json:"logprob"`
	Bytes   []int           `json:"bytes"`
}

type contLogprobEntry struct {
	contLogprob
	TopLogprobs []contLogprob `json:"top_logprobs"`
}

type contLogprobs struct {
	Content []contLogprobEntry `json:"content"`
}

type contChoice struct {
	Index        int             `json:"index"`
	Message      contMessage     `json:"message"`
	Logprobs     *contLogprobs   `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
	StopReason   json.RawMessage `json:"stop_reason"`
	TokenIDs     []int32         `json:"token_ids"`
	// RoutedExperts and the response's PromptText, ECTransferParams and
	// Metrics are vLLM 0.32's: written when the engine's completions
	// answer has them (the embedded engine's has not).
	RoutedExperts json.RawMessage `json:"routed_experts,omitempty"`
}

type contResponse struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	Choices           []contChoice    `json:"choices"`
	ServiceTier       json.RawMessage `json:"service_tier"`
	SystemFingerprint json.RawMessage `json:"system_fingerprint"`
	Usage             json.RawMessage `json:"usage"`
	PromptLogprobs    *struct{}       `json:"prompt_logprobs"`
	PromptTokenIDs    []int32         `json:"prompt_token_ids"`
	PromptText        json.RawMessage `json:"prompt_text,omitempty"`
	KVTransferParams  json.RawMessage `json:"kv_transfer_params"`
	ECTransferParams  json.RawMessage `json:"ec_transfer_params,omitempty"`
	Metrics           json.RawMessage `json:"metrics,omitempty"`
}

var jsonNull = json.RawMessage("null")

// toolCallID is the id of a parsed tool call as the engine writes it:
// vLLM's "chatcmpl-tool-" and 16 hex digits, the embedded engine's
// model/chat "call_" ids.
func (p *Plan) toolCallID(id string) string {
	if p.sent && p.kind == "embedded" {
		return id
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "chatcmpl-tool-" + hexenc.EncodeToString(b[:])
}

// rawOrNull returns v's raw JSON, or null.
func rawOrNull(v gjson.Result) json.RawMessage {
	if !v.Exists() {
		return json.RawMessage("null")
	}
	return json.RawMessage(v.Raw)
}

// chatID turns a completions id into a chat completions id.
func chatID(id string) string { return "chatcmpl-" + strings.TrimPrefix(id, "cmpl-") }

// marshalPlain encodes v without HTML escaping (as Python's json does).
func marshalPlain(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// ChatBody turns a non-stream completions answer into the chat completion.
func (p *Plan) ChatBody(cmpl []byte) ([]byte, error) {
	if !jsonwalk.ValidBytes(cmpl) {
		return nil, errors.New("engine answer is not JSON")
	}
	doc := gjson.ParseBytes(cmpl)
	if !doc.Get("choices").IsArray() {
		return nil, errors.New("engine answer has no choices")
	}
	r := contResponse{ID: chatID(doc.Get("id").String()), Object: "chat.completion", Created: doc.Get("created").Int(),
		Model: doc.Get("model").String(), ServiceTier: rawOrNull(doc.Get("service_tier")),
		SystemFingerprint: rawOrNull(doc.Get("system_fingerprint")), Usage: rawOrNull(doc.Get("usage")),
		PromptTokenIDs: p.ids, KVTransferParams: rawOrNull(doc.Get("kv_transfer_params"))}
	if ec := doc.Get("ec_transfer_params"); ec.Exists() {
		r.PromptText, r.ECTransferParams, r.Metrics = jsonNull, json.RawMessage(ec.Raw), rawOrNull(doc.Get("metrics"))
	}
	for _, c := range doc.Get("choices").Array() {
		ids, lps := p.tokens(c)
		out := chat.ParseOutput(c.Get("text").String(), p.parseOptions())
		msg := contMessage{Role: "assistant", Content: out.Content, Reasoning: out.Reasoning}
		for _, tc := range out.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, contToolCall{ID: p.toolCallID(tc.ID), Type: "function",
				Function: contFunction{Name: tc.Name, Arguments: tc.Arguments}})
		}
		ch := contChoice{Index: int(c.Get("index").Int()), Message: msg, StopReason: rawOrNull(c.Get("stop_reason")),
			TokenIDs: ids, FinishReason: finishReason(c.Get("finish_reason"), len(out.ToolCalls) > 0)}
		if p.force != nil {
			empty := ""
			if out.Content == nil {
				ch.Message.Content = &empty // vLLM's content or ""
			}
			ch.FinishReason = p.force.finish(c.Get("finish_reason"))
		}
		if p.single && len(ch.Message.ToolCalls) > 1 {
			ch.Message.ToolCalls = ch.Message.ToolCalls[:1] // vLLM's maybe_filter_parallel_tool_calls
		}
		if lps != nil {
			ch.Logprobs = &contLogprobs{Content: lps}
		}
		if re := c.Get("routed_experts"); re.Exists() {
			ch.RoutedExperts = json.RawMessage(re.Raw)
		}
		r.Choices = append(r.Choices, ch)
	}
	if n, ok := p.reasoningTokens(allIDs(r.Choices)); ok {
		r.Usage = withReasoningTokens(r.Usage, n)
	}
	return marshalPlain(r)
}

func allIDs(cs []contChoice) [][]int32 {
	out := make([][]int32, len(cs))
	for i := range cs {
		out[i] = cs[i].TokenIDs
	}
	return out
}

// reasoningTokens counts, as vLLM's chat does with a reasoning parser
// (usage.completion_tokens_details.reasoning_tokens), the completion tokens
// that made reasoning: those before the first </think> token (a leading
// <think> token aside), all of them when reasoning never ended. ok is false
// when the engine reports no such count (hone's embedded engine).
func (p *Plan) reasoningTokens(choices [][]int32) (n int, ok bool) {
	if !p.sent || p.kind == "embedded" || !p.k.parse.Reasoning {
		return 0, false
	}
	start, _ := p.k.tok.TokenID("<think>")
	end, hasEnd := p.k.tok.TokenID("</think>")
	open := p.parseOptions().ThinkOpen
	for _, ids := range choices {
		lead := 0
		if len(ids) > 0 && ids[0] == start {
			lead = 1
		} else if !open {
			continue
		}
		i := len(ids)
		if hasEnd {
			if j := slices.Index(ids, end); j >= 0 {
				i = j
			}
		}
		n += max(0, i-lead)
	}
	return n, true
}

// withReasoningTokens sets usage.completion_tokens_details.
func withReasoningTokens(usage json.RawMessage, n int) json.RawMessage {
	if !jsonwalk.ValidBytes(usage) || !gjson.ParseBytes(usage).IsObject() {
		return usage
	}
	out, err := sjson.SetRawBytes(bytes.Clone(usage), "completion_tokens_details", []byte(`{"reasoning_tokens":`+strconv.Itoa(n)+`}`))
	if err != nil {
		return usage
	}
	return out
}

// finishReason is vLLM's chat finish reason: tool_calls when the parser
// found tool calls.
func finishReason(v gjson.Result, toolCalls bool) *string {
	if v.Type != gjson.String {
		return nil
	}
	s := v.Str
	if toolCalls {
		s = "tool_calls"
	}
	return &s
}

// parseOptions are the engine's output parsers. vLLM's qwen3 reasoning
// parser (0.32) reads output as reasoning until </think> whenever thinking
// is enabled; hone's embedded engine only when the output or the prompt
// opens <think>.
func (p *Plan) parseOptions() chat.ParseOptions {
	open := p.thinkOpen
	if p.sent && p.kind != "embedded" && p.thinking {
		open = true
	}
	return chat.ParseOptions{Reasoning: p.k.parse.Reasoning, Tools: p.tools || p.force != nil, ThinkOpen: open && p.k.parse.Reasoning}
}

// tokens reads a completions choice's token ids (token_ids, else the
// "token_id:N" logprob strings) and turns its logprobs into the chat form.
func (p *Plan) tokens(c gjson.Result) ([]int32, []contLogprobEntry) {
	var ids []int32
	if t := c.Get("token_ids"); t.IsArray() {
		ids = make([]int32, 0, len(t.Raw)/4)
		t.ForEach(func(_, v gjson.Result) bool {
			ids = append(ids, int32(v.Int()))
			return true
		})
	}
	lp := c.Get("logprobs")
	if !lp.IsObject() {
		return ids, nil
	}
	toks, vals, tops := lp.Get("tokens").Array(), lp.Get("token_logprobs").Array(), lp.Get("top_logprobs").Array()
	fromStrings := len(ids) == 0
	out := make([]contLogprobEntry, 0, len(toks))
	for i, t := range toks {
		id, ok := tokenID(t.String())
		if fromStrings && ok {
			ids = append(ids, id)
		} else if !ok && i < len(ids) {
			id = ids[i]
		}
		e := contLogprobEntry{contLogprob: p.logprob(id, t.String(), rawOrNull(at(vals, i))), TopLogprobs: []contLogprob{}}
		if i < len(tops) {
			n := 0
			tops[i].ForEach(func(k, v gjson.Result) bool {
				if n >= p.topN {
					return false
				}
				tid, _ := tokenID(k.Str)
				e.TopLogprobs = append(e.TopLogprobs, p.logprob(tid, k.Str, json.RawMessage(v.Raw)))
				n++
				return true
			})
		}
		out = append(out, e)
	}
	return ids, out
}

func at(a []gjson.Result, i int) gjson.Result {
	if i < len(a) {
		return a[i]
	}
	return gjson.Result{}
}

// logprob renders one chat logprob entry: the token's text (or
// "token_id:N" when the client asked for that), its logprob and bytes.
func (p *Plan) logprob(id int32, s string, lp json.RawMessage) contLogprob {
	text := s
	if _, ok := tokenID(s); ok && !p.asIDs {
		text = p.k.tok.Decode([]int32{id})
	}
	b := make([]int, len(text))
	for i := 0; i < len(text); i++ {
		b[i] = int(text[i])
	}
	return contLogprob{Token: text, Logprob: lp, Bytes: b}
}

// tokenID parses vLLM's "token_id:N".
func tokenID(s string) (int32, bool) {
	n, ok := strings.CutPrefix(s, "token_id:")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(n, 10, 32)
	return int32(v), err == nil && v >= 0
}
