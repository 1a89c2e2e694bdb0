package proxy

import (
	"slices"

	"github.com/hone-rl/hone/capture"
	"github.com/tidwall/gjson"
)

// The accumulator's walk as it was written with gjson, key by key (each
// nested value rescanned once per level): the readable reference that
// FuzzAccumulateWalk holds the single-pass walk (accumulate.go) to.

func (a *accumulator) addRef(body string, delta bool) {
	a.injected, a.finished, a.emptyDeltas = a.injected[:0], false, false
	nChoices, hasUsage, usageJSON, choicesArray, allEmpty := 0, false, false, false, true
	if !gjson.Valid(body) || !gjson.Parse(body).IsObject() {
		a.bad, a.usageOnly = true, false
		return
	}
	gjson.Parse(body).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "id":
			if a.id == "" {
				a.id = v.String()
			}
		case "model":
			if a.model == "" {
				a.model = v.String()
			}
			if a.renaming && v.Type == gjson.String {
				a.noteRef(v, injModel)
			}
		case "created":
			if a.created == 0 {
				a.created = v.Int()
			}
		case "prompt_token_ids":
			if v.IsArray() {
				a.promptIDs = refAppendIDs(a.promptIDs[:0], v)
				a.noteRef(v, injPromptIDs)
			}
		case "usage":
			usageJSON = v.Type == gjson.JSON
			if v.IsObject() {
				hasUsage = true
				a.usage = capture.Usage{PromptTokens: int(v.Get("prompt_tokens").Int()),
					CompletionTokens: int(v.Get("completion_tokens").Int()), TotalTokens: int(v.Get("total_tokens").Int())}
			}
		case "choices":
			choicesArray = v.IsArray()
			a.sawChoice = a.sawChoice || choicesArray
			v.ForEach(func(_, c gjson.Result) bool {
				nChoices++
				allEmpty = a.addChoiceRef(c, delta) && allEmpty
				return true
			})
		}
		return true
	})
	a.usageOnly = nChoices == 0 && hasUsage
	a.emptyDeltas = choicesArray && nChoices > 0 && allEmpty && !usageJSON
}

func (a *accumulator) noteRef(v gjson.Result, kind uint8) {
	a.injected = append(a.injected, injected{v.Index, v.Index + len(v.Raw), kind})
}

func (a *accumulator) addChoiceRef(c gjson.Result, delta bool) (emptyDelta bool) {
	var ids, lp, msg, prompt, d gjson.Result
	text, finish, index := "", gjson.Result{}, 0
	c.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "index":
			index = int(v.Int())
		case "finish_reason":
			finish = v
		case "token_ids":
			ids = v
		case "prompt_token_ids":
			prompt = v
		case "logprobs":
			lp = v
		case "message", "delta":
			msg = v
			if k.Str == "delta" {
				d = v
			}
		case "text":
			text = v.String()
		}
		return true
	})
	ch := a.choice(index)
	if finish.Type == gjson.String {
		ch.FinishReason, a.finished = finish.Str, true
	}
	if prompt.IsArray() {
		ch.PromptIDs = refAppendIDs(ch.PromptIDs[:0], prompt)
		a.noteRef(prompt, injPromptIDs)
	}
	if ids.IsArray() {
		ch.TokenIDs = refAppendIDs(ch.TokenIDs, ids)
		a.noteRef(ids, injTokenIDs)
	}
	if lp.IsObject() {
		refAddLogprobs(a.dialect, ch, lp, !ids.IsArray(), a.tokenFromString)
		a.noteRef(lp, injLogprobs)
	}
	refAddOutput(a.dialect, ch, text, msg, delta)
	return c.IsObject() && d.Raw == "{}" && finish.Type != gjson.String
}

func refAppendIDs(dst []int32, arr gjson.Result) []int32 {
	dst = slices.Grow(dst, len(arr.Raw)/4)
	arr.ForEach(func(_, v gjson.Result) bool {
		dst = append(dst, int32(v.Int()))
		return true
	})
	return dst
}

func refAddOutput(d dialect, ch *capture.Choice, text string, m gjson.Result, delta bool) {
	switch d.(type) {
	case completionsAPI:
		ch.Content = refAppendOrSet(ch.Content, text, delta)
	case chatAPI:
		m.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "content":
				ch.Content = refAppendOrSet(ch.Content, v.String(), delta)
			case "reasoning", "reasoning_content":
				if v.Type == gjson.String {
					ch.Reasoning = refAppendOrSet(ch.Reasoning, v.Str, delta)
				}
			case "tool_calls":
				v.ForEach(func(i, t gjson.Result) bool {
					if delta {
						mergeToolDelta(ch, &texts{}, t) // fresh builders: each delta concatenated, as + would
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
}

func refAddLogprobs(d dialect, ch *capture.Choice, lp gjson.Result, withTokens bool, tok func(*capture.Choice, string)) {
	switch d.(type) {
	case completionsAPI:
		lp.Get("token_logprobs").ForEach(func(_, t gjson.Result) bool {
			ch.Logprobs = append(ch.Logprobs, float32(t.Float()))
			return true
		})
		if withTokens {
			lp.Get("tokens").ForEach(func(_, t gjson.Result) bool {
				tok(ch, t.String())
				return true
			})
		}
	case chatAPI:
		content := lp.Get("content")
		ch.Logprobs = slices.Grow(ch.Logprobs, len(content.Raw)/64)
		content.ForEach(func(_, t gjson.Result) bool {
			if !withTokens {
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
}

// refAppendOrSet is texts.set without its builders.
func refAppendOrSet(old, s string, delta bool) string {
	if delta {
		return old + s
	}
	return s
}
