package engine

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hone-rl/hone/model/tokenizer"
)

func TestErrors(t *testing.T) {
	_, srv := newTestEngine(t, DefaultOptions())
	long := strings.Repeat("a", 1100)
	cases := []struct {
		name, path string
		body       any
		code       int
		typ, msg   string
	}{
		{"unknown model", "/v1/chat/completions", map[string]any{"model": "nope", "messages": hello}, 404, "NotFoundError", "The model `nope` does not exist."},
		{"malformed json", "/v1/chat/completions", []byte(`{"messages": [`), 400, "BadRequestError", "JSON decode error"},
		{"no messages", "/v1/chat/completions", map[string]any{"model": testModel}, 400, "BadRequestError", "messages"},
		{"bad temperature", "/v1/chat/completions", map[string]any{"messages": hello, "temperature": -1}, 400, "BadRequestError", "temperature must be non-negative"},
		{"bad top_p", "/v1/completions", map[string]any{"prompt": "a", "top_p": 1.5}, 400, "BadRequestError", "top_p must be in (0, 1]"},
		{"bad n", "/v1/completions", map[string]any{"prompt": "a", "n": 0}, 400, "BadRequestError", "n must be at least 1"},
		{"bad max_tokens", "/v1/completions", map[string]any{"prompt": "a", "max_tokens": 0}, 400, "BadRequestError", "max_tokens must be at least 1"},
		{"max_tokens too large", "/v1/completions", map[string]any{"prompt": "a", "max_tokens": 5000}, 400, "BadRequestError", "'max_tokens' or 'max_completion_tokens' is too large: 5000"},
		{"prompt too long", "/v1/completions", map[string]any{"prompt": long}, 400, "BadRequestError", "maximum context length is 1024 tokens. However, your request has 1100 input tokens"},
		{"chat too long", "/v1/chat/completions", map[string]any{"messages": []map[string]any{{"role": "user", "content": long}}}, 400, "BadRequestError", "maximum context length"},
		{"top_logprobs without logprobs", "/v1/chat/completions", map[string]any{"messages": hello, "top_logprobs": 2}, 400, "BadRequestError", "`logprobs` must be set to true"},
		{"too many logprobs", "/v1/completions", map[string]any{"prompt": "a", "logprobs": 21}, 400, "BadRequestError", "greater than max allowed: 20"},
		{"bad prompt ids", "/v1/completions", map[string]any{"prompt": []int{1, 99999}}, 400, "BadRequestError", "out of vocabulary"},
		{"empty prompt", "/v1/completions", map[string]any{"prompt": []int{}}, 400, "BadRequestError", "prompt"},
		{"empty prompt string", "/v1/completions", map[string]any{"prompt": ""}, 400, "BadRequestError", "The prompt cannot be empty."},
		{"empty prompt in batch", "/v1/completions", map[string]any{"prompt": []string{"a", ""}}, 400, "BadRequestError", "The prompt cannot be empty."},
		{"bad stop", "/v1/completions", map[string]any{"prompt": "a", "stop": 3}, 400, "BadRequestError", "JSON decode error"},
		{"stream_options without stream", "/v1/completions", map[string]any{"prompt": "a", "stream_options": map[string]any{"include_usage": true}}, 400, "BadRequestError", "Stream options can only be defined when `stream=True`."},
		{"prompt_logprobs", "/v1/completions", map[string]any{"prompt": "a", "prompt_logprobs": 1}, 400, "BadRequestError", "prompt_logprobs is not supported"},
		{"beam search", "/v1/chat/completions", map[string]any{"messages": hello, "use_beam_search": true}, 400, "BadRequestError", "beam search"},
		{"echo with logprobs", "/v1/completions", map[string]any{"prompt": "a", "echo": true, "logprobs": 1}, 400, "BadRequestError", "echo"},
		{"bad role", "/v1/chat/completions", map[string]any{"messages": []map[string]any{{"role": 3}}}, 400, "BadRequestError", "role"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, b := post(t, srv.URL+c.path, c.body)
			var r struct {
				Error apiError `json:"error"`
			}
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatalf("%s: %s", err, b)
			}
			if code != c.code || r.Error.Code != c.code || r.Error.Type != c.typ || !strings.Contains(r.Error.Message, c.msg) {
				t.Fatalf("got %d %s", code, b)
			}
		})
	}
}

