package proxy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tidwall/sjson"
)

// agentRequest is a chat request with a long history, as a coding agent
// sends (n turns of ~1 KB).
func agentRequest(n int) []byte {
	var msgs []string
	for i := 0; i < n; i++ {
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":"step %d: %s"}`, i, strings.Repeat("look at the file and fix it ", 18)),
			fmt.Sprintf(`{"role":"assistant","content":"%s"}`, strings.Repeat("I will edit the function ", 20)))
	}
	return []byte(`{"model":"agent","stream":true,"messages":[` + strings.Join(msgs, ",") + `],"max_tokens":512,"temperature":0.7}`)
}

// BenchmarkRewriteAgentRequest: hone's rewrite of a ~50 KB request against
// the same fields set with one sjson.SetBytes each (the previous way).
func BenchmarkRewriteAgentRequest(b *testing.B) {
	body := agentRequest(25)
	a, model, _ := inspect(body, chatDialect)
	b.Run("hone", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := rewriteRequest(body, chatDialect, a, model, "auto", "agent-v3", true, ""); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sjson-per-field", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			out, _ := sjson.SetBytes(body, "model", "agent-v3")
			out, _ = sjson.SetBytes(out, "logprobs", true)
			out, _ = sjson.SetBytes(out, "return_token_ids", true)
			_, _ = sjson.SetBytes(out, "stream_options.include_usage", true)
		}
	})
}
