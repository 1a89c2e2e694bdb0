package proxy

import (
	"testing"
)

// TestEmptyDelta: only chat chunks whose every choice has an empty delta
// and does not finish are the ones vLLM sends just to carry logprobs or
// token ids (chunk shapes from vLLM 0.32, proxy/testdata/cases/chat_vllm_*).
func TestEmptyDelta(t *testing.T) {
	for _, c := range []struct {
		data string
		want bool
	}{
		{`{"id":"x","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":null,"token_ids":null}]}`, true},
		{`{"id":"x","choices":[{"index":0,"delta":{},"logprobs":{"content":[]},"finish_reason":null,"token_ids":[151657]}]}`, true},
		{`{"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop","stop_reason":151643}]}`, false},
		{`{"id":"x","choices":[{"index":0,"delta":{"content":""},"finish_reason":null}]}`, false},
		{`{"id":"x","choices":[{"index":0,"delta":{"content":null,"tool_calls":[{"index":0,"function":{"arguments":"{"}}]},"finish_reason":null}]}`, false},
		{`{"id":"x","choices":[{"index":0,"delta":{},"finish_reason":null},{"index":1,"delta":{"content":"a"},"finish_reason":null}]}`, false},
		{`{"id":"x","choices":[],"usage":{"prompt_tokens":1}}`, false},
		{`{"id":"x","choices":[{"index":0,"delta":{},"finish_reason":null}],"usage":{"prompt_tokens":1}}`, false},
		{`{"id":"x","choices":[{"index":0,"text":"","finish_reason":null}]}`, false},   // completions: no delta
		{`{"id":"x","choices":[{"index":0,"delta":{ },"finish_reason":null}]}`, false}, // not vLLM's spelling: passed on
		{`{"id":"x","choices":[{"index":0,"delta":{},"finish_reason":null}],"usage":[]}`, false},
		{`{"id":"x","choices":{"index":0,"delta":{},"finish_reason":null}}`, false},  // choices not an array
		{`{"id":"x","choices":[{"index":0,"delta":{},"finish_reason":null}]`, false}, // not JSON: passed on
		{`{"id":"x","choices":[{"index":0,"delta":{}}, 7]}`, false},
	} {
		a := accumulator{dialect: chatDialect}
		a.addChunk([]byte(`{"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`))
		a.addChunk([]byte(c.data))
		if got := chatDialect.silentChunk(&a); got != c.want {
			t.Errorf("silentChunk(%s) = %v, want %v", c.data, got, c.want)
		}
	}
}

// TestReleasePutsFingerprintOnEveryFinalChunk: with n=2 both choices'
// final chunks are held until the usage chunk and each gets its
// system_fingerprint back; other held events are passed unchanged and in
// order.
func TestReleasePutsFingerprintOnEveryFinalChunk(t *testing.T) {
	b := &streamBody{}
	b.held = []byte("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}\n\n" +
		"data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"a\"},\"finish_reason\":null}]}\n\n" +
		"data: {\"choices\":[{\"index\":1,\"delta\":{},\"finish_reason\":\"stop\"}],\"system_fingerprint\":\"old\"}\n\n")
	got := string(b.release([]byte(`{"choices":[],"usage":{},"system_fingerprint":"fp"}`), []byte("data: [DONE]\n\n")))
	want := "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}],\"system_fingerprint\":\"fp\"}\n\n" +
		"data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"a\"},\"finish_reason\":null}]}\n\n" +
		"data: {\"choices\":[{\"index\":1,\"delta\":{},\"finish_reason\":\"stop\"}],\"system_fingerprint\":\"old\"}\n\n" +
		"data: [DONE]\n\n"
	if got != want {
		t.Errorf("release:\n%s\nwant:\n%s", got, want)
	}
	if len(b.held) != 0 {
		t.Errorf("held after release: %q", b.held)
	}
	// no usage chunk (the stream broke): held events go out unchanged
	b.held = []byte("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}\n\n")
	if got := string(b.release(nil, nil)); got != "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}\n\n" {
		t.Errorf("release without usage: %q", got)
	}
}
