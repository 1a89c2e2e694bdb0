package proxy

import (
	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/internal/jsonwalk"
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
func (completionsAPI) silentChunk(*accumulator) bool     { return false }

func (completionsAPI) addOutput(ch *capture.Choice, t *texts, text string, _ string, delta bool) {
	t.set(&ch.Content, text, delta)
}

// addLogprobs folds token_logprobs[] (and tokens[] as ids) in: the first
// of each key, as gjson's Get reads it.
func (completionsAPI) addLogprobs(ch *capture.Choice, w *jsonwalk.Walker, withTokens bool, tok func(*capture.Choice, string)) {
	var logprobs, tokens bool
	for key := range w.Members {
		switch {
		case key == "token_logprobs" && !logprobs:
			logprobs = true
			w.Each(func() {
				v, _ := w.Value()
				ch.Logprobs = append(ch.Logprobs, float32(jsonwalk.AsFloat(v)))
			})
		case key == "tokens" && !tokens && withTokens:
			tokens = true
			w.Each(func() {
				v, _ := w.Value()
				tok(ch, jsonwalk.AsString(v))
			})
		default:
			w.Skip()
		}
	}
}

func (completionsAPI) answerChoice(c capture.Choice) aggChoice {
	return aggChoice{Index: c.Index, Text: c.Content, FinishReason: c.FinishReason}
}
