package proxy

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/internal/jsonwalk"
	"github.com/tidwall/gjson"
)

// accumulator aggregates a response — one body or a stream of chunks — into
// the token ids, logprobs, text and tool calls of each choice. Each body is
// walked once (jsonWalk: validated and read in the same pass); the walk also
// notes where the fields hone may have injected sit, so the strip needs no
// second parse.
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
	texts      texts

	lps       capture.Choice // the logprobs of the choice being walked (addChoice)
	injected  []injected     // positions in the last body added
	usageOnly bool           // the last chunk had empty choices and a usage object
	// emptyDeltas: the last chunk had a choices array whose every choice
	// has an empty delta ({}) and no finish_reason, and no usage: in the
	// chat dialect, a chunk vLLM sends only for the logprobs or token ids
	// hone asked for (chatAPI.silentChunk).
	emptyDeltas bool
	finished    bool // the last chunk added ended a choice (finish_reason set)
	bad         bool // a body or chunk was not a JSON object
	sawChoice   bool // a body or chunk had a choices array
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
	injLogprobs  uint8 = iota // choices[].logprobs
	injTokenIDs               // choices[].token_ids
	injPromptIDs              // prompt_token_ids, choices[].prompt_token_ids
	injModel                  // model: the engine-side name of a policy alias
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
	a.injected, a.finished, a.emptyDeltas = a.injected[:0], false, false
	// The walk folds the body in as it validates it. While nothing the walk
	// changes in place holds anything yet (a body, a stream's first
	// chunks), a body that turns out not to be JSON is undone by restoring
	// a copy; otherwise it is validated first.
	undo := len(a.choices) == 0 && len(a.promptIDs) == 0
	var saved accumulator
	if undo {
		saved = *a
	} else if !jsonwalk.Valid(body) {
		a.bad, a.usageOnly = true, false
		return
	}
	nChoices, hasUsage, usageJSON, choicesArray, allEmpty := 0, false, false, false, true
	w := jsonwalk.New(body)
	if w.At() != '{' {
		a.bad, a.usageOnly = true, false
		return
	}
	for key := range w.Members {
		switch key {
		case "id":
			raw, _ := w.Value()
			if a.id == "" {
				a.id = jsonwalk.AsString(raw)
			}
		case "model":
			raw, at := w.Value()
			if a.model == "" {
				a.model = jsonwalk.AsString(raw)
			}
			if a.renaming && isString(raw) {
				a.note(at, raw, injModel)
			}
		case "created":
			raw, _ := w.Value()
			if a.created == 0 {
				a.created = jsonwalk.AsInt(raw)
			}
		case "prompt_token_ids":
			ids, raw, at, ok := w.Int32s(a.promptIDs[:0]) // read as the walk steps over them: prompts run to 10^4-10^5 ids
			if ok {
				a.promptIDs = ids
			} else if raw, at = w.Value(); isArray(raw) {
				a.promptIDs = appendIDs(a.promptIDs[:0], raw)
			}
			if isArray(raw) {
				a.note(at, raw, injPromptIDs)
			}
		case "usage":
			raw, _ := w.Value()
			usageJSON = isObject(raw) || isArray(raw)
			if isObject(raw) {
				hasUsage = true
				v := gjson.Parse(raw)
				a.usage = capture.Usage{PromptTokens: int(v.Get("prompt_tokens").Int()),
					CompletionTokens: int(v.Get("completion_tokens").Int()), TotalTokens: int(v.Get("total_tokens").Int())}
			}
		case "choices":
			choicesArray = w.At() == '['
			a.sawChoice = a.sawChoice || choicesArray
			w.Each(func() {
				nChoices++
				allEmpty = a.addChoice(&w, delta) && allEmpty
			})
		default:
			w.Skip()
		}
	}
	if w.Bad() || !w.End() {
		if undo {
			*a = saved
		}
		a.injected = a.injected[:0]
		a.bad, a.usageOnly = true, false
		return
	}
	a.usageOnly = nChoices == 0 && hasUsage
	a.emptyDeltas = choicesArray && nChoices > 0 && allEmpty && !usageJSON
}

func (a *accumulator) note(at int, raw string, kind uint8) {
	a.injected = append(a.injected, injected{at, at + len(raw), kind})
}

// span is a value's raw text and where it starts in the body ("" when
// absent), with its ids when it is an array of ids read in the walk.
type span struct {
	raw string
	at  int
	ids []int32
}

