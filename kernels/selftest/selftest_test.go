package selftest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/hone-rl/hone/kernels"
	"github.com/hone-rl/hone/kernels/conformance"
	"github.com/hone-rl/hone/kernels/cpu"
	"github.com/hone-rl/hone/kernels/selftest"
)

// nGroups is how many conformance groups (rows) a report has, nParity how
// many LoRA-step rows: loss, grads and adamw for two architectures, with
// float32 base weights, bf16 ones, and bf16 ones with autocast.
var (
	nGroups = len(conformance.Groups(cpu.New(1)))
	nParity = 18
)

// brokenRMSNorm is the CPU backend with RMSNorm's output 1% too large: a
// wrong kernel that still writes every element.
type brokenRMSNorm struct{ kernels.Backend }

func (b brokenRMSNorm) RMSNorm(out, x, w kernels.Tensor, eps float32) {
	b.Backend.RMSNorm(out, x, w, eps)
	b.Backend.Scale(out, out, 1.01)
}

// truncatingConvert is the CPU backend with a Convert to bf16 that
// truncates instead of rounding to nearest even: what autocast's rounding
// could get wrong.
type truncatingConvert struct{ kernels.Backend }

func (b truncatingConvert) Convert(dst, src kernels.Tensor) {
	if dst.DType() != kernels.BF16 || src.DType() != kernels.F32 {
		b.Backend.Convert(dst, src)
		return
	}
	h := make([]float32, src.Len())
	b.Download(h, src)
	for i, v := range h {
		h[i] = math.Float32frombits(math.Float32bits(v) &^ 0xffff)
	}
	u := b.Upload(h, src.Shape()...)
	b.Backend.Convert(dst, u) // exact: every value is a bf16 already
	b.Free(u)
}

// panickyAttention panics in its float32 attention forward, as a shape
// check would (the bf16 attention, its own conformance group, works).
type panickyAttention struct{ kernels.Backend }

func (p panickyAttention) Attention(out, q, k, v kernels.Tensor, a kernels.Attn) {
	if a.BF16 {
		p.Backend.Attention(out, q, k, v, a)
		return
	}
	panic("attention: deliberately broken")
}

// faultySiLU records a device error in SiLU, as the CUDA backend records a
// failed launch, and leaves the output unwritten.
type faultySiLU struct {
	kernels.Backend
	err *error
}

func (b faultySiLU) SiLU(out, x kernels.Tensor) {
	if *b.err == nil {
		*b.err = errors.New("silu: launch failed (deliberately)")
	}
}
func (b faultySiLU) Err() error { return *b.err }
func (b faultySiLU) ClearErr()  { *b.err = nil }

// TestSelftest: the CPU backend passes; a backend with one broken op fails
// the conformance group of that op (and only that group), and Report.Err
// names it.
func TestSelftest(t *testing.T) {
	ctx := context.Background()
	newCPU := func() kernels.Backend {
		be, err := cpu.NewVariant(1, cpu.VariantGeneric)
		if err != nil {
			t.Fatal(err)
		}
		return be
	}
	cases := []struct {
		name     string
		be       func() kernels.Backend
		wantFail string // the conformance group that must fail; "" = everything passes
		wantMsg  string // in that group's failure
		parity   bool   // the LoRA step parity fails too
		// parityOnly, when set, is the prefix of every failing parity row.
		parityOnly string
	}{
		{"cpu", newCPU, "", "", false, ""},
		{"broken RMSNorm", func() kernels.Backend { return brokenRMSNorm{newCPU()} }, "conformance/RMSNorm", "rmsnorm", true, ""},
		{"panicking Attention", func() kernels.Backend { return panickyAttention{newCPU()} }, "conformance/Attention",
			"panic: attention: deliberately broken", true, ""},
		{"device error in SiLU", func() kernels.Backend { return faultySiLU{newCPU(), new(error)} }, "conformance/Activations",
			"silu: launch failed", false, ""},
		{"truncating Convert", func() kernels.Backend { return truncatingConvert{newCPU()} }, "conformance/Convert",
			"round to nearest even", true, "lora-step-autocast/"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := selftest.Run(ctx, tc.be())
			var table strings.Builder
			if err := rep.WriteTable(&table); err != nil {
				t.Fatal(err)
			}
			t.Logf("\n%s", table.String())
			conf, parity := 0, 0
			for _, r := range rep.Results {
				switch {
				case strings.HasPrefix(r.Name, "conformance/"):
					conf++
				case strings.HasPrefix(r.Name, "lora-step"):
					parity++
				}
				if r.Pass && r.Failure != "" || !r.Pass && r.Failure == "" {
					t.Errorf("%s: pass %v with failure %q", r.Name, r.Pass, r.Failure)
				}
			}
			if conf != nGroups || parity != nParity {
				t.Errorf("%d conformance rows (want %d), %d lora-step rows (want %d)", conf, nGroups, parity, nParity)
			}
			if tc.wantFail == "" {
				if err := rep.Err(); err != nil || !rep.Passed() {
					t.Fatalf("failed: %v", err)
				}
				if !strings.Contains(table.String(), fmt.Sprintf("PASS: %d checks", nGroups+nParity)) {
					t.Errorf("table has no PASS line")
				}
				return
			}
			var failedConf []string
			parityFailed := false
			for _, n := range rep.Failed() {
				if strings.HasPrefix(n, "conformance/") {
					failedConf = append(failedConf, n)
				} else {
					parityFailed = true
					if !strings.HasPrefix(n, tc.parityOnly) {
						t.Errorf("parity row %s failed, want only %s rows to", n, tc.parityOnly)
					}
				}
			}
			if len(failedConf) != 1 || failedConf[0] != tc.wantFail {
				t.Errorf("failed conformance groups %v, want only %s", failedConf, tc.wantFail)
			}
			if parityFailed != tc.parity {
				t.Errorf("lora-step parity failed: %v, want %v", parityFailed, tc.parity)
			}
			err := rep.Err()
			if err == nil || !strings.Contains(err.Error(), tc.wantFail) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("Err() = %v, want it to name %s and say %q", err, tc.wantFail, tc.wantMsg)
			}
			if !strings.Contains(table.String(), "FAIL: ") || !strings.Contains(table.String(), tc.wantFail) {
				t.Errorf("table does not name %s", tc.wantFail)
			}
		})
	}
}

// TestReportJSON: the JSON form names the failures and writes NaN and
// infinite errors as null (JSON has neither).
func TestReportJSON(t *testing.T) {
	be, err := cpu.NewVariant(1, cpu.VariantGeneric)
	if err != nil {
		t.Fatal(err)
	}
	rep := selftest.Report{Backend: "x", Results: selftest.Conformance(context.Background(), brokenRMSNorm{be})}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Backend string
		Pass    bool
		Failed  []string
		Results []struct {
			Name      string
			Pass      bool
			MaxErr    *float64 `json:"max_error"`
			Tolerance *float64
			Worst     string
		}
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if got.Pass || len(got.Failed) != 1 || got.Failed[0] != "conformance/RMSNorm" || len(got.Results) != nGroups {
		t.Fatalf("%s", b)
	}
	for _, r := range got.Results {
		if r.Name == "conformance/RMSNorm" && (r.MaxErr == nil || r.Tolerance == nil || *r.MaxErr <= *r.Tolerance || r.Worst == "") {
			t.Errorf("RMSNorm row %+v: want its worst error over its tolerance", r)
		}
	}
}
