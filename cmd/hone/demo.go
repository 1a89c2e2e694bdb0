package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/config"
	"github.com/hone-rl/hone/demo"
	"github.com/hone-rl/hone/proxy"
	"github.com/hone-rl/hone/rollout"
	"github.com/hone-rl/hone/trainer"
	"github.com/hone-rl/hone/trainer/curves"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/schollz/progressbar/v3"
)

func init() {
	register("demo", "closed-loop demo: an agent gets better with use (demo data|prepare for the task set and warm start)", runDemo)
}

func runDemo(ctx context.Context, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "data":
			return demoData(args[1:], os.Stdout)
		case "prepare":
			return demoPrepare(ctx, args[1:])
		}
	}
	return demoLoop(ctx, args)
}

// demoData prints the task split as JSON.
func demoData(args []string, w io.Writer) error {
	fs := newFlags("demo data", "demo data [flags]", "Prints the demo's task split (training and held-out problems) as JSON.")
	seed := fs.Int64("seed", 1, "task seed")
	nTrain := fs.Int("train", 256, "training problems")
	nHeld := fs.Int("held-out", 64, "held-out problems")
	if err := fs.parse(args); err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(demo.NewSplit(*seed, *nTrain, *nHeld))
}

// demoPrepare writes the SFT warm-started tiny model.
func demoPrepare(ctx context.Context, args []string) error {
	fs := newFlags("demo prepare", "demo prepare [flags]",
		"Writes the SFT warm-started tiny model the demo and hone serve start from (make tiny-model).")
	o := demo.DefaultPrepareOptions(shippedModel)
	st := demo.Stage{LR: 2e-3, DigitWeight: 4, Seed: 1}
	fs.StringVar(&o.Out, "out", o.Out, "model folder to write")
	fs.Int64Var(&o.Seed, "seed", o.Seed, "seed of the initial weights")
	fs.IntVar(&o.Batch, "batch", o.Batch, "demonstrations per step")
	fs.IntVar(&o.SaveEvery, "save-every", o.SaveEvery, "also write the model every N steps")
	fs.StringVar(&o.Init, "init", "", "continue from this model folder (default: random tiny weights)")
	fs.IntVar(&o.ProbeEvery, "probe-every", o.ProbeEvery, "greedily decode 64 fresh tool calls every N steps and report them")
	digitWeight := fs.Float64("digit-weight", float64(st.DigitWeight), "loss weight of digit tokens in the --steps stage")
	fs.IntVar(&o.Threads, "threads", 0, "CPU workers (0: all cores)")
	fs.IntVar(&st.Steps, "steps", 0, "run one stage of this many steps instead of the default stages")
	fs.Float64Var(&st.LR, "lr", st.LR, "peak learning rate of the --steps stage")
	fs.Int64Var(&st.Seed, "data-seed", st.Seed, "demonstration seed of the --steps stage")
	if err := fs.parse(args); err != nil {
		return err
	}
	if st.Steps > 0 {
		st.DigitWeight = float32(*digitWeight)
		o.Stages = []demo.Stage{st}
	}
	o.Progress = os.Stderr
	return demo.Prepare(ctx, o)
}

// demoFlags are the loop's settings.
type demoFlags struct {
	model, out, data                 string
	config, backend                  string
	seed                             int64
	rounds, tasks, attempts, heldOut int
	maxTokens                        int
	temperature, lr                  float64
	rollout                          bool
}

