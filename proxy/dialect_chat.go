package proxy

import (
	"slices"
	"strings"

	"github.com/hone-rl/hone/capture"
	"github.com/tidwall/gjson"
)

// chatAPI is the engine's chat completions (/v1/chat/completions): the
// native chat surface and every translated API speak it.
type chatAPI struct{}

func (chatAPI) route() string                     { return capture.RouteChat }
func (chatAPI) captured() bool                    { return true }
func (chatAPI) askedLogprobs(v gjson.Result) bool { return v.Bool() }
func (chatAPI) logprobsField() (any, string)      { return true, `"logprobs":true` }
func (chatAPI) answer() string                    { return "chat.completion" }
func (chatAPI) rendersChat() bool                 { return true }

// addOutput folds a chat message (or delta): content, reasoning under
// either field name, tool calls.
func (chatAPI) addOutput(ch *capture.Choice, _ string, m gjson.Result, delta bool) {
	m.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "content":
			ch.Content = appendOrSet(ch.Content, v.String(), delta)
		case "reasoning", "reasoning_content":
			if v.Type == gjson.String {
				ch.Reasoning = appendOrSet(ch.Reasoning, v.Str, delta)
			}
		case "tool_calls":
			v.ForEach(func(i, t gjson.Result) bool {
				if delta {
					mergeToolDelta(ch, t)
				} else {
					ch.ToolCalls = append(ch.ToolCalls, capture.ToolCall{Index: int(i.Int()), ID: t.Get("id").String(),
						Type: t.Get("type").String(), Name: t.Get("function.name").String(),
						Arguments: t.Get("function.arguments").String()})
				}
				return true
			})
		}
		return true
	})
}

// addLogprobs folds content[].logprob in.
func (chatAPI) addLogprobs(ch *capture.Choice, lp gjson.Result, withTokens bool, tok func(*capture.Choice, string)) {
	content := lp.Get("content")
	ch.Logprobs = slices.Grow(ch.Logprobs, len(content.Raw)/64) // an entry is ~60-100 bytes
	content.ForEach(func(_, t gjson.Result) bool {
		if !withTokens { // "logprob" comes second: no need to walk bytes and top_logprobs
			ch.Logprobs = append(ch.Logprobs, float32(t.Get("logprob").Float()))
			return true
		}
		t.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "logprob":
				ch.Logprobs = append(ch.Logprobs, float32(v.Float()))
			case "token":
				tok(ch, v.Str)
			}
			return true
		})
		return true
	})
}

// silentChunk: vLLM sends a chunk with nothing in its delta (a token its
// reasoning or tool parser consumed) only to carry the logprobs or token
// ids hone asked for.
func (chatAPI) silentChunk(data []byte) bool {
	chs := gjson.GetBytes(data, "choices").Array()
	if len(chs) == 0 || gjson.GetBytes(data, "usage").Type == gjson.JSON {
		return false
	}
	for _, ch := range chs {
		if d := ch.Get("delta"); !d.IsObject() || strings.TrimSpace(d.Raw) != "{}" || ch.Get("finish_reason").Type == gjson.String {
			return false
		}
	}
	return true
}

func (chatAPI) answerChoice(c capture.Choice) aggChoice {
	m := &aggMessage{Role: "assistant", Content: c.Content, Reasoning: c.Reasoning}
	for _, t := range c.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, aggTool{ID: t.ID, Type: "function", Function: aggFunction{t.Name, t.Arguments}})
	}
	return aggChoice{Index: c.Index, Message: m, FinishReason: c.FinishReason}
}
