package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrainerBackend: trainer.backend from the defaults, the YAML file and
// HONE_TRAINER_BACKEND (the environment wins), validated by Finish with the
// trainer on or off.
func TestTrainerBackend(t *testing.T) {
	for _, tc := range []struct {
		name    string
		yaml    string
		env     []string
		want    string // the backend after Finish
		wantErr string // in Finish's (or Load's) error; "" = none
	}{
		{name: "default is cpu", want: "cpu"},
		{name: "yaml cuda", yaml: "trainer:\n  backend: cuda\n", want: "cuda"},
		{name: "yaml auto, trainer on", yaml: "trainer:\n  enabled: true\n  backend: auto\n", want: "auto"},
		{name: "env", env: []string{"HONE_TRAINER_BACKEND=cuda"}, want: "cuda"},
		{name: "env over yaml", yaml: "trainer:\n  backend: cuda\n", env: []string{"HONE_TRAINER_BACKEND=cpu"}, want: "cpu"},
		{name: "unknown in yaml", yaml: "trainer:\n  backend: gpu\n",
			wantErr: `trainer.backend: "gpu" is not one of cpu, cuda, auto`},
		{name: "unknown in env, trainer off", env: []string{"HONE_TRAINER_BACKEND=CUDA"},
			wantErr: `trainer.backend: "CUDA" is not one of cpu, cuda, auto`},
		{name: "emulated is for hone selftest only", env: []string{"HONE_TRAINER_BACKEND=emulated"},
			wantErr: `"emulated" is not one of cpu, cuda, auto`},
		{name: "empty", env: []string{"HONE_TRAINER_BACKEND="}, wantErr: `trainer.backend: "" is not one of`},
		{name: "misspelt variable", env: []string{"HONE_TRAINER_BACKND=cuda"}, wantErr: "did you mean HONE_TRAINER_BACKEND?"},
		{name: "engine backend from env", env: []string{"HONE_ENGINE_EMBEDDED_BACKEND=cuda"}, want: "cpu"},
		{name: "engine backend unknown", yaml: "engine_embedded:\n  backend: gpu\n",
			wantErr: `engine_embedded.backend: "gpu" is not one of cpu, cuda, auto`},
		{name: "engine weight dtype unknown", env: []string{"HONE_ENGINE_EMBEDDED_WEIGHT_DTYPE=bf16"},
			wantErr: `engine_embedded.weight_dtype: "bf16" is not one of auto, float32, bfloat16`},
		{name: "engine autocast from env", env: []string{"HONE_ENGINE_EMBEDDED_AUTOCAST=off"}, want: "cpu"},
		{name: "engine autocast unknown", yaml: "engine_embedded:\n  autocast: yes\n",
			wantErr: `engine_embedded.autocast: "yes" is not one of auto, on, off`},
		{name: "trainer autocast unknown", yaml: "trainer:\n  enabled: true\n  autocast: bf16\n",
			wantErr: `trainer.autocast: "bf16", want auto, on or off (set by `},
		{name: "trainer autocast on", yaml: "trainer:\n  enabled: true\n  autocast: on\n", want: "cpu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := ""
			if tc.yaml != "" {
				path = filepath.Join(t.TempDir(), "hone.yaml")
				if err := os.WriteFile(path, []byte(tc.yaml), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			c, err := Load(path, tc.env)
			if err == nil {
				err = c.Finish()
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Trainer.Backend != tc.want {
				t.Fatalf("backend %q, want %q", c.Trainer.Backend, tc.want)
			}
		})
	}
}
