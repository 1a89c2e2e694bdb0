package proxy

import (
	"bytes"
	"testing"
)

// TestTranslatedAnswersKeepMarkup: text and tool arguments with <, > and &
// reach an Anthropic or Responses client raw, whole and streamed, as the
// providers send them, not as Go's HTML escapes (\u003c).
func TestTranslatedAnswersKeepMarkup(t *testing.T) {
	whole := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":"if a < b && c > d { return \"<b>\" }","tool_calls":[{"id":"c1",` +
		`"type":"function","function":{"name":"calculator","arguments":"{\"expression\":\"1 < 2 & 3 > 2\"}"}}]},` +
		`"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":9,"total_tokens":12}}`)
	stream := []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"if a < b && c > d { return \"<b>\" }"},"finish_reason":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"calculator","arguments":"{\"expression\":\"1 < 2 & 3 > 2\"}"}}]},"finish_reason":"tool_calls"}]}

data: [DONE]

`)
	tools := `"tools":[{"name":"calculator","input_schema":{"type":"object"}}]`
	for _, tc := range []struct {
		name string
		s    surface
		req  string
	}{
		{"messages", messagesSurface{}, `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"}],` + tools + `}`},
		{"responses", responsesSurface{}, `{"model":"m","input":"hi","tools":[{"type":"function","name":"calculator","parameters":{"type":"object"}}]}`},
	} {
		for _, streamed := range []bool{false, true} {
			tr, aerr := tc.s.translate(testServer(), "", []byte(tc.req))
			if aerr != nil {
				t.Fatalf("%s: %v", tc.name, aerr)
			}
			var out []byte
			switch {
			case streamed && tc.name == "messages":
				out = msgEncodeStream(tr.enc, stream)
			case streamed:
				out = encodeStream(t, tr.enc, stream)
			default:
				out = tr.enc.body(whole, 200)
			}
			if bytes.Contains(out, []byte(`\u003c`)) || bytes.Contains(out, []byte(`\u0026`)) || bytes.Contains(out, []byte(`\u003e`)) {
				t.Errorf("%s (streamed %v): HTML escapes in the answer:\n%s", tc.name, streamed, out)
			}
			if !bytes.Contains(out, []byte(`if a < b && c > d`)) || !bytes.Contains(out, []byte(`1 < 2 & 3 > 2`)) {
				t.Errorf("%s (streamed %v): the text or the arguments are missing:\n%s", tc.name, streamed, out)
			}
		}
	}
	// a custom tool's input goes back into the prompt as the arguments the model wrote
	if got := customArguments(`a < b && "c"`); got != `{"input":"a < b && \"c\""}` {
		t.Errorf("customArguments: %s", got)
	}
}
