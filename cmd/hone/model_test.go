package main

import (
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/hone-rl/hone/kernels/cpu"
	"github.com/hone-rl/hone/model"
	"github.com/hone-rl/hone/model/tokenizer"
)

func TestModelInitTiny(t *testing.T) {
	dir := t.TempDir()
	if err := modelInit(context.Background(), []string{"--preset", "tiny", "--out", dir}); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dir, cpu.New(1))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := m.Config()
	if cfg.VocabSize != tok.VocabSize() || cfg.VocabSize != model.TinyVocab {
		t.Fatalf("vocab %d, tokenizer %d, TinyVocab %d", cfg.VocabSize, tok.VocabSize(), model.TinyVocab)
	}
	if eos, _ := tok.TokenID("<|im_end|>"); len(cfg.EOSTokenIDs) != 1 || cfg.EOSTokenIDs[0] != eos {
		t.Fatalf("eos %v", cfg.EOSTokenIDs)
	}
	if n := cfg.NumParams(); n > 5e6 {
		t.Fatalf("tiny has %d parameters", n)
	}
	c := m.NewCache()
	logits, err := m.Forward(context.Background(), []model.Step{{Tokens: tok.Encode("<|im_start|>user\nhi<|im_end|>"), Cache: c}})
	if err != nil || len(logits[0]) != cfg.VocabSize {
		t.Fatalf("forward: %v", err)
	}
}

func TestModelInitRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--preset", "tiny"},
		{"--preset", "nope", "--out", t.TempDir()},
		{"--arch", "gpt2", "--out", t.TempDir()},
	} {
		if err := modelInit(context.Background(), args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// TestModelInitWithQwen3Tokenizer copies Qwen3's real tokenizer files (the
// tokenizer package's testdata, gzipped there) and sizes the embedding from
// them.
func TestModelInitWithQwen3Tokenizer(t *testing.T) {
	src := "../../model/tokenizer/testdata/qwen3"
	tokDir := t.TempDir()
	gz, err := os.Open(filepath.Join(src, "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer gz.Close()
	zr, err := gzip.NewReader(gz)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	cfgRaw, err := os.ReadFile(filepath.Join(src, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if os.WriteFile(filepath.Join(tokDir, "tokenizer.json"), raw, 0o644) != nil ||
		os.WriteFile(filepath.Join(tokDir, "tokenizer_config.json"), cfgRaw, 0o644) != nil {
		t.Fatal("write tokenizer files")
	}
	dir := t.TempDir()
	args := []string{"--preset", "tiny", "--out", dir, "--tokenizer", tokDir}
	if err := modelInit(context.Background(), args); err != nil {
		t.Fatal(err)
	}
	cfg, err := model.LoadConfig(dir + "/config.json")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.VocabSize != 151669 || len(cfg.EOSTokenIDs) != 1 || cfg.EOSTokenIDs[0] != 151645 {
		t.Fatalf("vocab %d eos %v", cfg.VocabSize, cfg.EOSTokenIDs)
	}
}
