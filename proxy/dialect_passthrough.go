package proxy

import (
	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/internal/jsonwalk"
	"github.com/tidwall/gjson"
)

// passthroughAPI is every other inference route hone forwards
// (proxy.inference_routes, models.go): relayed as it is, never captured.
type passthroughAPI struct{}

// routePassthrough labels the forwarded calls in metrics.
const routePassthrough = "passthrough"

func (passthroughAPI) route() string                                           { return routePassthrough }
func (passthroughAPI) captured() bool                                          { return false }
func (passthroughAPI) askedLogprobs(gjson.Result) bool                         { return false }
func (passthroughAPI) logprobsField() (any, string)                            { return nil, "" }
func (passthroughAPI) answer() string                                          { return "" }
func (passthroughAPI) rendersChat() bool                                       { return false }
func (passthroughAPI) silentChunk(*accumulator) bool                           { return false }
func (passthroughAPI) addOutput(*capture.Choice, *texts, string, string, bool) {}
func (passthroughAPI) addLogprobs(_ *capture.Choice, lp *jsonwalk.Walker, _ bool, _ func(*capture.Choice, string)) {
	lp.Skip()
}
func (passthroughAPI) answerChoice(c capture.Choice) aggChoice { return aggChoice{Index: c.Index} }