func TestLoRALoadUnload(t *testing.T) {
	_, srv := newTestEngine(t, DefaultOptions())
	body := func(model string) map[string]any {
		return map[string]any{"model": model, "prompt": "lora test", "temperature": 0, "max_tokens": 16, "return_token_ids": true}
	}
	base := complete(t, srv.URL, body(testModel)).Choices[0].TokenIDs
	dir := t.TempDir()
	load := map[string]any{"lora_name": "pol", "lora_path": dir}
	code, b := post(t, srv.URL+"/v1/load_lora_adapter", load)
	if code != 200 || string(b) != "Success: LoRA adapter 'pol' added successfully." {
		t.Fatalf("load: %d %q", code, b)
	}
	if code, b = post(t, srv.URL+"/v1/load_lora_adapter", load); code != 400 || !strings.Contains(string(b), "has already been loaded") {
		t.Fatalf("reload: %d %s", code, b)
	}
	if code, b = post(t, srv.URL+"/v1/load_lora_adapter", map[string]any{"lora_name": "x", "lora_path": dir + "/missing"}); code != 404 {
		t.Fatalf("missing path: %d %s", code, b)
	}
	if code, b = post(t, srv.URL+"/v1/load_lora_adapter", map[string]any{"lora_name": "x"}); code != 400 {
		t.Fatalf("no path: %d %s", code, b)
	}
	withLoRA := complete(t, srv.URL, body("pol")).Choices[0].TokenIDs
	if equalIDs(base, withLoRA) {
		t.Fatalf("adapter did not change the output")
	}
	models := getJSON(t, srv.URL+"/v1/models")
	data := models["data"].([]any)
	if len(data) != 2 || data[1].(map[string]any)["id"] != "pol" || data[1].(map[string]any)["parent"] != testModel ||
		data[1].(map[string]any)["root"] != dir || data[0].(map[string]any)["max_model_len"] != 1024.0 ||
		data[0].(map[string]any)["owned_by"] != "vllm" {
		t.Fatalf("models: %v", models)
	}
	code, b = post(t, srv.URL+"/v1/unload_lora_adapter", map[string]any{"lora_name": "pol"})
	if code != 200 || string(b) != "Success: LoRA adapter 'pol' removed successfully." {
		t.Fatalf("unload: %d %q", code, b)
	}
	if code, b = post(t, srv.URL+"/v1/unload_lora_adapter", map[string]any{"lora_name": "pol"}); code != 404 {
		t.Fatalf("unload unknown: %d %s", code, b)
	}
	if again := complete(t, srv.URL, body(testModel)).Choices[0].TokenIDs; !equalIDs(base, again) {
		t.Fatalf("unload did not restore base outputs")
	}
	if code, _ = post(t, srv.URL+"/v1/completions", body("pol")); code != 404 {
		t.Fatalf("unloaded adapter still served: %d", code)
	}
}

func getJSON(t *testing.T, url string) map[string]any {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestContinuousBatching(t *testing.T) {
	e, srv := newTestEngine(t, DefaultOptions())
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			complete(t, srv.URL, map[string]any{"prompt": "batch", "max_tokens": 40, "ignore_eos": true})
		}()
	}
	wg.Wait()
	lm := e.model().(*hashLM)
	lm.mu.Lock()
	defer lm.mu.Unlock()
	most := 0
	for _, b := range lm.batches {
		most = max(most, b)
	}
	if most < 2 {
		t.Fatalf("sequences never shared a forward step: %v", lm.batches)
	}
}

