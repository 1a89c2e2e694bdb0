package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/tidwall/gjson"
)

func init() {
	register("traces", "inspect captured traces: ls | show SESSION | stats | gc (stop hone serve first)", runTraces)
}

// openCapture opens DIR/capture for an offline command. The janitor is
// disabled so inspecting changes nothing.
func openCapture(dataDir string) (*capture.Store, error) {
	dir := filepath.Join(dataDir, "capture")
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("no capture store at %s: %w", dir, err)
	}
	o := capture.DefaultOptions()
	o.Session.IdleTimeout, o.Reward.Deadline, o.Retention.Interval = 0, 0, time.Hour
	s, err := capture.Open(dir, o, nil)
	if err != nil {
		return nil, fmt.Errorf("%w\n(Badger locks %s while hone serve runs: stop it first, "+
			"or read through its control plane: GET /v1/sessions, GET /v1/sessions/{id}, GET /v1/experiences)", err, dir)
	}
	return s, nil
}

// tracesAbout is hone traces' help.
const tracesAbout = `Inspects the trace store (DATA/capture). It opens the store itself: stop hone serve first, or read
through its control plane (GET /v1/sessions, GET /v1/sessions/{id}, GET /v1/experiences).

  ls      sessions with their state, calls, reward, task and model
  show    one session's transcript: token counts, mean logprob, reward, policy version
  stats   sessions by state, calls, rewards, drift, ready-queue cursor, store size
  gc      delete consumed and dropped sessions (--state, --older-than); --dry-run lists them

'hone traces SUB --help' lists a subcommand's flags.`

func runTraces(ctx context.Context, args []string) error {
	if err := subcommandHelp(args, "traces ls|show SESSION|stats|gc [--data DIR] [flags]", tracesAbout); err != nil {
		return err
	}
	sub, args := args[0], args[1:]
	synopsis := map[string]string{
		"ls":    "traces ls [--data DIR] [--state S] [--task T] [--since T] [--until T] [--limit N]",
		"show":  "traces show [--data DIR] SESSION",
		"stats": "traces stats [--data DIR]",
		"gc":    "traces gc [--data DIR] [--state S] [--older-than D] [--dry-run]",
	}[sub]
	if synopsis == "" {
		return usagef("unknown traces command %q: want ls, show, stats or gc", sub)
	}
	fs := newFlags("traces "+sub, synopsis, "")
	data := fs.String("data", "./data", "hone data directory (the store is DATA/capture)")
	var (
		filt      timeFilter
		state     = new(string)
		task      = new(string)
		limit     = new(int)
		olderThan = new(time.Duration)
		dryRun    = new(bool)
	)
	switch sub {
	case "ls":
		fs.about = "Lists sessions (oldest in state first with --state, else by id)."
		fs.StringVar(state, "state", "", "only sessions in this state ("+stateNames()+")")
		fs.StringVar(task, "task", "", "only sessions of this task")
		fs.IntVar(limit, "limit", 100, "max sessions listed (0: all)")
		fs.Var(&filt.since, "since", "sessions created at or after (RFC3339, 2006-01-02 or a duration ago like 24h)")
		fs.Var(&filt.until, "until", "sessions created before (same forms as --since)")
	case "show":
		fs.about = "Prints a session's transcript: each call's new messages and reply, token counts, mean logprob,\nreward and the policy version that served it."
		fs.maxArgs = 1
	case "stats":
		fs.about = "Counts sessions by state, calls, rewarded sessions and drift; shows the ready-queue cursor and store size."
	case "gc":
		fs.about = "Deletes sessions that entered their state longer ago than --older-than (all of them without it):\n" +
			"consumed and dropped ones, or those of --state. --dry-run lists them and deletes nothing."
		fs.StringVar(state, "state", "", "only sessions in this state (default: consumed and dropped)")
		fs.DurationVar(olderThan, "older-than", 0, "only sessions that entered their state longer ago than this")
		fs.BoolVar(dryRun, "dry-run", false, "list what gc would delete; delete nothing")
	}
	if err := fs.parse(args); err != nil {
		return err
	}
	if sub == "show" && fs.NArg() != 1 {
		return usagef("usage: hone %s", synopsis)
	}
	f := capture.ExportFilter{Since: filt.since.t, Until: filt.until.t, Task: *task}
	if *state != "" {
		st, err := capture.ParseState(*state)
		if err != nil {
			return usageError{err}
		}
		f.States = []capture.State{st}
	}
	s, err := openCapture(*data)
	if err != nil {
		return err
	}
	defer s.Close()
	switch sub {
	case "ls":
		return tracesLs(ctx, s, f, *limit, stdout)
	case "show":
		return tracesShow(ctx, s, fs.Arg(0), stdout)
	case "stats":
		return tracesStats(ctx, s, stdout)
	}
	var st capture.State
	if len(f.States) == 1 {
		st = f.States[0]
	}
	cutoff := time.Time{}
	if *olderThan > 0 {
		cutoff = time.Now().Add(-*olderThan)
	}
	if *dryRun {
		return tracesGCDryRun(ctx, s, st, cutoff, stdout)
	}
	n, err := s.GC(ctx, st, cutoff)
	fmt.Fprintf(stdout, "deleted %d sessions\n", n)
	return err
}

