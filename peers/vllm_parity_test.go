package peers

import (
	"context"
	"fmt"
	"math"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/hone-rl/hone/engine"
)

// parityTol bounds |logprob(hone's engine) - logprob(vLLM)| per token. Both
// compute in float32 on the CPU with different kernels (vLLM: PyTorch's
// oneDNN/AVX2 GEMMs and its CPU attention; hone: kernels/cpu); measured
// differences are about 2e-6 without and with a LoRA adapter.
const parityTol = 1e-4

// parityRequests are sent to both engines: chat (system prompt; tools in
// the template with thinking off; a multi-turn history with a tool call and
// its result) and completions, greedy, with logprobs and token ids.
var parityRequests = []struct{ name, path, body string }{
	{"chat", "/v1/chat/completions", `{"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Name a colour."}],"max_tokens":16,"temperature":0,"logprobs":true,"return_token_ids":true}`},
	{"chat_tools", "/v1/chat/completions", `{"messages":[{"role":"user","content":"What is 17 * 23?"}],"tools":` + toolsJSON + `,"chat_template_kwargs":{"enable_thinking":false},"max_tokens":16,"temperature":0,"logprobs":true,"return_token_ids":true}`},
	{"chat_history", "/v1/chat/completions", `{"messages":[{"role":"user","content":"What is 17 * 23?"},` +
		`{"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"calculator","arguments":"{\"expression\": \"17 * 23\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"391"}],"tools":` + toolsJSON + `,"max_tokens":16,"temperature":0,"logprobs":true,"return_token_ids":true}`},
	{"completions", "/v1/completions", `{"prompt":"The colour of the sky is","max_tokens":16,"temperature":0,"logprobs":1,"return_token_ids":true}`},
}

// answer is one engine's greedy answer: prompt ids, completion ids and the
// sampled tokens' logprobs.
type answer struct {
	prompt, ids []int32
	lps         []float64
}

func ask(t *testing.T, url, model, path, body string) answer {
	t.Helper()
	body = `{"model":"` + model + `",` + strings.TrimPrefix(body, "{")
	status, _, got, err := Post(context.Background(), url+path, []byte(body), nil)
	if err != nil || status != 200 {
		t.Fatalf("%s%s (%s): %d %v %s", url, path, model, status, err, got)
	}
	tk := vllmTokens(got, false)
	return answer{prompt: tk.prompt, ids: tk.ids[0], lps: tk.lps[0]}
}

// diff compares two answers: it returns an error naming the first
// difference in prompt or completion ids, and the largest logprob
// difference.
func diff(a, b answer) (float64, error) {
	if !slices.Equal(a.prompt, b.prompt) {
		return 0, fmt.Errorf("prompt ids differ:\n  hone  %v\n  vLLM  %v", a.prompt, b.prompt)
	}
	if len(a.prompt) == 0 {
		return 0, fmt.Errorf("no prompt ids")
	}
	if !slices.Equal(a.ids, b.ids) {
		return 0, fmt.Errorf("greedy tokens differ:\n  hone  %v\n  vLLM  %v", a.ids, b.ids)
	}
	if len(a.lps) != len(a.ids) || len(b.lps) != len(b.ids) {
		return 0, fmt.Errorf("%d/%d logprobs for %d tokens", len(a.lps), len(b.lps), len(a.ids))
	}
	worst := 0.0
	for i := range a.lps {
		worst = max(worst, math.Abs(a.lps[i]-b.lps[i]))
	}
	return worst, nil
}

