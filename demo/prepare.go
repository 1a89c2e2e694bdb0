package demo

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand"
	"path/filepath"
	"time"

	"github.com/hone-rl/hone/kernels"
	"github.com/hone-rl/hone/kernels/cpu"
	"github.com/hone-rl/hone/model"
	"github.com/hone-rl/hone/model/tokenizer"
)

// PrepareOptions configure the SFT warm start of the tiny model.
type PrepareOptions struct {
	Out        string     // model folder to write
	Seed       int64      // initial weights
	Batch      int        // traces per step
	Confusions Confusions // teacher noise: share of demonstrations with the wrong operation
	Stages     []Stage    // run in order, each with fresh optimizer state
	Threads    int        // CPU workers (0: all cores)
	Progress   io.Writer  // one line per 10 steps (nil: quiet)
	SaveEvery  int        // also write the model every this many steps (0: only at the end)
	Init       string     // continue from this model folder instead of random weights
	// ProbeEvery greedily decodes the tool call for 64 fresh problems every
	// this many steps and reports it on Progress (0: only at the end).
	ProbeEvery int
}

// Stage is one run of AdamW steps on fresh demonstrations.
type Stage struct {
	Steps int
	// ScheduleSteps is the length of the cosine schedule (decay to 10% of
	// LR); a stage may stop before its end. 0 means Steps.
	ScheduleSteps int
	LR            float64
	// DigitWeight weighs the loss of digit tokens in completions (operands
	// copied from the question, the result copied into the answer) against
	// the format tokens; 1 weighs all alike.
	DigitWeight float32
	Seed        int64 // demonstrations and their order
}

// DefaultPrepareOptions are the settings make tiny-model uses: one stage of
// 4000 steps, long enough for the tiny model to copy the problem's numbers
// into its tool calls (measured by the probe: 97-100% from step 2500 on),
// with the operation of 60% of the subtraction and division demonstrations
// and 20% of the multiplication ones wrong.
func DefaultPrepareOptions(out string) PrepareOptions {
	return PrepareOptions{Out: out, Seed: 7, Batch: 8, SaveEvery: 250, ProbeEvery: 250,
		Confusions: Confusions{OpSub: 0.6, OpDiv: 0.6, OpMul: 0.2},
		Stages:     []Stage{{Steps: 4000, LR: 1.5e-3, DigitWeight: 1, Seed: 2}}}
}

// sftExample is one tokenised demonstration with its loss mask.
type sftExample struct {
	tokens []int32
	mask   []float32 // len(tokens)-1: 1 where tokens[t+1] is a model completion token
}

// encodeTrace tokenises a demonstration; the mask covers the completions,
// digits weighted digitWeight.
func encodeTrace(tok tokenizer.Tokenizer, turns []Turn, digitWeight float32) (sftExample, error) {
	var ex sftExample
	for _, tr := range turns {
		p := tok.Encode(tr.Prompt)
		if len(p) < len(ex.tokens) || !equalIDs(p[:len(ex.tokens)], ex.tokens) {
			return ex, fmt.Errorf("prompt does not extend the previous turn")
		}
		for len(ex.tokens) < len(p) {
			ex.tokens = append(ex.tokens, p[len(ex.tokens)])
			ex.mask = append(ex.mask, 0)
		}
		for _, id := range tok.Encode(tr.Completion) {
			w := float32(1)
			if d := tok.Decode([]int32{id}); len(d) == 1 && d[0] >= '0' && d[0] <= '9' {
				w = max(digitWeight, 1)
			}
			ex.tokens = append(ex.tokens, id)
			ex.mask = append(ex.mask, w)
		}
	}
	ex.mask = ex.mask[1:] // mask[t] belongs to the prediction of tokens[t+1]
	return ex, nil
}

