// Package trainertest holds what the end-to-end learning tests share: the
// small LoRA GRPO trainer they drive step by step, polling for its next
// step, and a source with inverted rewards that makes a deliberately bad
// version.
package trainertest

import (
	"context"
	"testing"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/kernels/cpu"
	"github.com/hone-rl/hone/trainer"
)

// LoRA returns a trainer of policy alias "agent" over the model folder dir
// that the learning tests use: GRPO batches of 32 sessions in micro-batches
// of microTokens, constant learning rate 2e-2, LoRA rank 8 (alpha 16, seed
// 1) on the CPU, checkpoints in ckpt (resumed from when they are there),
// publishing to pub (nil: none) under the engine's model name "base";
// edits change those options.
func LoRA(t testing.TB, dir, ckpt string, microTokens int, src trainer.Source, pub trainer.Publisher, edits ...func(*trainer.Options)) *trainer.Trainer {
	t.Helper()
	opts := trainer.DefaultOptions()
	opts.Resume = true
	opts.Name, opts.CheckpointDir, opts.BatchSessions, opts.MicroBatchTokens = "agent", ckpt, 32, microTokens
	opts.Schedule = trainer.ScheduleOptions{Kind: trainer.SchedConstant, LR: 2e-2}
	opts.LoRA = trainer.LoRAOptions{Rank: 8, Alpha: 16, Seed: 1}
	for _, e := range edits {
		e(&opts)
	}
	pol, err := trainer.LoadPolicy(dir, cpu.New(2), opts)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trainer.New(opts, trainer.Deps{Policy: pol, Sources: []trainer.Source{src}, Publisher: pub, BaseModel: "base"})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// PollStep polls tr until it takes its next step (trained or skipped) and
// returns its metrics; the test fails after timeout.
func PollStep(t testing.TB, tr *trainer.Trainer, timeout time.Duration) *trainer.StepMetrics {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		m, err := tr.Poll(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if m != nil {
			return m
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("trainer made no step in %s", timeout)
	return nil
}

// InvertedSource feeds a trainer the store's ready experiences after a
// cursor (From) with their rewards inverted (1 - r), without
// acknowledging them: how a test makes a deliberately bad version (a
// reward bug, a poisoned batch).
type InvertedSource struct {
	Store *capture.Store
	From  uint64
}

// Name implements trainer.Source.
func (InvertedSource) Name() string { return "inverted" }

// Fetch implements trainer.Source.
func (i InvertedSource) Fetch(ctx context.Context, after uint64, limit int) ([]capture.Experience, error) {
	exps, err := i.Store.Experiences(ctx, max(after, i.From), limit)
	for k := range exps {
		exps[k].Reward = 1 - exps[k].Reward
	}
	return exps, err
}

// Ack implements trainer.Source: nothing is acknowledged.
func (InvertedSource) Ack(context.Context, uint64) error { return nil }