// TestModelParity serves the folder vLLM serves with hone's embedded engine
// and checks, request by request, that both give the same prompt token ids
// (chat template and tokenizer, tools and a tool-call history included),
// the same greedy tokens, and logprobs within parityTol; then the same with
// a LoRA adapter hone's trainer wrote, loaded into both through
// /v1/load_lora_adapter. The adapter must move vLLM's logprobs by more than
// 100x the tolerance (so the comparison could see a wrong adapter), and the
// same adapter with one weight changed, in hone's engine, must fail the
// comparison.
func TestModelParity(t *testing.T) {
	v := needVLLM(t)
	dir := modelDir(t, v)
	eng, err := engine.New(context.Background(), engine.Options{ModelDir: dir, ServedModelName: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	srv := httptest.NewServer(eng.Handler())
	defer srv.Close()

	// Templates: /tokenize of both for message lists no request above has.
	for _, msgs := range []string{
		`[{"role":"user","content":"Hi"}]`,
		`[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},{"role":"assistant","content":"<think>\nhm\n</think>\n\nHello."},{"role":"user","content":"Again"}]`,
		`[{"role":"user","content":[{"type":"text","text":"two"},{"type":"text","text":"parts"}]}]`,
	} {
		hone, vl := promptIDs(t, srv.URL, msgs), promptIDs(t, v.URL, msgs)
		if !slices.Equal(hone, vl) || len(vl) == 0 {
			t.Errorf("/tokenize %s:\n  hone  %v\n  vLLM  %v", msgs, hone, vl)
		}
	}

	compare := func(t *testing.T, honeModel, vllmModel string) map[string]answer {
		out := map[string]answer{}
		for _, r := range parityRequests {
			h, vl := ask(t, srv.URL, honeModel, r.path, r.body), ask(t, v.URL, vllmModel, r.path, r.body)
			worst, err := diff(h, vl)
			if err != nil {
				t.Errorf("%s (%s): %v", r.name, honeModel, err)
				continue
			}
			t.Logf("%s (%s): %d prompt ids, %d greedy tokens equal, max |logprob diff| %.2g", r.name, honeModel, len(h.prompt), len(h.ids), worst)
			if worst > parityTol {
				t.Errorf("%s (%s): logprobs differ by up to %.3g (> %g)\n  hone %v\n  vLLM %v", r.name, honeModel, worst, parityTol, h.lps, vl.lps)
			}
			out[r.name] = vl
		}
		return out
	}
	base := compare(t, "tiny", "tiny")

	// A LoRA adapter from hone's trainer: one GRPO step on random sessions.
	src := &memSource{}
	tr, ckpt := newTrainer(t, dir, src, nil)
	prompt := promptIDs(t, v.URL, `[{"role":"user","content":"Name a colour."}]`)
	adapter := step(t, tr, src, prompt, ckpt)
	loadLoRA(t, v.URL, "parity", adapter)
	t.Cleanup(func() { unloadLoRA(t, v.URL, "parity") }) // the next test finds vLLM as it was
	loadLoRA(t, srv.URL, "parity", adapter)
	lora := compare(t, "parity", "parity")
	moved := 0.0
	for name, a := range lora {
		b := base[name]
		for i := range min(len(a.lps), len(b.lps)) {
			if a.ids[i] != b.ids[i] {
				moved = math.Inf(1)
				break
			}
			moved = max(moved, math.Abs(a.lps[i]-b.lps[i]))
		}
	}
	t.Logf("the adapter moves vLLM's logprobs by up to %.3g", moved)
	if moved < 100*parityTol {
		t.Errorf("the trained adapter moves vLLM's logprobs by only %.3g: the LoRA comparison could not tell adapters apart", moved)
	}

	// One weight of the adapter changed: the comparison must notice.
	loadLoRA(t, srv.URL, "parity-bad", perturbedCopy(t, adapter, 0.5))
	r := parityRequests[0]
	worst, err := diff(ask(t, srv.URL, "parity-bad", r.path, r.body), ask(t, v.URL, "parity", r.path, r.body))
	if err == nil && worst <= parityTol {
		t.Errorf("an adapter with one weight changed by 0.5 still matches vLLM's (max |logprob diff| %.2g): the comparison is blind", worst)
	} else {
		t.Logf("one adapter weight changed by 0.5: detected (%v, max |logprob diff| %.2g)", err, worst)
	}
}
