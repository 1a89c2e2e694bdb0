package engine

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hone-rl/hone/model/tokenizer"
)

// TestUnloadWhileRunning unloads an adapter while a request uses it: the
// request finishes on the adapter and the adapter is freed once, after it.
func TestUnloadWhileRunning(t *testing.T) {
	e, srv := newTestEngine(t, DefaultOptions())
	lm := e.model().(*hashLM)
	if code, b := post(t, srv.URL+"/v1/load_lora_adapter", map[string]any{"lora_name": "a", "lora_path": t.TempDir()}); code != 200 {
		t.Fatalf("load: %d %s", code, b)
	}
	body := map[string]any{"model": "a", "prompt": "xy", "temperature": 0, "max_tokens": 40, "ignore_eos": true, "return_token_ids": true}
	want := complete(t, srv.URL, body)
	lm.mu.Lock()
	lm.delay = 2 * time.Millisecond
	lm.mu.Unlock()
	done := make(chan complResp)
	go func() { done <- complete(t, srv.URL, body) }()
	time.Sleep(20 * time.Millisecond)
	if code, b := post(t, srv.URL+"/v1/unload_lora_adapter", map[string]any{"lora_name": "a"}); code != 200 {
		t.Fatalf("unload: %d %s", code, b)
	}
	if n := lm.frees.Load(); n != 0 {
		t.Fatalf("adapter freed while in use (%d)", n)
	}
	got := <-done
	if !equalIDs(got.Choices[0].TokenIDs, want.Choices[0].TokenIDs) {
		t.Fatal("output changed when the adapter was unloaded mid-request")
	}
	deadline := time.Now().Add(2 * time.Second)
	for lm.frees.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("adapter frees = %d, want 1", lm.frees.Load())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCancelStorm starts many streams and drops half of them at random
// points: the survivors complete and nothing stays running.
func TestCancelStorm(t *testing.T) {
	e, srv := newTestEngine(t, Options{MaxNumSeqs: 4})
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			body := fmt.Sprintf(`{"prompt":"storm %d","max_tokens":30,"ignore_eos":true,"stream":true,"n":2}`, i)
			req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/completions", strings.NewReader(body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			if i%2 == 1 {
				time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
				cancel()
				return
			}
			b, err := io.ReadAll(resp.Body)
			if err != nil || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
				errs <- fmt.Errorf("stream %d incomplete: %v", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for e.sched.nRunning.Load() != 0 || e.sched.nWaiting.Load() != 0 || e.inflight.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("left running=%d waiting=%d inflight=%d", e.sched.nRunning.Load(), e.sched.nWaiting.Load(), e.inflight.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLongPromptNotStarved: a prompt longer than the per-step token budget
// is admitted while other sequences keep decoding.
func TestLongPromptNotStarved(t *testing.T) {
	_, srv := newTestEngine(t, Options{MaxNumBatchedTokens: 8})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					complete(t, srv.URL, map[string]any{"prompt": "ab", "max_tokens": 20, "ignore_eos": true})
				}
			}
		}()
	}
	r := complete(t, srv.URL, map[string]any{"prompt": strings.Repeat("long ", 40), "max_tokens": 5, "ignore_eos": true})
	close(stop)
	wg.Wait()
	if r.Usage.PromptTokens != 200 || r.Usage.CompletionTokens != 5 {
		t.Fatalf("usage %+v", r.Usage)
	}
}

// TestPrefixCacheExactOnToyModel: with a model whose logits depend only on
// the token history, prefix reuse must not change anything, across turns,
// shared prompts and adapters.
func TestPrefixCacheExactOnToyModel(t *testing.T) {
	run := func(mib int) []complResp {
		_, srv := newTestEngine(t, Options{PrefixCacheMiB: mib})
		if code, b := post(t, srv.URL+"/v1/load_lora_adapter", map[string]any{"lora_name": "a", "lora_path": "/"}); code != 200 {
			t.Fatalf("load: %d %s", code, b)
		}
		var out []complResp
		prompt := "turn one"
		for i := 0; i < 6; i++ {
			model := []string{testModel, "a"}[i%2]
			r := complete(t, srv.URL, map[string]any{"model": model, "prompt": prompt, "temperature": 0, "max_tokens": 6,
				"logprobs": 1, "return_token_ids": true})
			out = append(out, r)
			if i%2 == 1 {
				prompt += r.Choices[0].Text + " next"
			}
		}
		if mib > 0 {
			_, m := httpGet(t, srv.URL+"/metrics")
			if strings.Contains(m, `vllm:prefix_cache_hits_total{model_name="test-model"} 0`) {
				t.Fatalf("no prefix cache hits")
			}
		}
		return out
	}
	cached, plain := run(16), run(0)
	for i := range cached {
		a, b := cached[i].Choices[0], plain[i].Choices[0]
		if !equalIDs(a.TokenIDs, b.TokenIDs) {
			t.Fatalf("request %d: %v != %v", i, a.TokenIDs, b.TokenIDs)
		}
		for j := range a.Logprobs.TokenLogprobs {
			if a.Logprobs.TokenLogprobs[j] != b.Logprobs.TokenLogprobs[j] {
				t.Fatalf("request %d token %d logprob differs", i, j)
			}
		}
	}
}

