package proxy

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/hone-rl/hone/internal/jsonwalk"
	"github.com/tidwall/gjson"
)

// BenchmarkAccumulateBody is the per-call hot-path work on a non-stream
// response: one walk that aggregates ids/logprobs and notes injected spans,
// then the strip.
func BenchmarkAccumulateBody(b *testing.B) {
	body, err := os.ReadFile(fixture(&testing.T{}, "chat", "upstream.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		a := accumulator{dialect: chatDialect}
		a.addBody(body)
		_ = strip(body, a.injected, asked{})
	}
}

// bigBody is a vLLM chat response of n tokens with logprobs and token ids.
func bigBody(n int) []byte { return bigBodyPrompt(n, 10) }

// bigBodyPrompt is bigBody with a prompt of p token ids.
func bigBodyPrompt(n, p int) []byte {
	prompt := make([]string, p)
	for i := range prompt {
		prompt[i] = strconv.Itoa(100 + i*37%150000)
	}
	var lp, ids []string
	for i := 0; i < n; i++ {
		lp = append(lp, fmt.Sprintf(`{"token":"tok%d","logprob":-0.%04d,"bytes":[116,111,107],"top_logprobs":[]}`, i, i))
		ids = append(ids, strconv.Itoa(1000+i))
	}
	return []byte(`{"id":"chatcmpl-big","object":"chat.completion","created":1763780000,"model":"Qwen/Qwen3-0.6B","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat("tok ", n) + `","refusal":null,"tool_calls":[],"reasoning_content":null},"logprobs":{"content":[` + strings.Join(lp, ",") +
		`]},"finish_reason":"length","stop_reason":null,"token_ids":[` + strings.Join(ids, ",") + `]}],"usage":{"prompt_tokens":10,"total_tokens":` +
		strconv.Itoa(10+n) + `,"completion_tokens":` + strconv.Itoa(n) + `},"prompt_token_ids":[` + strings.Join(prompt, ",") + `]}`)
}

func BenchmarkAccumulateBody512(b *testing.B) { benchAccumulateBig(b, 512) }

// BenchmarkAccumulateBody64 is bench/proxy's -reply-tokens 64 answer size
// (5.8 KB there).
func BenchmarkAccumulateBody64(b *testing.B) { benchAccumulateBig(b, 64) }

// BenchmarkAccumulateLongPrompt is an agent's turn: a 64-token answer to an
// 8,000-token prompt, whose ids vLLM returns with the answer.
func BenchmarkAccumulateLongPrompt(b *testing.B) { benchAccumulate(b, bigBodyPrompt(64, 8000)) }

func benchAccumulateBig(b *testing.B, n int) { benchAccumulate(b, bigBody(n)) }

func benchAccumulate(b *testing.B, body []byte) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var out []byte
	for b.Loop() {
		a := accumulator{dialect: chatDialect}
		a.addBody(body)
		out = stripInto(out[:0], body, a.injected, asked{})
	}
}

// BenchmarkRequestCheck is the check every agent request gets (valid JSON,
// an object) on a request with 8 KB of instructions (bench/proxy -pad
// 8000), hone's one pass beside gjson's Valid then Parse.
func BenchmarkRequestCheck(b *testing.B) {
	body := []byte(`{"model":"m","messages":[{"role":"system","content":"` + strings.Repeat("You are a careful agent. ", 320) +
		`"},{"role":"user","content":"Say hi \"now\"\n"}],"max_tokens":16}`)
	b.Run("hone", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if !jsonwalk.IsObject(body) {
				b.Fatal("not an object")
			}
		}
	})
	b.Run("gjson", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if !gjson.ValidBytes(body) || !gjson.ParseBytes(body).IsObject() {
				b.Fatal("not an object")
			}
		}
	})
}

// BenchmarkAccumulateChunk is a stream's per-event work on a vLLM chunk
// with one token's logprobs and id (bench/proxy's stream): the fold, the
// silent-chunk check and the strip.
func BenchmarkAccumulateChunk(b *testing.B) {
	chunk := []byte(`{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1763780000,"model":"m","choices":[{"index":0,"delta":{"content":"x"},"logprobs":{"content":[{"token":"x","logprob":-0.5,"bytes":[120],"top_logprobs":[]}]},"finish_reason":null,"token_ids":[87]}]}`)
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	a := accumulator{dialect: chatDialect}
	a.addChunk(chunk)
	var out []byte
	for b.Loop() {
		a.addChunk(chunk)
		_ = chatAPI{}.silentChunk(&a)
		out = stripInto(out[:0], chunk, a.injected, asked{})
	}
}

// BenchmarkAccumulateLongStream folds a whole 4,000-token stream (a coding
// agent's long answer), one chunk per token of four characters.
func BenchmarkAccumulateLongStream(b *testing.B) {
	chunk := []byte(`{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1763780000,"model":"m","choices":[{"index":0,"delta":{"content":"abcd"},"logprobs":{"content":[{"token":"abcd","logprob":-0.5,"bytes":[97,98,99,100],"top_logprobs":[]}]},"finish_reason":null,"token_ids":[87]}]}`)
	b.ReportAllocs()
	for b.Loop() {
		a := accumulator{dialect: chatDialect}
		for range 4000 {
			a.addChunk(chunk)
		}
	}
}
