package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hone-rl/hone/kernels/backends"
)

// TestDemoConfigBackend: hone demo takes its compute backends as hone serve
// does (--config, then HONE_* variables), --backend sets both, and the
// demo's own settings win over the file.
func TestDemoConfigBackend(t *testing.T) {
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "hone.yaml")
	yaml := "engine_embedded:\n  backend: auto\ntrainer:\n  weight_dtype: float32\n  batch_sessions: 3\n" +
		"  checkpoint_dir: /elsewhere\nproxy:\n  listen: 0.0.0.0:8080\n"
	if err := os.WriteFile(cfgFile, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	f := demoFlags{out: dir, tasks: 8, attempts: 4, lr: 1e-3}
	data := filepath.Join(dir, "data")
	for _, tc := range []struct {
		name, config, backend string
		env                   []string
		engine, trainer, err  string
	}{
		{name: "defaults", engine: "cpu", trainer: "cpu"},
		{name: "env", env: []string{"HONE_TRAINER_BACKEND=auto", "HONE_ENGINE_EMBEDDED_BACKEND=cuda"}, engine: "cuda", trainer: "auto"},
		{name: "flag over env", backend: "cuda", env: []string{"HONE_TRAINER_BACKEND=auto"}, engine: "cuda", trainer: "cuda"},
		{name: "file", config: cfgFile, engine: "auto", trainer: "cpu"},
		{name: "env over file", config: cfgFile, env: []string{"HONE_ENGINE_EMBEDDED_BACKEND=cpu"}, engine: "cpu", trainer: "cpu"},
		{name: "bad env", env: []string{"HONE_TRAINER_BACKEND=gpu"}, err: "trainer.backend"},
		{name: "bad flag", backend: "gpu", err: "gpu"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := f
			f.config, f.backend = tc.config, tc.backend
			c, err := demoConfig(f, data, tc.env)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Embedded.Backend != tc.engine || c.Trainer.Backend != tc.trainer {
				t.Errorf("engine %s trainer %s, want %s %s", c.Embedded.Backend, c.Trainer.Backend, tc.engine, tc.trainer)
			}
			// The demo's own settings win over the file.
			if c.Proxy.Listen != "127.0.0.1:0" || c.Trainer.BatchSessions != 32 || !c.Trainer.Enabled ||
				c.Trainer.CheckpointDir != filepath.Join(data, "checkpoints") {
				t.Errorf("demo settings lost: listen %s batch %d enabled %v checkpoints %s", c.Proxy.Listen,
					c.Trainer.BatchSessions, c.Trainer.Enabled, c.Trainer.CheckpointDir)
			}
			if tc.config != "" && c.Trainer.WeightDType != "float32" {
				t.Errorf("weight_dtype %s, want the file's float32", c.Trainer.WeightDType)
			}
		})
	}
}

// TestTrainBackend: hone train takes trainer.backend from --config and
// HONE_TRAINER_BACKEND, and --backend over both; cuda without a GPU build
// is refused before anything is loaded, as hone serve --train refuses it.
func TestTrainBackend(t *testing.T) {
	if backends.CUDABuilt() {
		t.Skip("describes a build without -tags cuda")
	}
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "hone.yaml")
	if err := os.WriteFile(cfgFile, []byte("trainer:\n  backend: cuda\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"--from", "http://127.0.0.1:9", "--model", filepath.Join(dir, "no-model")}
	refused := "trainer.backend cuda: refusing to train"
	for _, tc := range []struct {
		name string
		args []string
		env  string
		want string
	}{
		{name: "env", env: "cuda", want: refused},
		{name: "flag", args: []string{"--backend", "cuda"}, want: refused},
		{name: "file", args: []string{"--config", cfgFile}, want: refused},
		{name: "flag over file", args: []string{"--config", cfgFile, "--backend", "cpu"}, want: "no-model"},
		{name: "bad env", env: "gpu", want: `trainer.backend "gpu"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("HONE_TRAINER_BACKEND", tc.env)
			}
			err := runTrain(context.Background(), append(append([]string(nil), base...), tc.args...))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}
