package proxy

import (
	"log/slog"
	"testing"

	"github.com/tidwall/gjson"
)

// TestChatConstrained: the calls vLLM constrains on its chat endpoint
// with a structural tag (auto with parallel_tool_calls false or strict
// tools), which tokens mode leaves to vLLM engines' chat endpoints and
// sends embedded engines as token ids.
func TestChatConstrained(t *testing.T) {
	tool := `[{"type":"function","function":{"name":"a"}}]`
	strict := `[{"type":"function","function":{"name":"a","strict":true}}]`
	for _, c := range []struct {
		body, want string
	}{
		{`{"tools":` + tool + `}`, ""},
		{`{"tools":` + tool + `,"parallel_tool_calls":true}`, ""},
		{`{"tools":` + tool + `,"parallel_tool_calls":false}`, "parallel_tool_calls false"},
		{`{"tools":` + tool + `,"parallel_tool_calls":false,"tool_choice":"auto"}`, "parallel_tool_calls false"},
		{`{"tools":` + strict + `}`, "strict tools"},
		{`{"tools":[{"type":"function","strict":true,"function":{"name":"a"}}]}`, "strict tools"},
		{`{"tools":` + tool + `,"parallel_tool_calls":false,"tool_choice":"required"}`, ""},
		{`{"tools":` + strict + `,"tool_choice":{"type":"function","function":{"name":"a"}}}`, ""},
		{`{"tools":` + tool + `,"parallel_tool_calls":false,"tool_choice":"none"}`, ""},
		{`{"tools":[],"parallel_tool_calls":false}`, ""},
		{`{"parallel_tool_calls":false}`, ""},
	} {
		if got := chatConstrained(gjson.Parse(c.body)); got != c.want {
			t.Errorf("%s: %q, want %q", c.body, got, c.want)
		}
	}
	k := &continuity{log: slog.New(slog.DiscardHandler)}
	p := &plan{k: k, up: []byte(`{"messages":[],"tools":` + tool + `,"parallel_tool_calls":false}`)}
	if p.tokensOn(&engine{kind: "vllm"}) || !p.tokensOn(&engine{kind: "embedded"}) {
		t.Error("parallel_tool_calls false: want chat for vllm, token ids for embedded")
	}
	p.up = []byte(`{"messages":[],"tools":` + tool + `}`)
	if !p.tokensOn(&engine{kind: "vllm"}) {
		t.Error("auto: want token ids for vllm")
	}
}
