package proxy

import (
	"github.com/hone-rl/hone/capture"
	"github.com/tidwall/gjson"
)

// completionsAPI is the engine's text completions (/v1/completions): the
// native completions surface, and the token-id prompts of tokens-mode
// continuity.
type completionsAPI struct{}

func (completionsAPI) route() string  { return capture.RouteCompletions }
func (completionsAPI) captured() bool { return true }

// askedLogprobs: completions' logprobs is a count of top entries; a number
// asks for them.
func (completionsAPI) askedLogprobs(v gjson.Result) bool { return v.Type == gjson.Number }
func (completionsAPI) logprobsField() (any, string)      { return 0, `"logprobs":0` }
func (completionsAPI) answer() string                    { return "text_completion" }
func (completionsAPI) rendersChat() bool                 { return false }
func (completionsAPI) silentChunk([]byte) bool           { return false }

func (completionsAPI) addOutput(ch *capture.Choice, text string, _ gjson.Result, delta bool) {
	ch.Content = appendOrSet(ch.Content, text, delta)
}

// addLogprobs folds token_logprobs[] (and tokens[] as ids) in.
func (completionsAPI) addLogprobs(ch *capture.Choice, lp gjson.Result, withTokens bool, tok func(*capture.Choice, string)) {
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
}

func (completionsAPI) answerChoice(c capture.Choice) aggChoice {
	return aggChoice{Index: c.Index, Text: c.Content, FinishReason: c.FinishReason}
}