func parseDemoFlags(args []string) (demoFlags, error) {
	fs := newFlags("demo", "demo [flags]\n       hone demo data [flags]\n       hone demo prepare [flags]",
		"Runs the closed loop in one process (embedded engine, proxy, in-process trainer) with an agent that\n"+
			"solves arithmetic tasks with a calculator tool, and reports the held-out solve rate before and after\n"+
			"training. 'demo data' prints the task split, 'demo prepare' writes the warm-started tiny model\n"+
			"('hone demo data --help', 'hone demo prepare --help').")
	var f demoFlags
	fs.StringVar(&f.model, "model", "", "model folder (default: model of --config, else the shipped prepared tiny model)")
	fs.StringVar(&f.config, "config", "", "hone serve's YAML config: the engine's and trainer's settings (backends, weight_dtype, "+
		"autocast, ...) come from it and the HONE_* variables, as for hone serve; the demo sets its own data folder, "+
		"listeners, batch, learning rate and step log")
	fs.StringVar(&f.backend, "backend", "", "compute backend of the embedded engine and the trainer: cpu, cuda or auto "+
		"(default: engine_embedded.backend and trainer.backend, HONE_ENGINE_EMBEDDED_BACKEND, HONE_TRAINER_BACKEND; cpu)")
	fs.StringVar(&f.out, "out", filepath.Join("data", "demo"), "folder for reward.png, demo.jsonl, train-steps.jsonl and hone.log")
	fs.StringVar(&f.data, "data", "", "data folder (default: a fresh temporary folder)")
	fs.Int64Var(&f.seed, "seed", 1, "seed of the task split and of every request's sampling (two runs with one seed print the same numbers)")
	fs.IntVar(&f.rounds, "rounds", 40, "training rounds (one trainer step each)")
	fs.IntVar(&f.tasks, "tasks", 8, "tasks per round")
	fs.IntVar(&f.attempts, "attempts", 4, "attempts per task (GRPO group size)")
	fs.IntVar(&f.heldOut, "held-out", 64, "held-out problems evaluated before and after")
	fs.IntVar(&f.maxTokens, "max-tokens", 96, "max_tokens per model call")
	fs.Float64Var(&f.temperature, "temperature", 0.7, "sampling temperature of training attempts")
	fs.Float64Var(&f.lr, "lr", 1e-3, "trainer learning rate")
	fs.BoolVar(&f.rollout, "rollout", true, "guarded rollouts: each new version first serves half of the new sessions and "+
		"is promoted or rolled back on its reward (rollout.png); --rollout=false serves each version to everyone at once")
	return f, fs.parse(args)
}

// demoConfig is hone serve's configuration (defaults < --config < HONE_*
// variables, as hone serve reads it) with the trainer on and tuned for the
// demo; --backend sets both compute backends.
func demoConfig(f demoFlags, data string, env []string) (config.Config, error) {
	c, err := config.Load(f.config, env)
	if err != nil {
		return c, err
	}
	c.Data = data
	if f.model != "" {
		c.Model = f.model
	}
	if f.backend != "" {
		c.Embedded.Backend, c.Trainer.Backend = f.backend, f.backend
	}
	c.Trainer.CheckpointDir = "" // under the demo's data folder (Finish)
	c.Log.Level = "info"
	c.Proxy.Listen, c.Proxy.ControlListen = "127.0.0.1:0", "127.0.0.1:0"
	c.Trainer.Enabled = true
	c.Trainer.BatchSessions = f.tasks * f.attempts
	c.Trainer.PollInterval = 200 * time.Millisecond
	c.Trainer.Advantage.Algorithm = trainer.AlgStepWiseGRPO
	c.Trainer.Schedule.LR, c.Trainer.Schedule.WarmupSteps = f.lr, 0
	c.Trainer.MetricsLog = filepath.Join(f.out, "train-steps.jsonl")
	if f.rollout {
		// Scaled to the demo's traffic: half of each round's sessions go to
		// the candidate, a look per round, a decision within ten rounds;
		// the rewards are 0 or 1 (a standard deviation near 0.5), so a
		// candidate counts as not worse within 0.2 of the live version.
		c.Rollout.Enabled = true
		c.Rollout.Steps, c.Rollout.MinSessions, c.Rollout.MaxLooks = []float64{0.5}, max(f.tasks*f.attempts/2, 1), 10
		c.Rollout.Margin = 0.2
	}
	return c, c.Finish()
}

// demoLoop runs engine + proxy + trainer in this process and the demo
// agent against the proxy's OpenAI API.
func demoLoop(ctx context.Context, args []string) error {
	f, err := parseDemoFlags(args)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	data := f.data
	if data == "" {
		if data, err = os.MkdirTemp("", "hone-demo-"); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		defer os.RemoveAll(data)
	}
	_ = os.Remove(filepath.Join(f.out, "train-steps.jsonl"))
	c, err := demoConfig(f, data, os.Environ())
	if err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(f.out, "hone.log"))
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer logFile.Close()
	log := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelInfo}))
	slog.SetDefault(log)
	base, rm, stop, err := startStack(ctx, &c, log)
	if err != nil {
		return err
	}
	defer stop()
	return runDemoAgent(ctx, f, c, base, rm)
}

