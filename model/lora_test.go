package model

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadAdapterErrors(t *testing.T) {
	m := newTestModel(t, ArchQwen3)
	good := filepath.Join(t.TempDir(), "good")
	a, err := NewAdapter(m, "a", AdapterConfig{Rank: 2, Alpha: 4, Targets: []Module{ModQ}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Save(good); err != nil {
		t.Fatal(err)
	}
	// A config claiming rank 3 beside rank-2 tensors.
	wrongRank := filepath.Join(t.TempDir(), "rank")
	if err := (&Adapter{Rank: 3, Alpha: 4, Scale: 1, Targets: []Module{ModQ}, Layers: a.Layers, m: m}).Save(wrongRank); err != nil {
		t.Fatal(err)
	}
	rank3, _ := os.ReadFile(filepath.Join(wrongRank, "adapter_config.json"))
	for _, tc := range []struct {
		name, config, want string
		tensorsFrom        string
	}{
		{"no folder", "", "no such file", ""},
		{"bad json", "{", "adapter_config.json", good},
		{"peft type", `{"peft_type":"IA3","r":2,"lora_alpha":4,"target_modules":["q_proj"]}`, "peft_type", good},
		{"unknown module", `{"r":2,"lora_alpha":4,"target_modules":["lm_head"]}`, "lm_head", good},
		{"zero rank", `{"r":0,"lora_alpha":4,"target_modules":["q_proj"]}`, "rank", good},
		{"rank mismatch", string(rank3), "shape", good},
		{"dora", `{"r":2,"lora_alpha":4,"target_modules":["q_proj"],"use_dora":true}`, "use_dora", good},
		{"alpha pattern", `{"r":2,"lora_alpha":4,"target_modules":["q_proj"],"alpha_pattern":{"q_proj":8}}`, "alpha_pattern", good},
		{"path of no projection", `{"r":2,"lora_alpha":4,"target_modules":["model.layers.0.mlp.q_proj"]}`, "model.layers.0.mlp.q_proj", good},
		{"bad layer", `{"r":2,"lora_alpha":4,"target_modules":["layers.x.self_attn.q_proj"]}`, "layers.x", good},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "x")
			if tc.tensorsFrom != "" {
				os.MkdirAll(dir, 0o755)
				raw, _ := os.ReadFile(filepath.Join(tc.tensorsFrom, "adapter_model.safetensors"))
				os.WriteFile(filepath.Join(dir, "adapter_model.safetensors"), raw, 0o644)
				os.WriteFile(filepath.Join(dir, "adapter_config.json"), []byte(tc.config), 0o644)
			}
			_, err := LoadAdapter(dir, m)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	if b, err := LoadAdapter(good, m); err != nil || b.Name != "good" || b.Layers[1][ModQ] == nil || b.Layers[1][ModK] != nil {
		t.Fatalf("good adapter: %v", err)
	}
	// PEFT's save_pretrained lists module paths when it expanded
	// "all-linear" on a model with fewer than 20 projections.
	paths := filepath.Join(t.TempDir(), "paths")
	os.MkdirAll(paths, 0o755)
	raw, _ := os.ReadFile(filepath.Join(good, "adapter_model.safetensors"))
	os.WriteFile(filepath.Join(paths, "adapter_model.safetensors"), raw, 0o644)
	os.WriteFile(filepath.Join(paths, "adapter_config.json"),
		[]byte(`{"peft_type":"LORA","r":2,"lora_alpha":4,"target_modules":["model.layers.1.self_attn.q_proj","model.layers.0.self_attn.q_proj"]}`), 0o644)
	if b, err := LoadAdapter(paths, m); err != nil || len(b.Targets) != 1 || b.Targets[0] != ModQ || b.Layers[1][ModQ] == nil {
		t.Fatalf("adapter with module paths: %v", err)
	}
}

func FuzzParseAdapterConfig(f *testing.F) {
	f.Add([]byte(`{"peft_type":"LORA","r":8,"lora_alpha":16,"target_modules":["q_proj","v_proj"]}`))
	f.Add([]byte(`{"r":8,"lora_alpha":16,"target_modules":"all-linear","use_rslora":true}`))
	f.Add([]byte(`{"target_modules":null}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, targets, err := parseAdapterConfig(raw)
		if err != nil {
			return
		}
		for _, mod := range targets {
			if mod < 0 || mod >= NumModules {
				t.Fatalf("module %d from %s", mod, raw)
			}
		}
	})
}
