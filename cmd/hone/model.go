package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/hone-rl/hone/kernels/cpu"
	"github.com/hone-rl/hone/model"
	"github.com/hone-rl/hone/model/tokenizer"
)

func init() {
	register("model", "model tools: init (write a randomly initialised model folder)", runModel)
}

func runModel(ctx context.Context, args []string) error {
	if err := subcommandHelp(args, "model init --out DIR [flags]",
		"Model tools. 'model init' writes a randomly initialised model folder ('hone model init --help')."); err != nil {
		return err
	}
	if args[0] != "init" {
		return usagef("unknown model command %q: want init", args[0])
	}
	return modelInit(ctx, args[1:])
}

// modelInit writes config.json, model.safetensors, tokenizer.json and
// tokenizer_config.json. tiny and small take their vocabulary size from the
// character tokenizer; qwen3-0.6b-shape keeps Qwen3's 151936 rows.
func modelInit(_ context.Context, args []string) error {
	fs := newFlags("model init", "model init --out DIR [flags]",
		"Writes config.json, model.safetensors and tokenizer files of a randomly initialised Qwen3-shaped model.")
	arch := fs.String("arch", "qwen3", "architecture (only qwen3)")
	preset := fs.String("preset", "tiny", "shape: "+strings.Join(model.PresetNames(), ", "))
	out := fs.String("out", "", "output folder (required)")
	seed := fs.Int64("seed", 1, "random seed for the weights")
	tokDir := fs.String("tokenizer", "", "copy tokenizer.json and tokenizer_config.json from this folder instead of writing a character tokenizer")
	if err := fs.parse(args); err != nil {
		return err
	}
	if *out == "" {
		return usagef("model init: --out is required")
	}
	if *arch != "qwen3" {
		return fmt.Errorf("model init: --arch %q is not supported (only qwen3)", *arch)
	}
	cfg, err := model.Preset(*preset)
	if err != nil {
		return fmt.Errorf("model init: %w", err)
	}
	if err := writeTokenizer(*out, *tokDir); err != nil {
		return fmt.Errorf("model init: %w", err)
	}
	tok, err := tokenizer.Load(*out)
	if err != nil {
		return fmt.Errorf("model init: %w", err)
	}
	if err := fitVocab(cfg, tok, *preset); err != nil {
		return fmt.Errorf("model init: %w", err)
	}
	m, err := model.New(cfg, cpu.New(0), *seed)
	if err != nil {
		return fmt.Errorf("model init: %w", err)
	}
	if err := m.Save(*out); err != nil {
		return fmt.Errorf("model init: %w", err)
	}
	slog.Info("model written", "dir", *out, "preset", *preset, "params", cfg.NumParams(), "vocab", cfg.VocabSize)
	return nil
}

// fitVocab sizes the embedding for the tokenizer and points BOS/EOS at its
// special tokens.
func fitVocab(cfg *model.Config, tok tokenizer.Tokenizer, preset string) error {
	n := tok.VocabSize()
	switch {
	case preset == "tiny" || preset == "small":
		cfg.VocabSize = n
	case n > cfg.VocabSize:
		return fmt.Errorf("tokenizer has %d ids, more than the preset's %d", n, cfg.VocabSize)
	}
	cfg.BOSTokenID = nil
	if id, ok := tok.TokenID("<|endoftext|>"); ok {
		cfg.BOSTokenID = &id
	}
	cfg.EOSTokenIDs = nil
	if id, ok := tok.TokenID("<|im_end|>"); ok {
		cfg.EOSTokenIDs = []int32{id}
	}
	return nil
}

func writeTokenizer(out, from string) error {
	if from == "" {
		return tokenizer.WriteCharTokenizer(out, tokenizer.DefaultChars)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		raw, err := os.ReadFile(filepath.Join(from, name))
		if err != nil {
			return fmt.Errorf("copy tokenizer: %w", err)
		}
		if err := os.WriteFile(filepath.Join(out, name), raw, 0o644); err != nil {
			return fmt.Errorf("copy tokenizer: %w", err)
		}
	}
	return nil
}