// addChoice folds in the choice (or a stream delta of one) at the walk's
// position: its keys are noted in one walk (an engine may write them in
// any order; the last of a repeated key counts), then folded in. The
// logprobs, the bulk of an answer, are read during that walk into
// a.lps as if token_ids followed (the engine's order), and read again from
// their span only when no token_ids came (their tokens then carry the ids).
// It reports whether the choice is an object whose delta is {} and that
// does not finish (accumulator.emptyDeltas).
func (a *accumulator) addChoice(w *jsonwalk.Walker, delta bool) (emptyDelta bool) {
	var ids, lp, msg, prompt span
	text, finish, index, deltaRaw := "", "", 0, ""
	if w.At() != '{' {
		w.Skip() // a choice that is not an object folds in as an empty one
	} else {
		for key := range w.Members {
			if key == "logprobs" {
				lp = a.walkLogprobs(w)
				continue
			}
			if key == "prompt_token_ids" {
				if ids, raw, at, ok := w.Int32s(nil); ok {
					prompt = span{raw: raw, at: at, ids: ids}
					continue
				}
			}
			var v span
			v.raw, v.at = w.Value()
			switch key {
			case "index":
				index = int(jsonwalk.AsInt(v.raw))
			case "finish_reason":
				finish = v.raw
			case "token_ids":
				ids = v
			case "prompt_token_ids":
				prompt = v
			case "message", "delta":
				msg = v
				if key == "delta" {
					deltaRaw = v.raw
				}
			case "text":
				text = jsonwalk.AsString(v.raw)
			}
		}
	}
	if w.Bad() {
		return false
	}
	ch := a.choice(index)
	if isString(finish) {
		ch.FinishReason, a.finished = jsonwalk.AsStr(finish), true
	}
	if len(prompt.ids) > 0 {
		ch.PromptIDs = prompt.ids
		a.note(prompt.at, prompt.raw, injPromptIDs)
	} else if isArray(prompt.raw) {
		ch.PromptIDs = appendIDs(ch.PromptIDs[:0], prompt.raw)
		a.note(prompt.at, prompt.raw, injPromptIDs)
	}
	if isArray(ids.raw) {
		ch.TokenIDs = appendIDs(ch.TokenIDs, ids.raw)
		a.note(ids.at, ids.raw, injTokenIDs)
	}
	if isObject(lp.raw) {
		switch {
		case !isArray(ids.raw):
			w := jsonwalk.New(lp.raw)
			a.dialect.addLogprobs(ch, &w, true, a.tokenFromString)
		case len(ch.Logprobs) == 0:
			ch.Logprobs, a.lps.Logprobs = a.lps.Logprobs, nil // the choice takes the buffer
		default:
			ch.Logprobs = append(ch.Logprobs, a.lps.Logprobs...)
		}
		a.note(lp.at, lp.raw, injLogprobs)
	}
	a.dialect.addOutput(ch, &a.texts, text, msg.raw, delta)
	return deltaRaw == "{}" && !isString(finish)
}

// walkLogprobs reads the logprobs value at the walk's position into a.lps
// (when an object) and returns its span.
func (a *accumulator) walkLogprobs(w *jsonwalk.Walker) span {
	if w.At() != '{' {
		raw, at := w.Value()
		return span{raw: raw, at: at}
	}
	at := w.Pos()
	a.lps.Logprobs = a.lps.Logprobs[:0]
	a.dialect.addLogprobs(&a.lps, w, false, nil)
	if w.Bad() {
		return span{}
	}
	return span{raw: w.Doc()[at:w.Pos()], at: at}
}

func isString(raw string) bool { return raw != "" && raw[0] == '"' }
func isArray(raw string) bool  { return raw != "" && raw[0] == '[' }
func isObject(raw string) bool { return raw != "" && raw[0] == '{' }

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

// appendIDs appends the token ids of raw, a JSON array.
func appendIDs(dst []int32, raw string) []int32 {
	dst = slices.Grow(dst, len(raw)/4) // ids take 2-7 bytes each: one allocation, not one per doubling
	if out, ok := jsonwalk.AppendInt32s(dst, raw); ok {
		return out
	}
	w := jsonwalk.New(raw)
	w.Each(func() {
		v, _ := w.Value()
		dst = append(dst, int32(jsonwalk.AsInt(v)))
	})
	return dst
}

func mergeToolDelta(ch *capture.Choice, txt *texts, t gjson.Result) {
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
	txt.set(&tc.Name, t.Get("function.name").String(), true)
	txt.set(&tc.Arguments, t.Get("function.arguments").String(), true)
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
