package engine

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzGenerationConfig loads the tiny real model with an arbitrary
// generation_config.json (both readers: the sampling defaults here and the
// extra eos_token_id of model/tokenizer). New must not panic; it either
// fails naming the file, or gives an engine that serves requests leaving
// the sampling settings to the model (including min_tokens, which masks the
// EOS ids) without a panic or a 5xx, and serves requests that set them.
func FuzzGenerationConfig(f *testing.F) {
	for _, s := range []string{
		// Qwen3-0.6B, Llama-3.1-8B-Instruct, Qwen2.5-7B-Instruct, gpt2 (eos ids outside the tiny vocabulary)
		`{"bos_token_id": 151643, "do_sample": true, "eos_token_id": [151645, 151643], "pad_token_id": 151643, "temperature": 0.6, "top_k": 20, "top_p": 0.95, "transformers_version": "4.51.0"}`,
		`{"bos_token_id": 128000, "do_sample": true, "eos_token_id": [128001, 128008, 128009], "temperature": 0.6, "top_p": 0.9, "transformers_version": "4.42.3"}`,
		`{"bos_token_id": 151643, "pad_token_id": 151643, "do_sample": true, "eos_token_id": [151645, 151643], "repetition_penalty": 1.05, "temperature": 0.7, "top_p": 0.8, "top_k": 20, "transformers_version": "4.37.0"}`,
		`{"_from_model_config": true, "bos_token_id": 50256, "eos_token_id": 50256, "transformers_version": "4.27.0.dev0"}`,
		// the same shapes inside the tiny vocabulary
		`{"eos_token_id": [3, 4], "temperature": 0.6, "top_k": 20, "top_p": 0.95}`,
		`{"eos_token_id": 5, "do_sample": false, "temperature": 0, "top_k": 0}`,
		`{"eos_token_id": null, "temperature": 1.0, "top_p": 1.0, "top_k": -1}`,
		`{"eos_token_id": [], "max_new_tokens": 32, "min_p": 0.1}`,
		`{"eos_token_id": "x"}`,
		`{"eos_token_id": -1}`,
		`{"temperature": -1}`,
		`{"top_p": 0}`,
		`{"top_k": -2}`,
		`{"temperature": "0.7"}`,
		`{"top_k": 1e3}`,
		`{}`,
		`[]`,
		`null`,
		``,
		`{"temperature": 0.7`,
	} {
		f.Add([]byte(s))
	}
	base := tinyModelDir(f)
	entries, err := os.ReadDir(base)
	if err != nil {
		f.Fatal(err)
	}
	root := f.TempDir()
	f.Fuzz(func(t *testing.T, gc []byte) {
		dir, err := os.MkdirTemp(root, "m")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		for _, en := range entries {
			if n := en.Name(); n != "generation_config.json" && n != "adapter" {
				if err := os.Symlink(filepath.Join(base, n), filepath.Join(dir, n)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "generation_config.json"), gc, 0o644); err != nil {
			t.Fatal(err)
		}
		opts := DefaultOptions()
		opts.ModelDir, opts.ServedModelName, opts.Threads = dir, "tiny", 1
		e, err := New(context.Background(), opts)
		if err != nil {
			if !strings.Contains(err.Error(), "generation_config.json") {
				t.Fatalf("load error does not name generation_config.json: %v", err)
			}
			return
		}
		defer e.Close()
		h := e.Handler()
		defaults := []byte(`{"prompt":"hi","max_tokens":2,"min_tokens":1}`)
		if rec := serve(h, http.MethodPost, "/v1/completions", defaults); rec.Code != http.StatusOK {
			checkClientError(t, "/v1/completions", defaults, rec) // vLLM too refuses defaults outside its ranges
		}
		explicit := []byte(`{"prompt":"hi","max_tokens":2,"min_tokens":1,"temperature":0.5,"top_p":1,"top_k":-1,"min_p":0}`)
		if rec := serve(h, http.MethodPost, "/v1/completions", explicit); rec.Code != http.StatusOK {
			t.Fatalf("generation_config.json %q: a request setting every sampling field: %d %s", gc, rec.Code, rec.Body.String())
		}
	})
}
