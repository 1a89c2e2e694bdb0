package proxy

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hone-rl/hone/model/chat"
	"github.com/hone-rl/hone/model/template"
	"github.com/hone-rl/hone/model/tokenizer"
	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
)

// tinyModel is the shipped tiny model folder (Qwen3's chat template, a
// character tokenizer with Qwen3's special tokens).
const tinyModel = "../testdata/tiny-model"

// scriptedVLLM answers as vLLM 0.32 does, in its wire formats, with
// scripted model outputs: /tokenize (messages through the model's chat
// template), /v1/chat/completions (qwen3 reasoning and hermes tool parsers)
// and /v1/completions with token-id prompts, streamed or not, with
// return_token_ids and "token_id:N" logprobs.
type scriptedVLLM struct {
	t       *testing.T
	tmpl    *template.Model
	tok     tokenizer.Tokenizer
	mu      sync.Mutex
	outputs []string // model outputs, in call order (each ends with <|im_end|>)
	paths   []string
	cmpl    []string    // the /v1/completions request bodies
	skew    atomic.Bool // /tokenize drops the first id: a probe mismatch
}

func newScriptedVLLM(t *testing.T, outputs ...string) *scriptedVLLM {
	t.Helper()
	tm, err := template.Load(tinyModel)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(tinyModel)
	if err != nil {
		t.Fatal(err)
	}
	return &scriptedVLLM{t: t, tmpl: tm, tok: tok, outputs: outputs}
}

func (v *scriptedVLLM) next(path string) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.paths = append(v.paths, path)
	if len(v.outputs) == 0 {
		return "Nothing more."
	}
	out := v.outputs[0]
	v.outputs = v.outputs[1:]
	return out
}

func (v *scriptedVLLM) routes() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.paths...)
}

func (v *scriptedVLLM) render(body []byte) []int32 {
	text, err := v.tmpl.RenderRequest(body)
	if err != nil {
		v.t.Errorf("stub render: %v", err)
	}
	return v.tok.Encode(text)
}

func idsJSON(ids []int32) string {
	b, _ := json.Marshal(ids)
	return string(b)
}

func (v *scriptedVLLM) handle(ctx *fasthttp.RequestCtx) {
	body := ctx.PostBody()
	ctx.SetContentType("application/json")
	switch string(ctx.Path()) {
	case "/tokenize":
		ids := v.render(body)
		if v.skew.Load() {
			ids = ids[1:]
		}
		ctx.SetBodyString(`{"count":` + strconv.Itoa(len(ids)) + `,"max_model_len":2048,"tokens":` + idsJSON(ids) +
			`,"token_strs":null}`)
	case "/v1/completions":
		var prompt []int32
		if err := json.Unmarshal([]byte(gjson.GetBytes(body, "prompt").Raw), &prompt); err != nil {
			v.t.Errorf("completions prompt is not token ids: %s", gjson.GetBytes(body, "prompt").Raw)
		}
		v.mu.Lock()
		v.cmpl = append(v.cmpl, string(body))
		v.mu.Unlock()
		v.completions(ctx, body, prompt, v.next("/v1/completions"))
	case "/v1/chat/completions":
		v.chat(ctx, body, v.render(body), v.next("/v1/chat/completions"))
	default:
		ctx.SetStatusCode(404)
	}
}

// sampled is a scripted output as the engine samples it: its ids and the
// text vLLM returns (special tokens skipped).
func (v *scriptedVLLM) sampled(out string) ([]int32, []string) {
	ids := v.tok.Encode(out)
	texts := make([]string, len(ids))
	for i, id := range ids {
		if !v.tok.IsSpecial(id) {
			texts[i] = v.tok.Decode([]int32{id})
		}
	}
	return ids, texts
}

func lpJSON(ids []int32) string {
	var toks, lps, tops []string
	for i, id := range ids {
		tok := `"token_id:` + strconv.Itoa(int(id)) + `"`
		lp := "-0." + strconv.Itoa(100+i)
		toks, lps = append(toks, tok), append(lps, lp)
		tops = append(tops, "{"+tok+":"+lp+"}")
	}
	offs := make([]string, len(ids))
	for i := range offs {
		offs[i] = strconv.Itoa(i)
	}
	return `{"text_offset":[` + strings.Join(offs, ",") + `],"token_logprobs":[` + strings.Join(lps, ",") +
		`],"tokens":[` + strings.Join(toks, ",") + `],"top_logprobs":[` + strings.Join(tops, ",") + `]}`
}

