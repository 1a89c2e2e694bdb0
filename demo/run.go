package demo

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hone-rl/hone/trainer"
	"github.com/hone-rl/hone/trainer/curves"
)

// RunOptions configure the closed loop: evaluate, train through hone,
// evaluate again.
type RunOptions struct {
	Agent         Agent  // BaseURL and Model (the policy alias) are required
	StepLog       string // the trainer's JSONL step log, followed to pace rounds
	Split         Split
	Rounds        int     // training rounds; each is one trainer batch
	TasksPerRound int     // distinct tasks per round
	Attempts      int     // attempts per task (the GRPO group)
	Temperature   float64 // sampling temperature of training attempts
	EvalWorkers   int     // concurrent held-out attempts
	StepTimeout   time.Duration
	// Seed seeds every request's sampling (each attempt and turn its own
	// seed derived from it) and names the sessions, so two runs with one
	// seed send the same requests and commit them in the same order.
	Seed    int64
	Log     io.Writer                  // JSONL records (nil: none)
	OnRound func(r RoundStat)          // progress callback (nil: none)
	OnEval  func(phase string, s Eval) // evaluation callback (nil: none)
}

// Eval is a held-out evaluation with greedy decoding.
type Eval struct {
	Solved   int     `json:"solved"`
	Total    int     `json:"total"`
	Rate     float64 `json:"rate"`
	ToolUse  float64 `json:"tool_use"` // share of attempts that called the calculator
	Policy   string  `json:"policy"`   // version that served the last call
	Duration float64 `json:"seconds"`
}

// RoundStat summarises one training round.
type RoundStat struct {
	Round  int     `json:"round"`
	Reward float64 `json:"reward"` // mean over the round's attempts
	Policy string  `json:"policy"` // version that served the round's last call
	// ByPolicy splits the round's attempts by the version that served
	// them (X-Hone-Policy), in increasing version order: one entry without
	// a rollout, the incumbent and the candidate during one.
	ByPolicy   []PolicyStat         `json:"by_policy"`
	Step       *trainer.StepMetrics `json:"step,omitempty"`
	Steps      int                  `json:"steps"` // trainer step log lines so far
	ElapsedSec float64              `json:"elapsed_seconds"`
}

// PolicyStat is what one policy version served in a round.
type PolicyStat struct {
	Policy   string  `json:"policy"`
	Sessions int     `json:"sessions"`
	Reward   float64 `json:"reward"` // mean over its sessions
}

// Decision is a guarded rollout's outcome as the demo saw it: the round
// during which it was taken.
type Decision struct {
	Round     int    `json:"round"`
	Candidate int64  `json:"candidate"`
	Incumbent int64  `json:"incumbent"`
	Decision  string `json:"decision"` // promoted, rolled_back
	Reason    string `json:"reason"`
}

// Report is the outcome of Run.
type Report struct {
	Before, After Eval
	Rounds        []RoundStat
	Decisions     []Decision // guarded rollouts' decisions (none with rollouts off)
	Seconds       float64
}

// record is one line of the JSONL log.
type record struct {
	Type   string     `json:"type"` // eval, attempt, round
	Phase  string     `json:"phase,omitempty"`
	Eval   *Eval      `json:"eval,omitempty"`
	Result *Result    `json:"result,omitempty"`
	Round  *RoundStat `json:"round,omitempty"`
}

