package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hone-rl/hone/kernels/cpu"
	"github.com/hone-rl/hone/model"
)

// TestTrainToken: hone train sends the control-plane token from --token, else
// from HONE_PROXY_CONTROL_TOKEN, the variable hone serve reads for
// proxy.control_token.
func TestTrainToken(t *testing.T) {
	cfg := &model.Config{Architecture: model.ArchQwen3, VocabSize: 32, HiddenSize: 32, IntermediateSize: 64, NumLayers: 1,
		NumHeads: 2, NumKVHeads: 1, HeadDim: 16, MaxPositions: 64, RMSNormEps: 1e-6, RopeTheta: 10000, TieWordEmbeddings: true, QKNorm: true}
	m, err := model.New(cfg, cpu.New(1), 1)
	if err != nil {
		t.Fatal(err)
	}
	modelDir := filepath.Join(t.TempDir(), "base")
	if err := m.Save(modelDir); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, env, flag, want string
	}{
		{"environment", "from-env", "", "Bearer from-env"},
		{"flag wins", "from-env", "from-flag", "Bearer from-flag"},
		{"flag alone", "", "from-flag", "Bearer from-flag"},
		{"none", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tokenEnv, tc.env)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var (
				mu   sync.Mutex
				got  string
				seen bool
			)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				if r.URL.Path == "/v1/experiences" && !seen {
					got, seen = r.Header.Get("Authorization"), true
					cancel()
				}
			}))
			defer srv.Close()
			args := []string{"--from", srv.URL, "--model", modelDir, "--checkpoints", filepath.Join(t.TempDir(), "ck")}
			if tc.flag != "" {
				args = append(args, "--token", tc.flag)
			}
			if err := runTrain(ctx, args); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if !seen || got != tc.want {
				t.Fatalf("Authorization %q (request seen %v), want %q", got, seen, tc.want)
			}
		})
	}
}