func (v *scriptedVLLM) completions(ctx *fasthttp.RequestCtx, body []byte, prompt []int32, out string) {
	ids, texts := v.sampled(out)
	model := gjson.GetBytes(body, "model").String()
	usage := `{"prompt_tokens":` + strconv.Itoa(len(prompt)) + `,"total_tokens":` + strconv.Itoa(len(prompt)+len(ids)) +
		`,"completion_tokens":` + strconv.Itoa(len(ids)) + `,"prompt_tokens_details":null}`
	head := `{"id":"cmpl-7f3a","object":"text_completion","created":1763780000,"model":"` + model + `",`
	if !gjson.GetBytes(body, "stream").Bool() {
		ctx.SetBodyString(head + `"choices":[{"index":0,"text":` + plainJSONString(strings.Join(texts, "")) +
			`,"logprobs":` + lpJSON(ids) + `,"finish_reason":"stop","stop_reason":null,"prompt_logprobs":null,` +
			`"prompt_token_ids":` + idsJSON(prompt) + `,"token_ids":` + idsJSON(ids) + `}],"service_tier":null,` +
			`"system_fingerprint":null,"usage":` + usage + `,"kv_transfer_params":null}`)
		return
	}
	var sb strings.Builder
	for i, id := range ids {
		fin, pids := "null", ""
		if i == len(ids)-1 {
			fin = `"stop"`
		}
		if i == 0 {
			pids = `,"prompt_token_ids":` + idsJSON(prompt)
		}
		sb.WriteString("data: " + head + `"choices":[{"index":0,"text":` + plainJSONString(texts[i]) + `,"logprobs":` +
			lpJSON([]int32{id}) + `,"finish_reason":` + fin + `,"stop_reason":null,"token_ids":[` +
			strconv.Itoa(int(id)) + `]` + pids + `}],"usage":null}` + "\n\n")
	}
	if gjson.GetBytes(body, "stream_options.include_usage").Bool() {
		sb.WriteString("data: " + head + `"choices":[],"usage":` + usage + "}\n\n")
	}
	sb.WriteString("data: [DONE]\n\n")
	ctx.SetContentType("text/event-stream")
	ctx.SetBodyString(sb.String())
}

// chat answers a chat request non-streamed, as vLLM with
// --reasoning-parser qwen3 --tool-call-parser hermes.
func (v *scriptedVLLM) chat(ctx *fasthttp.RequestCtx, body []byte, prompt []int32, out string) {
	if gjson.GetBytes(body, "stream").Bool() {
		v.t.Errorf("scripted chat answers non-stream requests only")
	}
	ids, texts := v.sampled(out)
	tools := gjson.GetBytes(body, "tools").IsArray()
	// vLLM 0.32's qwen3 parser reads output as reasoning until </think>
	// while thinking is enabled
	thinking := gjson.GetBytes(body, "chat_template_kwargs.enable_thinking").Type != gjson.False
	po := chat.ParseOutput(strings.Join(texts, ""), chat.ParseOptions{Reasoning: true, Tools: tools, ThinkOpen: thinking})
	msg := map[string]any{"role": "assistant", "content": po.Content, "reasoning": po.Reasoning}
	fin := "stop"
	if len(po.ToolCalls) > 0 {
		var calls []map[string]any
		for _, tc := range po.ToolCalls {
			calls = append(calls, map[string]any{"id": tc.ID, "type": "function",
				"function": map[string]string{"name": tc.Name, "arguments": tc.Arguments}})
		}
		msg["tool_calls"], fin = calls, "tool_calls"
	}
	m, _ := json.Marshal(msg)
	var lps []string
	for i := range ids {
		lps = append(lps, `{"token":"x","logprob":-0.`+strconv.Itoa(100+i)+`,"bytes":[120],"top_logprobs":[]}`)
	}
	ctx.SetBodyString(`{"id":"chatcmpl-7f3a","object":"chat.completion","created":1763780000,"model":"` +
		gjson.GetBytes(body, "model").String() + `","choices":[{"index":0,"message":` + string(m) +
		`,"logprobs":{"content":[` + strings.Join(lps, ",") + `]},"finish_reason":"` + fin +
		`","stop_reason":null,"token_ids":` + idsJSON(ids) + `}],"usage":{"prompt_tokens":` + strconv.Itoa(len(prompt)) +
		`,"total_tokens":0,"completion_tokens":` + strconv.Itoa(len(ids)) + `},"prompt_token_ids":` + idsJSON(prompt) + `}`)
}

func plainJSONString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}
