package proxy

import (
	"slices"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/internal/jsonwalk"
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
func (chatAPI) addOutput(ch *capture.Choice, t *texts, _ string, msg string, delta bool) {
	w := jsonwalk.New(msg)
	if w.At() != '{' {
		return
	}
	for key := range w.Members {
		v, _ := w.Value()
		switch key {
		case "content":
			t.set(&ch.Content, jsonwalk.AsString(v), delta)
		case "reasoning", "reasoning_content":
			if isString(v) {
				t.set(&ch.Reasoning, jsonwalk.AsStr(v), delta)
			}
		case "tool_calls":
			gjson.Parse(v).ForEach(func(i, tc gjson.Result) bool {
				if delta {
					mergeToolDelta(ch, t, tc)
				} else {
					ch.ToolCalls = append(ch.ToolCalls, capture.ToolCall{Index: int(i.Int()), ID: tc.Get("id").String(),
						Type: tc.Get("type").String(), Name: tc.Get("function.name").String(),
						Arguments: tc.Get("function.arguments").String()})
				}
				return true
			})
		}
	}
}

// addLogprobs folds content[].logprob in (the first "content", as gjson's
// Get reads it); withTokens also takes each entry's token.
func (chatAPI) addLogprobs(ch *capture.Choice, w *jsonwalk.Walker, withTokens bool, tok func(*capture.Choice, string)) {
	seen := false
	for key := range w.Members {
		if key != "content" || seen {
			w.Skip()
			continue
		}
		seen = true
		ch.Logprobs = slices.Grow(ch.Logprobs, (len(w.Doc())-w.Pos())/64) // an entry is ~60-100 bytes
		w.Each(func() { chatLogprob(w, ch, withTokens, tok) })
	}
}

// chatLogprob folds in the logprobs entry at the walk's position: its
// logprob (the first; every one with withTokens) and with withTokens its
// token. An entry without a logprob counts as 0 unless withTokens, as
// gjson's Get reads it.
func chatLogprob(w *jsonwalk.Walker, ch *capture.Choice, withTokens bool, tok func(*capture.Choice, string)) {
	if vllmLogprob(w, ch, withTokens, tok) {
		return
	}
	found := false
	if w.At() != '{' {
		w.Skip()
	} else {
		for key := range w.Members {
			switch {
			case key == "logprob" && (withTokens || !found):
				v, _ := w.Value()
				ch.Logprobs = append(ch.Logprobs, float32(jsonwalk.AsFloat(v)))
				found = true
			case key == "token" && withTokens:
				v, _ := w.Value()
				tok(ch, jsonwalk.AsStr(v))
			default:
				w.Skip()
			}
		}
	}
	if !found && !withTokens {
		ch.Logprobs = append(ch.Logprobs, 0)
	}
}

// vllmLogprob reads the entry at the walk's position when it is written as
// vLLM writes it, {"token":…,"logprob":…,"bytes":…,"top_logprobs":…} with no
// spaces, and folds it in as chatLogprob's general walk would; otherwise it
// leaves the walk where it was and returns false. Matching the four keys
// literally halves the cost of an answer's bulk.
func vllmLogprob(w *jsonwalk.Walker, ch *capture.Choice, withTokens bool, tok func(*capture.Choice, string)) bool {
	start := w.Pos()
	if !withTokens {
		if end, lp, ok := vllmEntry(w.Doc(), start); ok {
			ch.Logprobs = append(ch.Logprobs, float32(jsonwalk.AsFloat(lp)))
			w.SkipTo(end)
			return true
		}
	}
	if !w.Lit(`{"token":`) {
		return false
	}
	token, _ := w.Value()
	if !w.Bad() && w.Lit(`,"logprob":`) {
		logprob, _ := w.Value()
		if !w.Bad() && w.Lit(`,"bytes":`) {
			w.Skip()
			if !w.Bad() && w.Lit(`,"top_logprobs":`) {
				w.Skip()
				if !w.Bad() && w.Lit(`}`) {
					if withTokens {
						tok(ch, jsonwalk.AsStr(token))
					}
					ch.Logprobs = append(ch.Logprobs, float32(jsonwalk.AsFloat(logprob)))
					return true
				}
			}
		}
	}
	w.Reset(start)
	return false
}

// vllmEntry scans the logprobs entry that starts at s[i] when it is exactly
// {"token":"…","logprob":N,"bytes":[…],"top_logprobs":[]} (vLLM's form
// without top logprobs) and returns where it ends and its logprob's raw
// text; ok is false for any other text, which the general walk reads. It
// checks what the walk would: the token a valid JSON string, the logprob a
// JSON number, the bytes plain integers. One loop of its own instead of the
// walk's calls per value: an answer's logprobs are most of its bytes.
func vllmEntry(s string, i int) (end int, logprob string, ok bool) {
	const open, lpKey, bytesKey, tail = `{"token":"`, `","logprob":`, `,"bytes":[`, `],"top_logprobs":[]}`
	if !hasAt(s, i, open) {
		return 0, "", false
	}
	if i, _ = jsonwalk.StringEnd(s, i+len(open)); i < 0 || !hasAt(s, i, lpKey) {
		return 0, "", false
	}
	i += len(lpKey)
	n := jsonwalk.NumberEnd(s, i)
	if n < 0 || !hasAt(s, n, bytesKey) {
		return 0, "", false
	}
	logprob = s[i:n]
	if i = uintsEnd(s, n+len(bytesKey)); i < 0 || !hasAt(s, i, tail) {
		return 0, "", false
	}
	return i + len(tail), logprob, true
}

// hasAt reports whether s continues with lit at i.
func hasAt(s string, i int, lit string) bool { return len(s)-i >= len(lit) && s[i:i+len(lit)] == lit }

// uintsEnd returns the index of the ']' that closes the list of
// non-negative integers starting at s[i] (after its '['), or -1.
func uintsEnd(s string, i int) int {
	if i < len(s) && s[i] == ']' {
		return i
	}
	for {
		d := i
		for d < len(s) && s[d] >= '0' && s[d] <= '9' {
			d++
		}
		if d == i || s[i] == '0' && d > i+1 || d == len(s) {
			return -1
		}
		switch s[d] {
		case ']':
			return d
		case ',':
			i = d + 1
		default:
			return -1
		}
	}
}

// silentChunk: vLLM sends a chunk with nothing in its delta (a token its
// reasoning or tool parser consumed) only to carry the logprobs or token
// ids hone asked for. The accumulator's walk of the chunk noted it.
func (chatAPI) silentChunk(a *accumulator) bool { return a.emptyDeltas }

func (chatAPI) answerChoice(c capture.Choice) aggChoice {
	m := &aggMessage{Role: "assistant", Content: c.Content, Reasoning: c.Reasoning}
	for _, t := range c.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, aggTool{ID: t.ID, Type: "function", Function: aggFunction{t.Name, t.Arguments}})
	}
	return aggChoice{Index: c.Index, Message: m, FinishReason: c.FinishReason}
}