func TestClientDisconnectFreesSequence(t *testing.T) {
	e, srv := newTestEngine(t, DefaultOptions())
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/completions",
		strings.NewReader(`{"prompt":"x","max_tokens":1000,"ignore_eos":true,"stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for e.sched.nRunning.Load() != 0 || e.inflight.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("sequence still running after disconnect")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestSleepWakeHealthMetrics(t *testing.T) {
	_, srv := newTestEngine(t, DefaultOptions())
	get := func(path string) (int, string) { return httpGet(t, srv.URL+path) }
	if code, b := get("/health"); code != 200 || b != "" {
		t.Fatalf("health %d %q", code, b)
	}
	if code, b := get("/load"); code != 200 || b != "{\"server_load\":0}\n" {
		t.Fatalf("load %d %q", code, b)
	}
	if code, _ := post(t, srv.URL+"/sleep?level=1", nil); code != 200 {
		t.Fatalf("sleep %d", code)
	}
	if _, b := get("/is_sleeping"); b != "{\"is_sleeping\":true}\n" {
		t.Fatalf("is_sleeping %q", b)
	}
	if code, _ := post(t, srv.URL+"/v1/completions", map[string]any{"prompt": "a"}); code != 503 {
		t.Fatalf("request while sleeping: %d", code)
	}
	if code, _ := post(t, srv.URL+"/wake_up?tags=bogus", nil); code != 400 {
		t.Fatalf("bad wake tag accepted: %d", code)
	}
	if code, _ := post(t, srv.URL+"/reset_prefix_cache", nil); code != 200 {
		t.Fatalf("reset_prefix_cache %d", code)
	}
	if code, _ := post(t, srv.URL+"/wake_up", nil); code != 200 {
		t.Fatalf("wake %d", code)
	}
	complete(t, srv.URL, map[string]any{"prompt": "a", "max_tokens": 3, "ignore_eos": true})
	_, m := get("/metrics")
	for _, want := range []string{"vllm:num_requests_running", "vllm:generation_tokens_total{model_name=\"test-model\"} 3", "vllm:request_success_total{finished_reason=\"length\""} {
		if !strings.Contains(m, want) {
			t.Fatalf("metrics lack %q:\n%s", want, m)
		}
	}
	if code, b := get("/version"); code != 200 || !strings.Contains(b, "version") {
		t.Fatalf("version %d %s", code, b)
	}
	code, b := post(t, srv.URL+"/detokenize", map[string]any{"tokens": []int{40, 41}})
	if code != 200 || !strings.Contains(string(b), "prompt") {
		t.Fatalf("detokenize %d %s", code, b)
	}
}

// TestBOSForTextPrompts: with a tokenizer that defines a BOS token, text
// prompts of completions and /tokenize start with it unless
// add_special_tokens is false; token-id prompts are taken as given.
func TestBOSForTextPrompts(t *testing.T) {
	dir := t.TempDir()
	if err := tokenizer.WriteCharTokenizer(dir, tokenizer.DefaultChars); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "tokenizer_config.json")
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["bos_token"] = "<|endoftext|>"
	raw, _ = json.Marshal(cfg)
	if err := os.WriteFile(cfgPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	bos := tok.Config().BOSID
	if bos < 0 {
		t.Fatal("tokenizer has no BOS")
	}
	e := newEngine(Options{ServedModelName: testModel, ModelDir: dir}, modelParts{lm: &hashLM{vocab: tok.VocabSize()}, tok: tok,
		maxModelLen: 64, eos: tok.Config().EOSIDs, defaults: genDefaults{Temperature: 1, TopP: 1}})
	srv := httptest.NewServer(e.Handler())
	defer func() { srv.Close(); e.Close() }()
	ab := tok.Encode("ab")
	cases := []struct {
		body map[string]any
		want []int32
	}{
		{map[string]any{"prompt": "ab"}, append([]int32{bos}, ab...)},
		{map[string]any{"prompt": "ab", "add_special_tokens": false}, ab},
		{map[string]any{"prompt": ab}, ab},
	}
	for _, c := range cases {
		c.body["max_tokens"], c.body["return_token_ids"] = 1, true
		if got := complete(t, srv.URL, c.body).Choices[0].PromptTokenIDs; !equalIDs(got, c.want) {
			t.Fatalf("%v: prompt ids %v, want %v", c.body, got, c.want)
		}
	}
	_, b := post(t, srv.URL+"/tokenize", map[string]any{"prompt": "ab"})
	var tr tokenizeResponse
	if err := json.Unmarshal(b, &tr); err != nil || !equalIDs(tr.Tokens, append([]int32{bos}, ab...)) {
		t.Fatalf("tokenize %s", b)
	}
}

// With an API key every route but the health probes needs it, the
// administration routes included.
func TestAPIKey(t *testing.T) {
	tok := newTestTokenizer(t)
	e := newEngine(Options{ServedModelName: testModel, APIKey: "sk-engine"}, modelParts{lm: &hashLM{vocab: tok.VocabSize()},
		tok: tok, maxModelLen: 64, defaults: genDefaults{Temperature: 1, TopP: 1}})
	srv := httptest.NewServer(e.Handler())
	defer func() { srv.Close(); e.Close() }()
	do := func(method, path, auth string) int {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(`{"lora_name":"x","lora_path":"/tmp/x"}`))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		method, path, auth string
		want               int
	}{
		{"GET", "/health", "", 200},
		{"GET", "/v1/models", "", 401},
		{"GET", "/v1/models", "Bearer wrong", 401},
		{"GET", "/v1/models", "Bearer sk-engine", 200},
		{"POST", "/v1/load_lora_adapter", "", 401},
		{"POST", "/sleep", "", 401},
		{"POST", "/v1/chat/completions", "sk-engine", 401},
	} {
		if got := do(c.method, c.path, c.auth); got != c.want {
			t.Errorf("%s %s with %q: %d, want %d", c.method, c.path, c.auth, got, c.want)
		}
	}
}
