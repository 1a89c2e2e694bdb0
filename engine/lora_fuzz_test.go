package engine

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// serve sends one request to h and returns the recorded answer.
func serve(h http.Handler, method, path string, body []byte) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, bytes.NewReader(body)))
	return rec
}

// checkClientError fails unless rec is a vLLM-style JSON client error:
// a 4xx whose body is {"error":{"message","type","param","code"}} with the
// status as code. A 5xx for a request body is a bug in the engine.
func checkClientError(t *testing.T, path string, body []byte, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Code < 400 || rec.Code > 499 {
		t.Fatalf("%s %q: status %d: %s", path, body, rec.Code, rec.Body.String())
	}
	var r struct {
		Error *apiError `json:"error"`
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %q: %d with Content-Type %q: %s", path, body, rec.Code, ct, rec.Body.String())
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || r.Error == nil || r.Error.Message == "" ||
		r.Error.Type == "" || r.Error.Code != rec.Code {
		t.Fatalf("%s %q: %d with a bad error body %q", path, body, rec.Code, rec.Body.String())
	}
}

// checkServing fails unless the engine still answers: the model list and a
// one-token completion of each model named (the base model when none).
func checkServing(t *testing.T, h http.Handler, models ...string) {
	t.Helper()
	if rec := serve(h, http.MethodGet, "/v1/models", nil); rec.Code != http.StatusOK {
		t.Fatalf("/v1/models: %d %s", rec.Code, rec.Body.String())
	}
	if len(models) == 0 {
		models = []string{""}
	}
	for _, m := range models {
		body, _ := json.Marshal(map[string]any{"model": m, "prompt": "hi", "max_tokens": 1, "temperature": 0})
		if rec := serve(h, http.MethodPost, "/v1/completions", body); rec.Code != http.StatusOK {
			t.Fatalf("engine stopped serving model %q: %d %s", m, rec.Code, rec.Body.String())
		}
	}
}

// loraFixtures writes adapter folders that are wrong in the ways a PEFT
// folder can be and returns the placeholders seeds use for them.
func loraFixtures(t testing.TB) map[string]string {
	good := filepath.Join(tinyModelDir(t), "adapter")
	root := t.TempDir()
	dirs := map[string]string{"$GOOD": good}
	write := func(name string, files map[string][]byte) {
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f, b := range files {
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		dirs["$"+strings.ToUpper(name)] = dir
	}
	cfg, err := os.ReadFile(filepath.Join(good, "adapter_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	tensors, err := os.ReadFile(filepath.Join(good, "adapter_model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	write("empty", nil) // a folder with no adapter
	write("badjson", map[string][]byte{"adapter_config.json": []byte("{"), "adapter_model.safetensors": tensors})
	write("notensors", map[string][]byte{"adapter_config.json": cfg}) // config without weights
	write("badtensors", map[string][]byte{"adapter_config.json": cfg, "adapter_model.safetensors": []byte("\x08\x00\x00\x00\x00\x00\x00\x00{}      ")})
	write("wrongrank", map[string][]byte{"adapter_config.json": bytes.Replace(cfg, []byte(`"r": 4`), []byte(`"r": 3`), 1),
		"adapter_model.safetensors": tensors})
	write("ia3", map[string][]byte{"adapter_config.json": []byte(`{"peft_type":"IA3","r":4,"lora_alpha":8,"target_modules":["q_proj"]}`),
		"adapter_model.safetensors": tensors})
	dirs["$FILE"] = filepath.Join(good, "adapter_config.json") // a file, not a folder
	return dirs
}

// FuzzLoRAAdapter posts a /v1/load_lora_adapter body, then an
// /v1/unload_lora_adapter body, to the tiny real model (so adapter folders
// are parsed for real). "$GOOD", "$EMPTY", … in a body stand for the
// fixture folders. Neither may panic or answer 5xx: success or a vLLM JSON
// 4xx; a loaded adapter serves completions; the engine keeps serving.
func FuzzLoRAAdapter(f *testing.F) {
	for _, s := range [][2]string{
		{`{"lora_name":"pol","lora_path":"$GOOD"}`, `{"lora_name":"pol"}`},
		{`{"lora_name":"pol","lora_path":"$GOOD","load_inplace":true}`, `{"lora_name":"other"}`},
		{`{"lora_name":"tiny","lora_path":"$GOOD"}`, `{"lora_name":"tiny"}`},
		{`{"lora_name":"x","lora_path":"$EMPTY"}`, `{"lora_name":"x","lora_int_id":1}`},
		{`{"lora_name":"x","lora_path":"$BADJSON"}`, `{}`},
		{`{"lora_name":"x","lora_path":"$NOTENSORS"}`, `{"lora_name":""}`},
		{`{"lora_name":"x","lora_path":"$BADTENSORS"}`, `{"lora_name":null}`},
		{`{"lora_name":"x","lora_path":"$WRONGRANK"}`, `[]`},
		{`{"lora_name":"x","lora_path":"$IA3"}`, `{"lora_name":1}`},
		{`{"lora_name":"x","lora_path":"$FILE"}`, ``},
		{`{"lora_name":"x","lora_path":"$GOOD/missing"}`, `{"lora_name":"x"`},
		{`{"lora_name":"x"}`, `null`},
		{`{"lora_path":"$GOOD"}`, `{"lora_name":"\u00e9"}`},
		{`{"lora_name":"x","lora_path":"$GOOD","load_inplace":"yes"}`, `{"lora_name":"x"}`},
		{``, `{"lora_name":"x"} trailing`},
	} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	dirs := loraFixtures(f)
	e, _ := newTinyEngine(f)
	h := e.Handler()
	f.Fuzz(func(t *testing.T, load, unload []byte) {
		defer func() { // each input starts from an engine without adapters
			for _, a := range e.adapters.list() {
				e.adapters.remove(a.name)
			}
		}()
		for k, v := range dirs {
			load = bytes.ReplaceAll(load, []byte(k), []byte(v))
			unload = bytes.ReplaceAll(unload, []byte(k), []byte(v))
		}
		rec := serve(h, http.MethodPost, "/v1/load_lora_adapter", load)
		if rec.Code == http.StatusOK {
			var req loraRequest
			if err := json.NewDecoder(bytes.NewReader(load)).Decode(&req); err != nil {
				t.Fatalf("load %q answered 200 (%s) but does not decode: %v", load, rec.Body.String(), err)
			}
			if !e.adapters.has(req.LoraName) {
				t.Fatalf("load %q answered 200 but %q is not loaded", load, req.LoraName)
			}
			checkServing(t, h, req.LoraName)
		} else {
			checkClientError(t, "/v1/load_lora_adapter", load, rec)
		}
		if rec = serve(h, http.MethodPost, "/v1/unload_lora_adapter", unload); rec.Code != http.StatusOK {
			checkClientError(t, "/v1/unload_lora_adapter", unload, rec)
		}
		checkServing(t, h)
	})
}