func equalIDs(a, b []int32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// Prepare writes a tiny model warm-started by supervised fine-tuning of
// every weight on noisy solved traces: it learns the tool format, and the
// teacher noise leaves it often wrong about which operation a question needs.
func Prepare(ctx context.Context, o PrepareOptions) error {
	if o.Out == "" || len(o.Stages) == 0 || o.Batch <= 0 {
		return fmt.Errorf("prepare: need out, stages and batch > 0")
	}
	if o.Init != "" && filepath.Clean(o.Init) == filepath.Clean(o.Out) {
		return fmt.Errorf("prepare: --init and --out must differ (the weights are read while the new ones are written)")
	}
	if err := tokenizer.WriteCharTokenizer(o.Out, tokenizer.DefaultChars); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	tok, err := tokenizer.Load(o.Out)
	if err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	var m *model.Model
	if o.Init != "" {
		m, err = model.Load(o.Init, cpu.New(o.Threads))
	} else {
		m, err = newTinyModel(tok, o.Seed, o.Threads)
	}
	if err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	for i, st := range o.Stages {
		if err := sft(ctx, m, tok, o, i, st); err != nil {
			return err
		}
	}
	if err := m.Save(o.Out); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	return nil
}

// tinyRopeTheta is the demo model's RoPE base. Qwen3's 1e6 (the preset's)
// leaves a 32-dimension head about four usefully fast rotations, too few to
// tell neighbouring characters apart when copying digits; 1000 suits the
// demo's sequences of a few hundred characters.
const tinyRopeTheta = 1000

// newTinyModel builds the tiny preset sized for tok's vocabulary.
func newTinyModel(tok tokenizer.Tokenizer, seed int64, threads int) (*model.Model, error) {
	cfg, err := model.Preset("tiny")
	if err != nil {
		return nil, err
	}
	cfg.RopeTheta = tinyRopeTheta
	cfg.VocabSize = tok.VocabSize()
	cfg.BOSTokenID, cfg.EOSTokenIDs = nil, nil
	if id, ok := tok.TokenID("<|endoftext|>"); ok {
		cfg.BOSTokenID = &id
	}
	if id, ok := tok.TokenID("<|im_end|>"); ok {
		cfg.EOSTokenIDs = []int32{id}
	}
	return model.New(cfg, cpu.New(threads), seed)
}

// sft runs one stage.
func sft(ctx context.Context, m *model.Model, tok tokenizer.Tokenizer, o PrepareOptions, n int, st Stage) error {
	be := m.Backend()
	params := m.Params()
	g := m.NewGrads(nil, true)
	defer g.Free()
	m1, m2 := moments(be, params), moments(be, params)
	r := rand.New(rand.NewSource(st.Seed))
	sched := st.ScheduleSteps
	if sched <= 0 {
		sched = st.Steps
	}
	start := time.Now()
	for step := 1; step <= st.Steps; step++ {
		batch, mask, err := sftBatch(r, tok, o, st.DigitWeight)
		if err != nil {
			return err
		}
		g.Zero()
		loss, err := sftStep(ctx, m, batch, mask, g)
		if err != nil {
			return fmt.Errorf("prepare stage %d step %d: %w", n+1, step, err)
		}
		lr := st.LR * (0.1 + 0.9*0.5*(1+math.Cos(math.Pi*float64(step-1)/float64(sched))))
		opt := kernels.AdamW{LR: float32(lr), Beta1: 0.9, Beta2: 0.98, Eps: 1e-8, WeightDecay: 0.01, Step: step}
		for i, p := range params {
			be.AdamWStep(p.Tensor, g.Base()[i].Tensor, m1[i], m2[i], opt)
		}
		if o.SaveEvery > 0 && step%o.SaveEvery == 0 {
			if err := m.Save(o.Out); err != nil {
				return fmt.Errorf("prepare: %w", err)
			}
		}
		if o.Progress != nil && (step%10 == 0 || step == st.Steps) {
			fmt.Fprintf(o.Progress, "prepare: stage %d step %d/%d loss %.4f lr %.2g (%s)\n", n+1, step, st.Steps, loss, lr,
				time.Since(start).Round(time.Second))
		}
		if o.Progress != nil && (o.ProbeEvery > 0 && step%o.ProbeEvery == 0 || step == st.Steps) {
			pr, err := probe(ctx, m, tok, 99, 64, 80)
			if err != nil {
				return err
			}
			fmt.Fprintf(o.Progress, "prepare: stage %d step %d probe: %s\n", n+1, step, pr)
		}
	}
	return nil
}

func moments(be kernels.Backend, params []model.Param) []kernels.Tensor {
	out := make([]kernels.Tensor, len(params))
	for i, p := range params {
		out[i] = be.New(p.Tensor.Shape()...)
	}
	return out
}

// sftBatch draws o.Batch fresh noisy demonstrations.
func sftBatch(r *rand.Rand, tok tokenizer.Tokenizer, o PrepareOptions, digitWeight float32) ([][]int32, [][]float32, error) {
	var seqs [][]int32
	var masks [][]float32
	for len(seqs) < o.Batch {
		t := NewTask(r, "sft")
		turns, err := SolvedTrace(t, DemoExpression(r, t, o.Confusions), nil)
		if err != nil {
			continue // a confused division that is not exact: draw again
		}
		ex, err := encodeTrace(tok, turns, digitWeight)
		if err != nil {
			return nil, nil, fmt.Errorf("prepare: %w", err)
		}
		seqs, masks = append(seqs, ex.tokens), append(masks, ex.mask)
	}
	return seqs, masks, nil
}

// sftStep accumulates the gradient of the masked negative log-likelihood
// and returns the loss.
func sftStep(ctx context.Context, m *model.Model, seqs [][]int32, mask [][]float32, g *model.Grads) (float64, error) {
	act, err := m.ForwardTrain(ctx, seqs, nil)
	if err != nil {
		return 0, err
	}
	defer act.Free()
	mean, grad, err := model.MaskedMean(act.LogProbs(), mask)
	if err != nil {
		return 0, err
	}
	for _, row := range grad {
		for i := range row {
			row[i] = -row[i]
		}
	}
	return -mean, m.Backward(ctx, act, grad, g)
}
