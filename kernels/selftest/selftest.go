// Package selftest checks a kernels.Backend against the CPU backend outside
// `go test`: the conformance suite (kernels/conformance, every op against a
// float64 reference) and the LoRA-step parity (a forward, backward and AdamW
// step of a small Qwen3 and Llama equal to the CPU backend's within 1e-5
// relative). It returns a table, one row per conformance group and per
// parity check, so that `hone selftest` can print it and `hone serve
// --train` can refuse a device that fails, naming the op.
//
// It is how the CUDA backend checks itself on the first GPU it meets; on
// machines without one it runs against the emulated CUDA backend and the CPU
// backend.
package selftest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hone-rl/hone/kernels"
	"github.com/hone-rl/hone/kernels/conformance"
)

// Result is one row of the table.
type Result struct {
	// Name is "conformance/OP" (a group of the suite: the op and its
	// backward), "lora-step/ARCH/WHAT" (loss, grads, adamw) or
	// "lora-step-bf16/ARCH/WHAT" (the same with bf16 base weights) or
	// "lora-step-autocast/ARCH/WHAT" (bf16 base weights with autocast).
	Name string
	Pass bool
	// MaxErr and Tol are the worst check's error and its tolerance (the
	// check with the largest error/tolerance ratio, named by Worst): absolute
	// per element for the conformance suite (tolerance = tol + |want|*eps),
	// relative in the Euclidean norm for the LoRA step. NaN when nothing
	// was measured.
	MaxErr, Tol float64
	Worst       string
	Duration    time.Duration
	// Failure is the first failure message ("" when it passed).
	Failure string
}

// Report is the selftest of one backend.
type Report struct {
	Backend string // the backend's Name (and variant, when the caller adds it)
	Results []Result
}

// Passed reports whether every row passed (and there is at least one).
func (r Report) Passed() bool { return len(r.Results) > 0 && len(r.Failed()) == 0 }

// Failed returns the names of the failing rows, in table order.
func (r Report) Failed() []string {
	var out []string
	for _, res := range r.Results {
		if !res.Pass {
			out = append(out, res.Name)
		}
	}
	return out
}

// Err is nil when every row passed, else an error naming each failing row
// and its first failure message.
func (r Report) Err() error {
	if len(r.Results) == 0 {
		return fmt.Errorf("selftest of %s: nothing ran", r.Backend)
	}
	var msgs []string
	for _, res := range r.Results {
		if !res.Pass {
			msgs = append(msgs, res.Name+" ("+res.Failure+")")
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return fmt.Errorf("selftest of %s failed: %s", r.Backend, strings.Join(msgs, "; "))
}

// Run runs the conformance suite and the LoRA-step parity against be and
// returns the table. It stops early (with the rows so far) when ctx ends.
func Run(ctx context.Context, be kernels.Backend) Report {
	rep := Report{Backend: be.Name(), Results: Conformance(ctx, be)}
	if ctx.Err() == nil {
		rep.Results = append(rep.Results, LoRAParity(ctx, be)...)
	}
	return rep
}

// Conformance runs each group of the conformance suite against be and
// returns one row per group. A group that panics fails with the panic's
// message; the backend's sticky error is cleared after each group.
func Conformance(ctx context.Context, be kernels.Backend) []Result {
	var rows []Result
	for _, g := range conformance.Groups(be) {
		if ctx.Err() != nil {
			break
		}
		rows = append(rows, runGroup(be, g))
	}
	return rows
}

func runGroup(be kernels.Backend, g conformance.Group) Result {
	rec := &recorder{worst: -1, res: Result{Name: "conformance/" + g.Name, MaxErr: math.NaN(), Tol: math.NaN()}}
	start := time.Now()
	func() {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(stopGroup); !ok {
					rec.Errorf("panic: %v", r)
					be.ClearErr()
				}
			}
		}()
		g.Run(rec)
	}()
	rec.res.Duration = time.Since(start)
	rec.res.Pass = len(rec.errs) == 0
	if !rec.res.Pass {
		rec.res.Failure = rec.errs[0]
		if n := len(rec.errs); n > 1 {
			// The last message is often the telling one: a device error
			// is reported after the checks that saw its unwritten outputs.
			rec.res.Failure += fmt.Sprintf(" (+%d more; last: %s)", n-1, rec.errs[n-1])
		}
	}
	return rec.res
}

