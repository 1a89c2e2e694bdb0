package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	honeconfig "github.com/hone-rl/hone/config"
	"github.com/hone-rl/hone/trainer"
	"github.com/hone-rl/hone/trainer/curves"
	"github.com/hone-rl/hone/trainer/gpu"
	"github.com/hone-rl/hone/trainer/publish"
)

func init() {
	register("train", "train LoRA policies on experiences pulled from proxies; 'train plot' draws curves", runTrain)
}

// listFlag is a repeatable (and comma-separated) string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// tokenEnv is the control-plane token's variable, the one hone serve reads
// for proxy.control_token, so one export serves both ends.
const tokenEnv = "HONE_PROXY_CONTROL_TOKEN"

func runTrain(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "plot" {
		return trainPlot(args[1:])
	}
	opts := trainer.DefaultOptions()
	var from, engines listFlag
	fs := newFlags("train", "train --from URL [--from URL...] --model DIR [--engine URL...] [flags]\n"+
		"       hone train plot --log FILE [--out curves.png]",
		"Trains LoRA policies (or full weights) on the experiences hone serve captured, pulled from its\n"+
			"control plane, publishes each version to the engines and swaps the policy alias.\n"+
			"'hone train plot' draws the step log's curves ('hone train plot --help').")
	fs.Var(&from, "from", "proxy control-plane URL to pull experiences from (repeatable)")
	token := fs.String("token", "", "control-plane bearer token (default: proxy.control_token of --config, or $"+tokenEnv+", as for hone serve)")
	modelDir := fs.String("model", "", "base model folder (config.json, model.safetensors)")
	config := fs.String("config", "", "YAML config file (hone serve's): its trainer: section sets the options; "+
		"the trainer keys' HONE_ variables (HONE_TRAINER_BACKEND, ...) override it, as for hone serve, and flags override both")
	backend := fs.String("backend", "", "compute backend: cpu, cuda (the first GPU; hone built with -tags cuda) or auto "+
		"(default: trainer.backend, HONE_TRAINER_BACKEND, else cpu)")
	fs.Var(&engines, "engine", "engine base URL to publish to, URL or URL#sglang (repeatable; none: write only)")
	var admins listFlag
	fs.Var(&admins, "admin", "proxy control plane whose alias is swapped (repeatable; default: every --from)")
	steps := fs.Int("steps", 0, "stop after this many new versions (0: run until interrupted)")
	fs.StringVar(&opts.Name, "name", opts.Name, "policy alias (the model name agents use)")
	fs.StringVar(&opts.CheckpointDir, "checkpoints", "checkpoints", "checkpoint folder")
	fs.BoolVar(&opts.Resume, "resume", false, "continue from the latest checkpoint")
	fs.StringVar(&opts.Mode, "mode", opts.Mode, "lora (train an adapter) or full (every weight; small models)")
	fs.StringVar(&opts.ServedModel, "served-model", "", "the engines' base model name (full mode)")
	fs.IntVar(&opts.BatchSessions, "train-batch", opts.BatchSessions, "ready sessions per step")
	fs.StringVar(&opts.MetricsLog, "metrics-log", "", "JSONL step log")
	if err := fs.parse(args); err != nil {
		return err
	}
	// defaults < --config FILE < HONE_* variables < flags, as for hone serve.
	c, err := honeconfig.Load(*config, os.Environ())
	if err != nil {
		return err
	}
	opts = c.Trainer
	if opts.CheckpointDir == "" {
		opts.CheckpointDir = "checkpoints"
	}
	from, engines, admins = nil, nil, nil
	_ = fs.Parse(args) // flags win over the file and the environment
	if *backend != "" {
		opts.Backend = *backend
	}
	if *token == "" { // proxy.control_token of --config, or $HONE_PROXY_CONTROL_TOKEN
		*token = c.Proxy.ControlToken
	}
	if len(from) == 0 || *modelDir == "" {
		return usagef("--from and --model are required (usage: hone %s)", strings.Split(fs.synopsis, "\n")[0])
	}
	if len(admins) == 0 {
		admins = from
	}
	t, err := buildTrainer(ctx, opts, from, engines, admins, *token, *modelDir)
	if err != nil {
		return err
	}
	return runSteps(ctx, t, *steps, opts.PollInterval)
}

func buildTrainer(ctx context.Context, opts trainer.Options, from, engines, admins []string, token, modelDir string) (*trainer.Trainer, error) {
	// trainer.backend from --config, as for hone serve --train (the
	// backend lives as long as the process).
	be, err := openTrainerBackend(ctx, opts.Backend, slog.Default())
	if err != nil {
		return nil, err
	}
	if err := fitMicroBatches(&opts, be, modelDir, slog.Default()); err != nil {
		be.Close()
		return nil, err
	}
	pol, err := trainer.LoadPolicy(modelDir, be.Backend, opts)
	if err != nil {
		return nil, err
	}
	d := trainer.Deps{Policy: pol, BaseModel: filepath.Base(filepath.Clean(modelDir)), ModelDir: modelDir, GPU: gpu.Open()}
	for _, u := range from {
		d.Sources = append(d.Sources, trainer.HTTPSource{URL: u, Token: token})
	}
	if len(engines) > 0 {
		var al publish.MultiAliases
		for _, a := range admins {
			al = append(al, publish.HTTPAliases{URL: a, Token: token})
		}
		pub := &publish.Publisher{Aliases: al}
		for _, e := range engines {
			url, kind, _ := strings.Cut(e, "#")
			pub.Engines = append(pub.Engines, publish.Engine{URL: url, Kind: kind})
		}
		d.Publisher = pub
	}
	if opts.MetricsLog != "" {
		f, err := os.OpenFile(opts.MetricsLog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, fmt.Errorf("open metrics log: %w", err)
		}
		d.Metrics = f
	}
	return trainer.New(opts, d)
}

// runSteps trains until ctx ends or, with limit > 0, until limit new
// versions have been made.
func runSteps(ctx context.Context, t *trainer.Trainer, limit int, every time.Duration) error {
	if limit <= 0 {
		if err := t.Run(ctx); !errors.Is(err, context.Canceled) {
			return err
		}
		return nil
	}
	target := t.Version() + int64(limit)
	for {
		if _, err := t.Poll(ctx); err != nil && ctx.Err() == nil {
			slog.Warn("training step failed", "err", err)
		}
		if t.Version() >= target {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

func trainPlot(args []string) error {
	fs := newFlags("train plot", "train plot --log FILE [--out curves.png]",
		"Draws the training curves of a step log (reward, advantage, loss, KL, clip fraction, grad norm,\n"+
			"tokens/s, learning rate) into a PNG.")
	logPath := fs.String("log", "", "JSONL step log written by the trainer (--metrics-log, trainer.metrics_log)")
	out := fs.String("out", "curves.png", "PNG to write")
	if err := fs.parse(args); err != nil {
		return err
	}
	if *logPath == "" {
		return usagef("--log is required (usage: hone %s)", fs.synopsis)
	}
	f, err := os.Open(*logPath)
	if err != nil {
		return fmt.Errorf("open step log: %w", err)
	}
	defer f.Close()
	steps, err := curves.ReadLog(f)
	if err != nil {
		return err
	}
	if err := curves.Draw(steps, *out); err != nil {
		return err
	}
	fmt.Printf("wrote %s (%d steps)\n", *out, len(steps))
	return nil
}