func stateNames() string {
	names := make([]string, len(capture.States))
	for i, st := range capture.States {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}

// tracesGCDryRun lists the sessions Store.GC(st, cutoff) would delete: those
// in st (consumed and dropped when empty) that entered it before cutoff
// (any time when zero).
func tracesGCDryRun(ctx context.Context, s *capture.Store, st capture.State, cutoff time.Time, out io.Writer) error {
	states := []capture.State{capture.StateConsumed, capture.StateDropped}
	if st != "" {
		states = []capture.State{st}
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tSTATE\tCALLS\tSINCE")
	n := 0
	err := s.Sessions(ctx, capture.ExportFilter{States: states}, func(rec *capture.Session) error {
		if !cutoff.IsZero() && !rec.Since.Before(cutoff) {
			return nil
		}
		n++
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", rec.ID, rec.State, rec.Calls, rec.Since.Local().Format(time.DateTime))
		return nil
	})
	if err != nil {
		return err
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "would delete %d sessions (dry run: nothing deleted)\n", n)
	return err
}

func tracesLs(ctx context.Context, s *capture.Store, f capture.ExportFilter, limit int, out io.Writer) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tSTATE\tCALLS\tREWARD\tTASK\tMODEL\tCREATED\tLAST CALL")
	n := 0
	err := s.Sessions(ctx, f, func(rec *capture.Session) error {
		if limit > 0 && n >= limit {
			return errLimit
		}
		n++
		reward := "-"
		if len(rec.Rewards) > 0 {
			reward = fmt.Sprintf("%.3g", rec.SessionReward(s.RewardRule()))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", rec.ID, rec.State, rec.Calls, reward, dash(rec.Task), dash(rec.Model),
			rec.Created.Local().Format(time.DateTime), rec.LastCall.Local().Format(time.DateTime))
		return nil
	})
	if err != nil && !errors.Is(err, errLimit) {
		return err
	}
	return tw.Flush()
}

var errLimit = errors.New("limit reached")

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func tracesShow(ctx context.Context, s *capture.Store, id string, out io.Writer) error {
	rec, calls, err := s.GetSession(ctx, id)
	if err != nil {
		return err
	}
	rule := s.RewardRule()
	drifts := map[string]capture.Drift{}
	for _, d := range rec.DriftsOf(calls) {
		drifts[d.Call] = d
	}
	fmt.Fprintf(out, "session %s  state %s  calls %d  task %s  model %s  drift %d\n", rec.ID, rec.State, rec.Calls, dash(rec.Task), dash(rec.Model), len(drifts))
	if len(rec.Tags) > 0 {
		fmt.Fprintf(out, "tags %s\n", strings.Join(rec.Tags, ","))
	}
	if len(rec.Rewards) > 0 {
		fmt.Fprintf(out, "reward %.4g (%s of %d)\n", rec.SessionReward(rule), rule, len(rec.Rewards))
	}
	for _, r := range rec.Rewards {
		target := "session"
		if r.Call != "" {
			target = "call " + r.Call
		}
		line := fmt.Sprintf("  %+.4g from %s on %s", r.Value, r.Source, target)
		if r.Comment != "" {
			line += ": " + r.Comment
		}
		fmt.Fprintln(out, line)
	}
	seen := 0
	for _, c := range calls {
		v := capture.ViewCall(c, rec, rule)
		fmt.Fprintf(out, "\n── #%d %s  policy v%d  %s  prompt %d tok  completion %d tok", c.Seq, c.ID, c.Version, c.Status, v.PromptTokens, v.CompletionTokens)
		if v.MeanLogprob != nil {
			fmt.Fprintf(out, "  mean logprob %.3f", *v.MeanLogprob)
		}
		if v.Reward != nil {
			fmt.Fprintf(out, "  reward %+.4g", *v.Reward)
		}
		fmt.Fprintln(out)
		d, drifted := drifts[c.ID]
		if drifted {
			printDrift(out, d)
		}
		if p := gjson.GetBytes(c.Request, "prompt"); p.Exists() {
			fmt.Fprintf(out, "prompt: %s\n", indent(p.String()))
		}
		msgs := gjson.GetBytes(c.Request, "messages").Array()
		if seen > len(msgs) || drifted {
			seen = 0 // not an extension of the previous call: print it whole
		}
		for i, m := range msgs[seen:] {
			if drifted && seen+i == d.Message {
				fmt.Fprintln(out, "!! differs:")
			}
			printMessage(out, m)
		}
		for i := range c.Choices {
			printReply(out, &c.Choices[i], len(c.Choices) > 1)
		}
		seen = len(msgs) + 1
	}
	return nil
}

// printDrift says that a call started a new path, why, and which message
// differed from the closest earlier conversation.
func printDrift(out io.Writer, d capture.Drift) {
	fmt.Fprintf(out, "!! drift (%s): a new path", d.Cause)
	if d.Message >= 0 {
		fmt.Fprintf(out, " from message %d", d.Message)
		if d.Role != "" {
			fmt.Fprintf(out, " (%s)", d.Role)
		}
	}
	if d.Against != "" {
		fmt.Fprintf(out, ", compared with call %s", d.Against)
	}
	if d.Detail != "" {
		fmt.Fprintf(out, ": %s", d.Detail)
	}
	fmt.Fprintln(out)
}

func printMessage(out io.Writer, m gjson.Result) {
	role := m.Get("role").String()
	content := m.Get("content")
	text := content.String()
	if content.IsArray() {
		var parts []string
		for _, p := range content.Array() {
			parts = append(parts, p.Get("text").String())
		}
		text = strings.Join(parts, "")
	}
	if id := m.Get("tool_call_id").String(); id != "" {
		role += " (" + id + ")"
	}
	fmt.Fprintf(out, "%s: %s\n", role, indent(text))
	for _, tc := range m.Get("tool_calls").Array() {
		fmt.Fprintf(out, "  → %s(%s)\n", tc.Get("function.name").String(), tc.Get("function.arguments").String())
	}
}

func printReply(out io.Writer, ch *capture.Choice, many bool) {
	label := "assistant*"
	if many {
		label = fmt.Sprintf("assistant*[%d]", ch.Index)
	}
	if ch.Reasoning != "" {
		fmt.Fprintf(out, "%s (reasoning): %s\n", label, indent(ch.Reasoning))
	}
	fmt.Fprintf(out, "%s: %s\n", label, indent(ch.Content))
	for _, tc := range ch.ToolCalls {
		fmt.Fprintf(out, "  → %s(%s)\n", tc.Name, tc.Arguments)
	}
	fmt.Fprintf(out, "  [%d tokens, finish %s]\n", len(ch.TokenIDs), dash(ch.FinishReason))
}

func indent(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n    ") }

func tracesStats(ctx context.Context, s *capture.Store, out io.Writer) error {
	byState := map[capture.State]int{}
	calls, drift, rewarded := 0, 0, 0
	causes := map[string]int{}
	err := s.Sessions(ctx, capture.ExportFilter{}, func(rec *capture.Session) error {
		byState[rec.State]++
		calls += rec.Calls
		drift += rec.Drift
		for _, d := range rec.Drifts {
			causes[d.Cause]++
		}
		if len(rec.Rewards) > 0 {
			rewarded++
		}
		return nil
	})
	if err != nil {
		return err
	}
	last, acked, err := s.Cursor(ctx)
	if err != nil {
		return err
	}
	lsm, vlog := s.DB().Size()
	fmt.Fprintf(out, "sessions:")
	for _, st := range capture.States {
		fmt.Fprintf(out, " %s %d", st, byState[st])
	}
	fmt.Fprintf(out, "\ncalls: %d  rewarded sessions: %d  drift: %d", calls, rewarded, drift)
	if drift > 0 {
		var parts []string
		for _, c := range capture.DriftCauses {
			if causes[c] > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", c, causes[c]))
			}
		}
		fmt.Fprintf(out, " (%s)", strings.Join(parts, ", "))
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "ready queue: last cursor %d, acked %d\n", last, acked)
	fmt.Fprintf(out, "store: lsm %d bytes, value log %d bytes\n", lsm, vlog)
	return nil
}

// timeArg parses RFC3339, a date, or a duration meaning that long ago.
type timeArg struct{ t time.Time }

type timeFilter struct{ since, until timeArg }

func (a *timeArg) String() string {
	if a.t.IsZero() {
		return ""
	}
	return a.t.Format(time.RFC3339)
}

func (a *timeArg) Set(v string) (err error) {
	a.t, err = capture.ParseTimeAgo(v, time.Now())
	return err
}