// startStack starts the embedded engine, the capture store, the proxy's
// data plane on a loopback port, the guarded rollouts (when on) and the
// in-process trainer, as hone serve --train does; it returns the OpenAI
// base URL and the rollouts' manager (nil when off).
func startStack(ctx context.Context, c *config.Config, log *slog.Logger) (string, *rollout.Manager, func(), error) {
	reg := prometheus.NewRegistry()
	store, err := capture.Open(filepath.Join(c.Data, "capture"), c.Capture, reg)
	if err != nil {
		return "", nil, nil, fmt.Errorf("open trace store: %w", err)
	}
	var stops []func()
	stop := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	stops = append(stops, func() { closeLogged(log, "trace store", store.Close) })
	emb, err := startEmbedded(ctx, c, log)
	if err != nil {
		stop()
		return "", nil, nil, err
	}
	stops = append(stops, emb.close)
	addPolicyAlias(c)
	srv, err := proxy.New(c.Proxy, store, reg, log)
	if err != nil {
		stop()
		return "", nil, nil, err
	}
	srv.SetConversations(store.Conversations(c.Proxy.Responses.TTL, c.Proxy.Responses.Max)) // Responses API conversations survive a restart
	rm, err := startRollouts(ctx, c, store, srv, reg, log)
	if err != nil {
		stop()
		return "", nil, nil, err
	}
	tr, err := startTrainer(ctx, c, store, srv, reg, log)
	if err != nil {
		stop()
		return "", nil, nil, err
	}
	if rm != nil {
		tr.useRollouts(rm)
	}
	stops = append(stops, tr.stop)
	ln, err := net.Listen("tcp", c.Proxy.Listen)
	if err != nil {
		stop()
		return "", nil, nil, fmt.Errorf("data plane: %w", err)
	}
	go srv.Serve(ln) //nolint:errcheck // ends with Shutdown
	stops = append(stops, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	return "http://" + ln.Addr().String() + "/v1", rm, stop, nil
}

// runDemoAgent runs the rounds with a progress bar and writes the outputs.
func runDemoAgent(ctx context.Context, f demoFlags, c config.Config, base string, rm *rollout.Manager) error {
	jl, err := os.Create(filepath.Join(f.out, "demo.jsonl"))
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer jl.Close()
	split := demo.NewSplit(f.seed, 1024, f.heldOut)
	bar := progressbar.NewOptions(f.rounds, progressbar.OptionSetDescription("training"),
		progressbar.OptionSetWriter(os.Stderr), progressbar.OptionShowCount(), progressbar.OptionSetWidth(30),
		progressbar.OptionShowElapsedTimeOnFinish())
	var dec decisions
	fmt.Printf("hone demo: %d held-out problems, %d rounds x %d tasks x %d attempts, step-wise GRPO (lr %g); "+
		"engine_embedded.backend %s, trainer.backend %s (hone.log says what each opened)\n",
		f.heldOut, f.rounds, f.tasks, f.attempts, f.lr, c.Embedded.Backend, c.Trainer.Backend)
	o := demo.RunOptions{
		Agent: demo.Agent{BaseURL: base, Model: c.Embedded.ServedModelName, APIKey: "dummy", MaxTurns: 3, MaxTokens: f.maxTokens,
			Client: &http.Client{Timeout: 5 * time.Minute}},
		StepLog: c.Trainer.MetricsLog, Split: split, Rounds: f.rounds, TasksPerRound: f.tasks, Attempts: f.attempts,
		Temperature: f.temperature, EvalWorkers: 16, StepTimeout: 5 * time.Minute, Log: jl, Seed: f.seed,
		OnEval: func(phase string, e demo.Eval) {
			if phase != "before" { // the bar's line ends before the result is printed
				_ = bar.Finish()
				fmt.Fprintln(os.Stderr)
			}
			fmt.Printf("held-out solve rate %s training: %.1f%% (%d/%d, tool use %.0f%%, %.0fs)\n", phase, 100*e.Rate,
				e.Solved, e.Total, 100*e.ToolUse, e.Duration)
		},
		OnRound: func(r demo.RoundStat) {
			dec.roundDone(r.Round)
			bar.Describe(fmt.Sprintf("round %d reward %.2f trained %s serving %s", r.Round, r.Reward, orBase(r.Step), serving(r)))
			_ = bar.Add(1)
		},
	}
	if rm != nil {
		rm.OnDecision(dec.add)
	}
	rep, err := demo.Run(ctx, o)
	if err != nil {
		_ = bar.Finish()
		fmt.Fprintln(os.Stderr)
		return err
	}
	rep.Decisions = dec.list()
	return writeDemoOutputs(f, c, rep)
}

// decisions collects the rollouts' decisions with the round during which
// each was taken.
type decisions struct {
	mu    sync.Mutex
	round int // rounds completed
	all   []demo.Decision
}

func (d *decisions) roundDone(r int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.round = r
}

func (d *decisions) add(r rollout.Rollout) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.all = append(d.all, demo.Decision{Round: d.round + 1, Candidate: r.Candidate.Version, Incumbent: r.Incumbent.Version,
		Decision: string(r.Decision), Reason: r.Reason})
}