// recorder is the conformance.T (and conformance.Meter) of one group.
type recorder struct {
	res   Result
	worst float64 // the largest error/tolerance ratio so far
	errs  []string
}

// stopGroup is what Fatalf panics with; runGroup recovers it.
type stopGroup struct{}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	panic(stopGroup{})
}

func (r *recorder) Measure(check string, maxErr, tol float64) {
	q := maxErr / tol
	switch {
	case math.IsNaN(maxErr):
		q = math.Inf(1)
	case maxErr == 0:
		q = 0
	}
	if q > r.worst {
		r.worst, r.res.MaxErr, r.res.Tol, r.res.Worst = q, maxErr, tol, check
	}
}

// WriteTable prints the report as an aligned table and a summary line.
func (r Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "backend %s\n", r.Backend)
	fmt.Fprintln(tw, "check\tresult\tmax error\ttolerance\tworst\ttime\tfirst failure")
	for _, res := range r.Results {
		verdict := "ok"
		if !res.Pass {
			verdict = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", res.Name, verdict, num(res.MaxErr, res.Worst), num(res.Tol, res.Worst), res.Worst,
			res.Duration.Round(time.Millisecond), oneLine(res.Failure))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	var err error
	if failed := r.Failed(); len(failed) > 0 {
		_, err = fmt.Fprintf(w, "FAIL: %d of %d checks failed: %s\n", len(failed), len(r.Results), strings.Join(failed, ", "))
	} else {
		_, err = fmt.Fprintf(w, "PASS: %d checks\n", len(r.Results))
	}
	if err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// num formats an error or tolerance: "-" when nothing was measured.
func num(v float64, worst string) string {
	if math.IsNaN(v) && worst == "" {
		return "-"
	}
	return fmt.Sprintf("%.3g", v)
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 200 {
		s = s[:197] + "..."
	}
	return s
}

// jsonResult is Result on the wire: durations in seconds, non-finite
// numbers as null (JSON has no NaN or infinity; "max_error": null with
// "pass": false means a NaN or an infinite error).
type jsonResult struct {
	Name      string   `json:"name"`
	Pass      bool     `json:"pass"`
	MaxErr    *float64 `json:"max_error"`
	Tol       *float64 `json:"tolerance"`
	Worst     string   `json:"worst,omitempty"`
	Seconds   float64  `json:"seconds"`
	Failure   string   `json:"failure,omitempty"`
	NonFinite string   `json:"max_error_text,omitempty"`
}

func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// MarshalJSON writes the report as {"backend", "pass", "failed", "results"}.
func (r Report) MarshalJSON() ([]byte, error) {
	out := struct {
		Backend string       `json:"backend"`
		Pass    bool         `json:"pass"`
		Failed  []string     `json:"failed"`
		Results []jsonResult `json:"results"`
	}{Backend: r.Backend, Pass: r.Passed(), Failed: r.Failed(), Results: []jsonResult{}}
	if out.Failed == nil {
		out.Failed = []string{}
	}
	for _, res := range r.Results {
		j := jsonResult{Name: res.Name, Pass: res.Pass, MaxErr: finite(res.MaxErr), Tol: finite(res.Tol), Worst: res.Worst,
			Seconds: res.Duration.Seconds(), Failure: res.Failure}
		if math.IsInf(res.MaxErr, 0) || math.IsNaN(res.MaxErr) && res.Worst != "" {
			j.NonFinite = fmt.Sprint(res.MaxErr)
		}
		out.Results = append(out.Results, j)
	}
	return json.Marshal(out)
}
