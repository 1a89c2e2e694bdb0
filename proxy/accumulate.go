package proxy

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/hone-rl/hone/capture"
	"github.com/tidwall/gjson"
)

// accumulator aggregates a response — one body or a stream of chunks — into
// the token ids, logprobs, text and tool calls of each choice. Each body is
// walked once, key by key; the walk also notes where the fields hone may
// have injected sit, so the strip needs no second parse.
type accumulator struct {
	dialect    dialect
	renaming   bool // note the model's position: the answer gets the agent's name back (asked.renamed)
	id         string
	model      string
	created    int64
	promptIDs  []int32
	choices    []capture.Choice
	usage      capture.Usage
	fromTokens bool // completion ids came from "token_id:N" logprob strings

	injected  []injected // positions in the last body added
	usageOnly bool       // the last chunk had empty choices and a usage object
	finished  bool       // the last chunk added ended a choice (finish_reason set)
	bad       bool       // a body or chunk was not a JSON object
	sawChoice bool       // a body or chunk had a choices array
}

// complete reports whether what was added reads as a completion: every
// body or chunk a JSON object, and choices among them. An engine that
// answers 200 with garbage or truncated JSON fails it; such a call is
// recorded with an error status and never trained on.
func (a *accumulator) complete() bool { return !a.bad && a.sawChoice }

// injected is the position of a non-null value hone may have asked for.
type injected struct {
	start, end int
	kind       uint8
}

const (
	injLogprobs uint8 = iota // choices[].logprobs
	injTokenIDs              // prompt_token_ids, choices[].token_ids, choices[].prompt_token_ids
	injModel                 // model: the engine-side name of a policy alias
)

func (a *accumulator) choice(i int) *capture.Choice {
	if i < 0 || i > 1<<16 {
		i = 0 // engines send small indices; never grow without bound on garbage
	}
	for len(a.choices) <= i {
		a.choices = append(a.choices, capture.Choice{Index: len(a.choices)})
	}
	return &a.choices[i]
}

// addChunk folds one stream chunk (the JSON of a data event) in; data may be
// reused after the call.
func (a *accumulator) addChunk(data []byte) { a.add(string(data), true) }

// addBody folds a whole non-stream response in. The strings kept point into
// body, which must not change afterwards (it is the record's own copy).
func (a *accumulator) addBody(body []byte) {
	if len(body) > 0 {
		a.add(unsafe.String(&body[0], len(body)), false)
	}
}

func (a *accumulator) add(body string, delta bool) {
	a.injected, a.finished = a.injected[:0], false
	nChoices, hasUsage := 0, false
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
				a.note(v, injModel)
			}
		case "created":
			if a.created == 0 {
				a.created = v.Int()
			}
		case "prompt_token_ids":
			if v.IsArray() {
				a.promptIDs = appendIDs(a.promptIDs[:0], v)
				a.note(v, injTokenIDs)
			}
		case "usage":
			if v.IsObject() {
				hasUsage = true
				a.usage = capture.Usage{PromptTokens: int(v.Get("prompt_tokens").Int()),
					CompletionTokens: int(v.Get("completion_tokens").Int()), TotalTokens: int(v.Get("total_tokens").Int())}
			}
		case "choices":
			a.sawChoice = a.sawChoice || v.IsArray()
			v.ForEach(func(_, c gjson.Result) bool {
				nChoices++
				a.addChoice(c, delta)
				return true
			})
		}
		return true
	})
	a.usageOnly = nChoices == 0 && hasUsage
}

func (a *accumulator) note(v gjson.Result, kind uint8) {
	a.injected = append(a.injected, injected{v.Index, v.Index + len(v.Raw), kind})
}

// addChoice folds one choice (or a stream delta of one) in, in one walk
// over its keys (a Get per field would rescan the logprobs each time).
func (a *accumulator) addChoice(c gjson.Result, delta bool) {
	var ids, lp, msg, prompt gjson.Result
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
		ch.PromptIDs = appendIDs(ch.PromptIDs[:0], prompt)
		a.note(prompt, injTokenIDs)
	}
	if ids.IsArray() {
		ch.TokenIDs = appendIDs(ch.TokenIDs, ids)
		a.note(ids, injTokenIDs)
	}
	if lp.IsObject() {
		a.addLogprobs(ch, lp, !ids.IsArray())
		a.note(lp, injLogprobs)
	}
	a.dialect.addOutput(ch, text, msg, delta)
}

// addLogprobs folds a choice's logprobs in, in the dialect's shape;
// withTokens takes the completion ids from "token_id:N" token strings when
// the engine sent no token_ids.
func (a *accumulator) addLogprobs(ch *capture.Choice, lp gjson.Result, withTokens bool) {
	a.dialect.addLogprobs(ch, lp, withTokens, a.tokenFromString)
}

// tokenFromString takes a completion id from vLLM's
// return_tokens_as_token_ids form "token_id:N".
func (a *accumulator) tokenFromString(ch *capture.Choice, s string) {
	n, ok := strings.CutPrefix(s, "token_id:")
	if !ok {
		return
	}
	if id, err := strconv.ParseInt(n, 10, 32); err == nil {
		ch.TokenIDs = append(ch.TokenIDs, int32(id))
		a.fromTokens = true
	}
}

func appendIDs(dst []int32, arr gjson.Result) []int32 {
	dst = slices.Grow(dst, len(arr.Raw)/4) // ids take 2-7 bytes each: one allocation, not one per doubling
	arr.ForEach(func(_, v gjson.Result) bool {
		dst = append(dst, int32(v.Int()))
		return true
	})
	return dst
}

func mergeToolDelta(ch *capture.Choice, t gjson.Result) {
	idx := int(t.Get("index").Int())
	var tc *capture.ToolCall
	for i := range ch.ToolCalls {
		if ch.ToolCalls[i].Index == idx {
			tc = &ch.ToolCalls[i]
		}
	}
	if tc == nil {
		ch.ToolCalls = append(ch.ToolCalls, capture.ToolCall{Index: idx})
		tc = &ch.ToolCalls[len(ch.ToolCalls)-1]
	}
	if v := t.Get("id").String(); v != "" {
		tc.ID = v
	}
	if v := t.Get("type").String(); v != "" {
		tc.Type = v
	}
	tc.Name += t.Get("function.name").String()
	tc.Arguments += t.Get("function.arguments").String()
}

// aggregate renders a streamed response as the equivalent non-stream object.
func (a *accumulator) aggregate() []byte {
	obj := struct {
		ID      string        `json:"id"`
		Object  string        `json:"object"`
		Created int64         `json:"created"`
		Model   string        `json:"model"`
		Choices []aggChoice   `json:"choices"`
		Usage   capture.Usage `json:"usage"`
	}{ID: a.id, Object: a.dialect.answer(), Created: a.created, Model: a.model, Usage: a.usage}
	for _, c := range a.choices {
		obj.Choices = append(obj.Choices, a.dialect.answerChoice(c))
	}
	b, _ := json.Marshal(obj)
	return b
}