// TestPrefixCacheSalted: a request reuses only the prefix caches of
// requests with its cache_salt (none: the unsalted ones), so one client
// cannot time another's prompts; an invalid salt is vLLM's 400.
func TestPrefixCacheSalted(t *testing.T) {
	_, srv := newTestEngine(t, Options{PrefixCacheMiB: 16})
	hits := func() string {
		_, m := httpGet(t, srv.URL+"/metrics")
		for _, l := range strings.Split(m, "\n") {
			if strings.HasPrefix(l, "vllm:prefix_cache_hits_total{") {
				return l[strings.LastIndexByte(l, ' ')+1:]
			}
		}
		t.Fatal("no vllm:prefix_cache_hits_total")
		return ""
	}
	req := func(prompt string, salt any) {
		body := map[string]any{"model": testModel, "prompt": prompt, "temperature": 0, "max_tokens": 2}
		if salt != nil {
			body["cache_salt"] = salt
		}
		complete(t, srv.URL, body)
	}
	prompt := "one two three four five six seven eight"
	req(prompt, "tenant-a")
	for _, salt := range []any{"tenant-b", nil} {
		req(prompt+" nine", salt)
		if h := hits(); h != "0" {
			t.Fatalf("salt %v reused tenant-a's prompt: %s hits", salt, h)
		}
	}
	req(prompt+" ten", "tenant-a")
	if h := hits(); h == "0" {
		t.Fatal("the same salt reused nothing")
	}
	for _, bad := range []any{"", "a/b", "a@b", strings.Repeat("s", 129)} {
		code, b := post(t, srv.URL+"/v1/completions", map[string]any{"model": testModel, "prompt": "x", "cache_salt": bad})
		if code != 400 || !strings.Contains(string(b), "cache_salt") {
			t.Errorf("cache_salt %q: %d %s", bad, code, b)
		}
	}
}

// TestKVBudgetPreemption runs more sequences than the KV budget holds: some
// are preempted and recomputed, and every output matches its solo run.
func TestKVBudgetPreemption(t *testing.T) {
	for _, prefixMiB := range []int{0, 1} {
		t.Run(fmt.Sprintf("prefix_cache_mib=%d", prefixMiB), func(t *testing.T) {
			tok := newTestTokenizer(t)
			lm := &hashLM{vocab: tok.VocabSize(), bytesFrom: len(tokenizer.DefaultChars), kvBytes: 1 << 20 / 100}
			e := newEngine(Options{ServedModelName: testModel, ModelDir: "/m", KVCacheMiB: 1, PrefixCacheMiB: prefixMiB},
				modelParts{lm: lm, tok: tok, maxModelLen: 1024, eos: tok.Config().EOSIDs, defaults: genDefaults{Temperature: 1, TopP: 1}})
			srv := httptest.NewServer(e.Handler())
			defer func() { srv.Close(); e.Close() }()
			body := func(i int) map[string]any {
				return map[string]any{"prompt": fmt.Sprintf("prompt number %d....", i), "max_tokens": 40, "ignore_eos": true,
					"temperature": 0, "logprobs": 0, "return_token_ids": true}
			}
			solo := make([]complResp, 8) // 8 at once: enough overlap to fill the budget even on a loaded machine
			for i := range solo {
				solo[i] = complete(t, srv.URL, body(i))
			}
			// Rounds of 8 at once until one preempts: on a loaded machine the
			// requests of one round may not overlap enough to fill the budget.
			for round := 0; ; round++ {
				got := make([]complResp, 8)
				var wg sync.WaitGroup
				for i := range got {
					wg.Add(1)
					go func() { defer wg.Done(); got[i] = complete(t, srv.URL, body(i)) }()
				}
				wg.Wait()
				for i := range got {
					a, b := got[i].Choices[0], solo[i].Choices[0]
					if !equalIDs(a.TokenIDs, b.TokenIDs) || a.Text != b.Text {
						t.Fatalf("round %d request %d differs after preemption", round, i)
					}
					for j := range a.Logprobs.TokenLogprobs {
						if a.Logprobs.TokenLogprobs[j] != b.Logprobs.TokenLogprobs[j] {
							t.Fatalf("round %d request %d token %d logprob differs", round, i, j)
						}
					}
				}
				_, m := httpGet(t, srv.URL+"/metrics")
				if !strings.Contains(m, `vllm:num_preemptions_total{model_name="test-model"} 0`) {
					break
				}
				if round == 9 {
					t.Fatal("no preemption happened in 10 rounds")
				}
			}
		})
	}
}

// TestChunkedPrefill: with a small step budget long prompts are fed in
// chunks while other sequences keep decoding, and outputs are unchanged.
func TestChunkedPrefill(t *testing.T) {
	run := func(budget int) ([]complResp, *hashLM) {
		e, srv := newTestEngine(t, Options{MaxNumBatchedTokens: budget})
		out := make([]complResp, 4)
		var wg sync.WaitGroup
		for i := range out {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out[i] = complete(t, srv.URL, map[string]any{"prompt": strings.Repeat(fmt.Sprintf("chunk %d ", i), 12),
					"max_tokens": 12, "ignore_eos": true, "temperature": 0, "logprobs": 0, "return_token_ids": true})
			}()
		}
		wg.Wait()
		return out, e.model().(*hashLM)
	}
	chunked, lm := run(16)
	whole, _ := run(1 << 16)
	for i := range chunked {
		a, b := chunked[i].Choices[0], whole[i].Choices[0]
		if !equalIDs(a.TokenIDs, b.TokenIDs) || fmt.Sprint(a.Logprobs.TokenLogprobs) != fmt.Sprint(b.Logprobs.TokenLogprobs) {
			t.Fatalf("request %d: chunked prefill changed the output", i)
		}
	}
	lm.mu.Lock()
	defer lm.mu.Unlock()
	for _, n := range lm.stepTokens {
		if n > 16 {
			t.Fatalf("a step ran %d tokens, budget 16", n)
		}
	}
}