// Run evaluates the policy on the held-out set, runs the training rounds
// (each waits for the trainer to take its batch, so every round samples
// the newest policy), and evaluates again.
func Run(ctx context.Context, o RunOptions) (Report, error) {
	start := time.Now()
	var rep Report
	var err error
	if rep.Before, err = o.evaluate(ctx, "before"); err != nil {
		return rep, err
	}
	for r := 0; r < o.Rounds; r++ {
		rs, err := o.round(ctx, r, start)
		if err != nil {
			return rep, err
		}
		rep.Rounds = append(rep.Rounds, rs)
	}
	if rep.After, err = o.evaluate(ctx, "after"); err != nil {
		return rep, err
	}
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

var logMu sync.Mutex

func (o *RunOptions) log(r record) {
	if o.Log == nil {
		return
	}
	b, _ := json.Marshal(r)
	logMu.Lock()
	defer logMu.Unlock()
	_, _ = o.Log.Write(append(b, '\n'))
}

// evaluate solves every held-out task once, greedily, outside training.
func (o *RunOptions) evaluate(ctx context.Context, phase string) (Eval, error) {
	start := time.Now()
	a := o.Agent
	a.Temperature = 0
	results, err := parallel(ctx, len(o.Split.HeldOut), max(o.EvalWorkers, 1), func(i int) (Result, error) {
		t := o.Split.HeldOut[i]
		return a.Try(ctx, t, Attempt{Session: fmt.Sprintf("s%d-eval-%s-%s", o.Seed, phase, t.ID), Seed: o.seed(phase, 0, i)})
	})
	if err != nil {
		return Eval{}, fmt.Errorf("evaluate %s: %w", phase, err)
	}
	e := Eval{Total: len(results), Duration: time.Since(start).Seconds()}
	var tools int
	for i, r := range results {
		o.log(record{Type: "attempt", Phase: phase, Result: &results[i]})
		if r.Reward == 1 {
			e.Solved++
		}
		if r.ToolCalls > 0 {
			tools++
		}
		e.Policy = r.Policy
	}
	if e.Total > 0 {
		e.Rate, e.ToolUse = float64(e.Solved)/float64(e.Total), float64(tools)/float64(e.Total)
	}
	o.log(record{Type: "eval", Phase: phase, Eval: &e})
	if o.OnEval != nil {
		o.OnEval(phase, e)
	}
	return e, nil
}

// round runs Attempts tries at TasksPerRound training tasks concurrently,
// closes them one by one in attempt order (so the trainer receives them in
// the same order every run), then waits until the trainer has stepped on
// them.
func (o *RunOptions) round(ctx context.Context, r int, start time.Time) (RoundStat, error) {
	n := o.TasksPerRound * o.Attempts
	a := o.Agent
	a.Temperature = o.Temperature
	attempt := func(i int) (Task, Attempt) {
		t := o.Split.Train[(r*o.TasksPerRound+i/o.Attempts)%len(o.Split.Train)]
		group := fmt.Sprintf("s%d-r%d-%s", o.Seed, r, t.ID)
		return t, Attempt{Session: fmt.Sprintf("%s-a%d", group, i%o.Attempts), Task: group, Train: true, Seed: o.seed("train", r, i)}
	}
	results, err := parallel(ctx, n, n, func(i int) (Result, error) {
		t, at := attempt(i)
		return a.Try(ctx, t, at)
	})
	if err != nil {
		return RoundStat{}, fmt.Errorf("round %d: %w", r, err)
	}
	rs := RoundStat{Round: r + 1, ByPolicy: byPolicy(results)}
	for i := range results {
		_, at := attempt(i)
		if err := a.Commit(ctx, at, results[i]); err != nil {
			return RoundStat{}, fmt.Errorf("round %d: %w", r, err)
		}
		rs.Reward += results[i].Reward / float64(n)
		rs.Policy = results[i].Policy
		o.log(record{Type: "attempt", Result: &results[i]})
	}
	steps, err := waitSteps(ctx, o.StepLog, r+1, o.StepTimeout)
	if err != nil {
		return rs, fmt.Errorf("round %d: %w", r, err)
	}
	rs.Steps = len(steps)
	rs.Step = &steps[len(steps)-1]
	rs.ElapsedSec = time.Since(start).Seconds()
	o.log(record{Type: "round", Round: &rs})
	if o.OnRound != nil {
		o.OnRound(rs)
	}
	return rs, nil
}

// byPolicy groups results by the version that served them, in increasing
// version order.
func byPolicy(results []Result) []PolicyStat {
	idx := map[string]int{}
	var out []PolicyStat
	for _, r := range results {
		i, ok := idx[r.Policy]
		if !ok {
			i = len(out)
			idx[r.Policy] = i
			out = append(out, PolicyStat{Policy: r.Policy})
		}
		out[i].Sessions++
		out[i].Reward += r.Reward
	}
	for i := range out {
		out[i].Reward /= float64(out[i].Sessions)
	}
	slices.SortFunc(out, func(a, b PolicyStat) int { return cmp.Compare(policyNumber(a.Policy), policyNumber(b.Policy)) })
	return out
}

// policyNumber is X-Hone-Policy as a number (-1 when it is not one).
func policyNumber(p string) int64 {
	v, err := strconv.ParseInt(p, 10, 64)
	if err != nil {
		return -1
	}
	return v
}

// seed is the sampling seed of attempt i of a phase and round: distinct
// per attempt (turns add 0, 1, ... to it), the same in every run of o.Seed.
func (o *RunOptions) seed(phase string, round, i int) *int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%d/%d", o.Seed, phase, round, i)
	v := int64(h.Sum64() >> 2) // room for the turn offsets
	return &v
}

// parallel runs fn for 0..n-1 on up to workers goroutines.
func parallel(ctx context.Context, n, workers int, fn func(i int) (Result, error)) ([]Result, error) {
	out := make([]Result, n)
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(workers, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i], errs[i] = fn(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return out, errors.Join(errs...)
}

// waitSteps polls the step log until it holds at least n records.
func waitSteps(ctx context.Context, path string, n int, timeout time.Duration) ([]trainer.StepMetrics, error) {
	deadline := time.Now().Add(timeout)
	for {
		steps, err := readSteps(path)
		if err != nil {
			return nil, err
		}
		if len(steps) >= n {
			return steps, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("trainer logged %d steps, want %d after %s", len(steps), n, timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func readSteps(path string) ([]trainer.StepMetrics, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read step log: %w", err)
	}
	defer f.Close()
	return curves.ReadLog(f)
}