func (d *decisions) list() []demo.Decision {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.all)
}

// serving names the versions that served a round: "v3", or "v3+v4" during
// a rollout (the live version first).
func serving(r demo.RoundStat) string {
	var names []string
	for _, p := range r.ByPolicy {
		if p.Policy == "" || p.Policy == "0" {
			names = append(names, "base")
		} else {
			names = append(names, "v"+p.Policy)
		}
	}
	return strings.Join(names, "+")
}

func orBase(m *trainer.StepMetrics) string {
	if m == nil || m.Version == 0 {
		return "base"
	}
	return fmt.Sprintf("v%d", m.Version)
}

func writeDemoOutputs(f demoFlags, c config.Config, rep demo.Report) error {
	fmt.Printf("\nheld-out solve rate: before %.1f%% -> after %.1f%% (%d problems, greedy)\n",
		100*rep.Before.Rate, 100*rep.After.Rate, rep.Before.Total)
	if len(rep.Rounds) == 0 {
		return nil
	}
	png := filepath.Join(f.out, "reward.png")
	if err := demo.PlotReward(rep, png); err != nil {
		return err
	}
	wrote := []string{png}
	if len(rep.Decisions) > 0 || c.Rollout.Enabled {
		printDecisions(rep.Decisions)
		rp := filepath.Join(f.out, "rollout.png")
		if err := demo.PlotRollout(rep, rp); err != nil {
			return err
		}
		wrote = append(wrote, rp)
	}
	if steps, err := readStepLog(c.Trainer.MetricsLog); err == nil && len(steps) > 0 {
		cp := filepath.Join(f.out, "curves.png")
		if err := curves.Draw(steps, cp); err != nil {
			return err
		}
		wrote = append(wrote, cp)
	}
	wrote = append(wrote, filepath.Join(f.out, "demo.jsonl"), c.Trainer.MetricsLog)
	fmt.Printf("wall time %.0fs; wrote %s\n", rep.Seconds, strings.Join(wrote, ", "))
	if rep.After.Rate <= rep.Before.Rate {
		return errors.New("demo: the held-out solve rate did not improve")
	}
	return nil
}

// printDecisions prints each rollout decision on a line, and a count.
func printDecisions(ds []demo.Decision) {
	promoted := 0
	for _, d := range ds {
		if d.Decision == string(rollout.Promoted) {
			promoted++
		}
	}
	fmt.Printf("guarded rollouts: %d decided, %d promoted, %d rolled back\n", len(ds), promoted, len(ds)-promoted)
	for _, d := range ds {
		fmt.Printf("  round %2d: v%d %s against v%d: %s\n", d.Round, d.Candidate, strings.ReplaceAll(d.Decision, "_", " "),
			d.Incumbent, d.Reason)
	}
}

func readStepLog(path string) ([]trainer.StepMetrics, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return curves.ReadLog(fh)
}
