package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hone-rl/hone/capture"
)

func init() {
	register("export", "export trajectories and steps as JSONL or Parquet (stop hone serve first)", runExport)
}

func runExport(ctx context.Context, args []string) error {
	fs := newFlags("export", "export [flags]",
		"Writes the captured trajectories and steps as JSONL or Parquet rows. It opens the store itself:\n"+
			"stop hone serve first (or read GET /v1/experiences from its control plane).")
	data := fs.String("data", "./data", "hone data directory (the store is DATA/capture)")
	format := fs.String("format", "jsonl", "jsonl or parquet")
	outPath := fs.String("out", "-", "output file (- for stdout)")
	kinds := fs.String("kind", "trajectory,step", "row kinds: trajectory, step or trajectory,step")
	states := fs.String("state", "", "comma-separated session states (default: all)")
	task := fs.String("task", "", "only sessions of this task (X-Hone-Task / Trinity task_id)")
	var filt timeFilter
	fs.Var(&filt.since, "since", "sessions created at or after (RFC3339, 2006-01-02 or a duration ago like 24h)")
	fs.Var(&filt.until, "until", "sessions created before (same forms as --since)")
	if err := fs.parse(args); err != nil {
		return err
	}
	f := capture.ExportFilter{Since: filt.since.t, Until: filt.until.t, Task: *task}
	for _, k := range strings.Split(*kinds, ",") {
		switch strings.TrimSpace(k) {
		case capture.KindTrajectory:
			f.Trajectories = true
		case capture.KindStep:
			f.Steps = true
		default:
			return usagef("--kind %q: want trajectory, step or trajectory,step", k)
		}
	}
	for _, st := range strings.Split(*states, ",") {
		if st = strings.TrimSpace(st); st == "" {
			continue
		}
		s, err := capture.ParseState(st)
		if err != nil {
			return err
		}
		f.States = append(f.States, s)
	}
	out, closeOut, err := openOut(*outPath)
	if err != nil {
		return err
	}
	w, err := capture.NewRowWriter(out, *format)
	if err != nil {
		return err
	}
	s, err := openCapture(*data)
	if err != nil {
		return err
	}
	defer s.Close()
	n := 0
	err = s.Export(ctx, f, func(r *capture.Row) error { n++; return w.Write(r) })
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if cerr := closeOut(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	fmt.Fprintf(os.Stderr, "exported %d rows\n", n)
	return nil
}

func openOut(path string) (io.Writer, func() error, error) {
	if path == "-" {
		return os.Stdout, func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, fmt.Errorf("create %s: %w", path, err)
	}
	return f, f.Close, nil
}
