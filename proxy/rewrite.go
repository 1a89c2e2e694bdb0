package proxy

import (
	"bytes"
	"unicode"

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
	has         present
}

// present notes which of the keys hone may set the request has at all (with
// any value), so that absent ones are appended instead of searched for.
type present struct{ logprobs, tokenIDs, streamOptions, tokensAsIDs bool }

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
			a.has.logprobs = true
			if route == capture.RouteChat {
				a.logprobs = v.Bool()
			} else {
				a.logprobs = v.Type == gjson.Number
			}
		case "return_token_ids":
			a.tokenIDs, a.has.tokenIDs = v.Bool(), true
		case "stream_options":
			a.usage, a.has.streamOptions = v.Get("include_usage").Bool(), true
		case "return_tokens_as_token_ids":
			a.tokensAsIDs, a.has.tokensAsIDs = v.Bool(), true
		}
		return true
	})
	return a, model
}

// rewriteRequest returns the body to send upstream for a captured call: the
// model replaced by the policy target, and logprobs, token ids and the usage
// chunk requested. The client's own values (top_logprobs, ...) are kept.
// Fields the request lacks are appended before its closing brace in one
// copy; sjson, which would walk the whole body (agent requests carry long
// histories) for each of them, only replaces values that are there.
func rewriteRequest(body []byte, route string, a asked, model, tokenMode, target string, capture bool) ([]byte, error) {
	var err error
	out := body
	set := func(path string, v any) {
		if err == nil {
			out, err = sjson.SetBytesOptions(out, path, v, &sjson.Options{Optimistic: true})
		}
	}
	var add []string // absent top-level fields, as raw JSON members
	put := func(has bool, key string, v any, raw string) {
		if has {
			set(key, v)
		} else {
			add = append(add, raw)
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
			put(a.has.logprobs, "logprobs", true, `"logprobs":true`)
		} else {
			put(a.has.logprobs, "logprobs", 0, `"logprobs":0`)
		}
	}
	switch tokenMode {
	case "auto", "native":
		if !a.tokenIDs {
			put(a.has.tokenIDs, "return_token_ids", true, `"return_token_ids":true`)
		}
	case "tokenize":
		if !a.logprobs && !a.tokensAsIDs {
			put(a.has.tokensAsIDs, "return_tokens_as_token_ids", true, `"return_tokens_as_token_ids":true`)
		}
	}
	if a.stream && !a.usage {
		put(a.has.streamOptions, "stream_options.include_usage", true, `"stream_options":{"include_usage":true}`)
	}
	if err != nil || len(add) == 0 {
		return out, err
	}
	return appendMembers(out, add), nil
}

// appendMembers adds raw members to a JSON object before its closing brace.
// body must be a valid JSON object (handleCall checked it).
func appendMembers(body []byte, members []string) []byte {
	end := bytes.LastIndexByte(body, '}')
	prev := bytes.LastIndexFunc(body[:end], func(r rune) bool { return !unicode.IsSpace(r) })
	out := make([]byte, 0, len(body)+64)
	out = append(out, body[:end]...)
	for i, m := range members {
		if i > 0 || body[prev] != '{' {
			out = append(out, ',')
		}
		out = append(out, m...)
	}
	return append(out, body[end:]...)
}
