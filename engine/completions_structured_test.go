package engine

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCompletionsStructuredOutputs: /v1/completions enforces vLLM's
// structured_outputs field on a token-id prompt (what hone's continuity
// mode sends for forced tool calls): {"json": schema}, given as an object
// or as a string, validates for every sample of the random tiny model;
// json_object gives objects; unsupported kinds and two kinds at once are
// refused.
func TestCompletionsStructuredOutputs(t *testing.T) {
	srv := newGuideTinyEngine(t, true)
	prompt := []int{}
	for _, r := range "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n" {
		prompt = append(prompt, int(r)) // any ids in the vocabulary will do
	}
	prompt = prompt[:8]
	for i, so := range []any{map[string]any{"json": json.RawMessage(guideSchema)}, map[string]any{"json": guideSchema}} {
		valid := 0
		for seed := range 5 {
			req := map[string]any{"model": "tiny", "prompt": prompt, "structured_outputs": so, "temperature": 1, "seed": seed,
				"n": 4, "max_tokens": 400}
			code, body := post(t, srv.URL+"/v1/completions", req)
			if code != 200 {
				t.Fatalf("%d: %s", code, body)
			}
			var resp struct {
				Choices []struct {
					Text         string `json:"text"`
					FinishReason string `json:"finish_reason"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(body, &resp); err != nil {
				t.Fatal(err)
			}
			for j, c := range resp.Choices {
				if c.FinishReason != "stop" {
					t.Errorf("form %d seed %d choice %d: finish %q", i, seed, j, c.FinishReason)
					continue
				}
				if err := checkSchema(guideSchema, c.Text); err != nil {
					t.Errorf("form %d seed %d choice %d: %v: %q", i, seed, j, err, c.Text)
					continue
				}
				valid++
			}
		}
		t.Logf("form %d: %d/20 valid", i, valid)
	}

	req := map[string]any{"model": "tiny", "prompt": prompt, "structured_outputs": map[string]any{"json_object": true},
		"temperature": 1, "seed": 1, "max_tokens": 300}
	code, body := post(t, srv.URL+"/v1/completions", req)
	var one struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
	}
	if code != 200 || json.Unmarshal(body, &one) != nil || len(one.Choices) != 1 {
		t.Fatalf("json_object: %d %s", code, body)
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(one.Choices[0].Text), &obj); err != nil {
		t.Errorf("json_object: %v: %q", err, one.Choices[0].Text)
	}

	for name, so := range map[string]any{
		"regex":      map[string]any{"regex": "a+"},
		"two kinds":  map[string]any{"json": map[string]any{"type": "integer"}, "json_object": true},
		"not object": "json",
		"bad schema": map[string]any{"json": map[string]any{"type": "strin"}},
	} {
		req := map[string]any{"model": "tiny", "prompt": prompt, "structured_outputs": so, "max_tokens": 5}
		code, body := post(t, srv.URL+"/v1/completions", req)
		if code != 400 || !strings.Contains(string(body), "structured_outputs") {
			t.Errorf("%s: %d %s", name, code, body)
		}
	}
}
