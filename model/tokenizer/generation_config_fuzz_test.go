package tokenizer

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzGenerationEOS feeds addGenerationEOS an arbitrary
// generation_config.json. It must not panic; it either fails naming the
// file, or appends exactly the integers of eos_token_id (one, or a list)
// that the tokenizer config does not already list, in order; reading the
// file again adds nothing.
func FuzzGenerationEOS(f *testing.F) {
	for _, s := range []string{
		// Qwen3-0.6B, Llama-3.1-8B-Instruct, gpt2
		`{"bos_token_id": 151643, "do_sample": true, "eos_token_id": [151645, 151643], "pad_token_id": 151643, "temperature": 0.6, "top_k": 20, "top_p": 0.95, "transformers_version": "4.51.0"}`,
		`{"bos_token_id": 128000, "do_sample": true, "eos_token_id": [128001, 128008, 128009], "temperature": 0.6, "top_p": 0.9, "transformers_version": "4.42.3"}`,
		`{"_from_model_config": true, "bos_token_id": 50256, "eos_token_id": 50256, "transformers_version": "4.27.0.dev0"}`,
		`{"eos_token_id": null}`, `{"eos_token_id": []}`, `{"eos_token_id": [7, 7, 3]}`, `{"eos_token_id": [1, null]}`,
		`{"eos_token_id": "2"}`, `{"eos_token_id": 1.5}`, `{"eos_token_id": 2147483648}`, `{"eos_token_id": -1}`,
		`{"eos_token_id": {"a": 1}}`, `{}`, `[]`, `null`, ``, `{"eos_token_id": [1,`,
	} {
		f.Add([]byte(s))
	}
	path := filepath.Join(f.TempDir(), "generation_config.json")
	f.Fuzz(func(t *testing.T, raw []byte) {
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		c := Config{EOSIDs: []int32{7}} // tokenizer_config's eos_token
		err := c.addGenerationEOS(path)
		want, ok := eosIDs(raw)
		if err != nil {
			if !strings.Contains(err.Error(), "generation_config.json") {
				t.Fatalf("%q: error does not name the file: %v", raw, err)
			}
			if ok {
				t.Fatalf("%q: refused (%v), want eos ids %v", raw, err, want)
			}
			return
		}
		if !ok {
			t.Fatalf("%q: accepted with eos ids %v, want an error", raw, c.EOSIDs)
		}
		exp := []int32{7}
		for _, id := range want {
			if !slices.Contains(exp, id) {
				exp = append(exp, id)
			}
		}
		if !slices.Equal(c.EOSIDs, exp) {
			t.Fatalf("%q: eos ids %v, want %v", raw, c.EOSIDs, exp)
		}
		if err := c.addGenerationEOS(path); err != nil || !slices.Equal(c.EOSIDs, exp) {
			t.Fatalf("%q: read again: %v %v, want %v", raw, err, c.EOSIDs, exp)
		}
	})
}

// eosIDs is the reference reading of eos_token_id: absent or null is none,
// else an int32 or a list of int32; anything else is an error (ok false).
func eosIDs(raw []byte) (ids []int32, ok bool) {
	var g struct {
		EOS json.RawMessage `json:"eos_token_id"`
	}
	if json.Unmarshal(raw, &g) != nil {
		return nil, false
	}
	if len(g.EOS) == 0 || string(g.EOS) == "null" {
		return nil, true
	}
	dec := json.NewDecoder(bytes.NewReader(g.EOS))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil, false
	}
	one := func(x any) (int32, bool) {
		n, isNum := x.(json.Number)
		if !isNum {
			return 0, false
		}
		i, err := strconv.ParseInt(string(n), 10, 32)
		return int32(i), err == nil
	}
	if id, isID := one(v); isID {
		return []int32{id}, true
	}
	list, isList := v.([]any)
	if !isList {
		return nil, false
	}
	for _, x := range list {
		id, isID := one(x)
		if !isID {
			return nil, false
		}
		ids = append(ids, id)
	}
	return ids, true
}
