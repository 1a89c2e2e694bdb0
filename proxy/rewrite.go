package proxy

import (
	"github.com/hone-rl/hone/capture"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// asked is what the client asked for itself, so the response strip removes
// only what hone injected.
type asked struct {
	stream      bool
	logprobs    bool // chat: logprobs true; completions: logprobs set to a number
	tokenIDs    bool // return_token_ids
	usage       bool // stream_options.include_usage
	tokensAsIDs bool // return_tokens_as_token_ids
}

// inspect reads, in one walk over the top-level keys of a request, the model
// and what the client asked for itself.
func inspect(doc gjson.Result, route string) (a asked, model string) {
	doc.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "model":
			model = v.String()
		case "stream":
			a.stream = v.Bool()
		case "logprobs":
			if route == capture.RouteChat {
				a.logprobs = v.Bool()
			} else {
				a.logprobs = v.Type == gjson.Number
			}
		case "return_token_ids":
			a.tokenIDs = v.Bool()
		case "stream_options":
			a.usage = v.Get("include_usage").Bool()
		case "return_tokens_as_token_ids":
			a.tokensAsIDs = v.Bool()
		}
		return true
	})
	return a, model
}

// rewriteRequest returns the body to send upstream for a captured call: the
// model replaced by the policy target, and logprobs, token ids and the usage
// chunk requested. The client's own values (top_logprobs, ...) are kept.
func rewriteRequest(body []byte, route string, a asked, model, tokenMode, target string, capture bool) ([]byte, error) {
	var err error
	out := body
	set := func(path string, v any) {
		if err == nil {
			out, err = sjson.SetBytes(out, path, v)
		}
	}
	if target != "" && model != target {
		set("model", target)
	}
	if !capture {
		return out, err
	}
	if !a.logprobs {
		if route == "chat" {
			set("logprobs", true)
		} else {
			set("logprobs", 0)
		}
	}
	switch tokenMode {
	case "auto", "native":
		if !a.tokenIDs {
			set("return_token_ids", true)
		}
	case "tokenize":
		if !a.logprobs && !a.tokensAsIDs {
			set("return_tokens_as_token_ids", true)
		}
	}
	if a.stream && !a.usage {
		set("stream_options.include_usage", true)
	}
	return out, err
}
