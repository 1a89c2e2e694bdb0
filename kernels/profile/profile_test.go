package profile

import (
	"errors"
	"strings"
	"testing"

	"github.com/hone-rl/hone/kernels"
	"github.com/hone-rl/hone/kernels/cpu"
)

// TestWallClock: on the CPU backend each call lands in its class with the
// wall clock, results are the backend's, and Reset drops what came before.
func TestWallClock(t *testing.T) {
	be, r := Wrap(cpu.New(1))
	if be.Name() != "cpu" || r.Clock() != ClockWall {
		t.Fatalf("name %q clock %q", be.Name(), r.Clock())
	}
	if _, ok := be.(kernels.Sampler); !ok {
		t.Errorf("the CPU backend samples; its wrapper must too")
	}
	a := be.Upload([]float32{1, 2, 3, 4}, 2, 2)
	c := be.New(2, 2)
	be.MatMul(c, a, a, false, false, 1, 0)
	got := make([]float32, 4)
	be.Download(got, c)
	if got[0] != 7 || got[3] != 22 {
		t.Fatalf("matmul through the wrapper: %v", got)
	}
	w := be.Upload([]float32{1, 1}, 2)
	be.RMSNorm(c, a, w, 1e-6)
	q := be.New(4, 8)
	out := be.New(4, 8)
	be.Attention(out, q, q, q, kernels.Attn{Heads: 2, KVHeads: 2, HeadDim: 4, Scale: 0.5})
	be.AdamWStep(w, w, be.New(2), be.New(2), kernels.AdamW{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, Step: 1})
	be.Add(c, c, c)
	p := r.Snapshot()
	want := map[Class]int{Memory: 8, GEMM: 1, Norm: 1, AttentionFwd: 1, Optimizer: 1, Other: 1}
	for cl, n := range want {
		if p.Stats[cl].Calls != n {
			t.Errorf("%s: %d calls, want %d", cl, p.Stats[cl].Calls, n)
		}
	}
	if p.Stats[AttentionBwd].Calls != 0 || p.Total() <= 0 {
		t.Errorf("profile %+v", p)
	}
	var b strings.Builder
	if err := p.WriteTable(&b, 2*p.Total()); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", b.String())
	for _, s := range []string{"GEMM", "attention fwd", "optimizer", "all classes (wall)", "untimed"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("table lacks %q", s)
		}
	}
	if strings.Contains(b.String(), "attention bwd") {
		t.Errorf("a class with no calls is listed")
	}
	r.Reset()
	if p := r.Snapshot(); p.Total() != 0 || p.Stats[GEMM].Calls != 0 {
		t.Errorf("after Reset: %+v", p)
	}
	if Unwrap(be) == be || Unwrap(be).Name() != "cpu" {
		t.Errorf("Unwrap")
	}
}

// fakeEvents is a CPU backend with device events whose clock is a counter:
// each event reads one millisecond later than the one before.
type fakeEvents struct {
	kernels.Backend
	now       int
	live      int
	failAfter int // RecordEvent fails from this event on (0: never)
}

type fakeEvent struct{ at int }

func (f *fakeEvents) RecordEvent() (Event, error) {
	f.now++
	if f.failAfter > 0 && f.now >= f.failAfter {
		return nil, errors.New("cudaEventRecord: out of memory")
	}
	f.live++
	return &fakeEvent{f.now}, nil
}

func (f *fakeEvents) EventSeconds(a, b Event) (float64, error) {
	return float64(b.(*fakeEvent).at-a.(*fakeEvent).at) / 1e3, nil
}

func (f *fakeEvents) FreeEvent(Event) { f.live-- }

// TestEvents: with a backend that has device events, each operation is a
// pair of events read at Snapshot, every event is freed, and a failing
// event leaves the calls counted and the error reported.
func TestEvents(t *testing.T) {
	f := &fakeEvents{Backend: cpu.New(1)}
	be, r := Wrap(f)
	if r.Clock() != ClockEvents {
		t.Fatalf("clock %q", r.Clock())
	}
	x := be.New(8)
	for i := 0; i < 3; i++ {
		be.Scale(x, x, 2)
	}
	be.MatMul(be.New(1, 1), be.New(1, 1), be.New(1, 1), false, false, 1, 0)
	p := r.Snapshot()
	if p.Stats[Other].Calls != 3 || p.Stats[GEMM].Calls != 1 || p.Stats[Memory].Calls != 4 {
		t.Fatalf("calls %+v", p.Stats)
	}
	// Each pair is consecutive: 1 ms per operation.
	if got := p.Stats[Other].Seconds; got < 0.0029 || got > 0.0031 {
		t.Errorf("other: %g s, want 0.003", got)
	}
	if f.live != 0 {
		t.Errorf("%d events not freed", f.live)
	}
	f.failAfter = f.now + 2
	be.Scale(x, x, 2)
	be.Scale(x, x, 2)
	p = r.Snapshot()
	if p.Err == nil || p.Stats[Other].Calls != 5 {
		t.Errorf("after a failing event: calls %d err %v", p.Stats[Other].Calls, p.Err)
	}
	var b strings.Builder
	if err := p.WriteTable(&b, 1); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "device idle") || !strings.Contains(b.String(), "partial") {
		t.Errorf("table:\n%s", b.String())
	}
	if f.live != 0 {
		t.Errorf("%d events not freed after the failure", f.live)
	}
}

// TestScale: per-step figures round calls to the nearest whole number.
func TestScale(t *testing.T) {
	var p Profile
	p.Stats[GEMM] = Stat{Class: GEMM, Calls: 7, Seconds: 3}
	q := p.Scale(2)
	if q.Stats[GEMM].Calls != 4 || q.Stats[GEMM].Seconds != 1.5 {
		t.Errorf("%+v", q.Stats[GEMM])
	}
}

// TestOff: with timing off nothing is recorded, and events are not made.
func TestOff(t *testing.T) {
	f := &fakeEvents{Backend: cpu.New(1)}
	be, r := Wrap(f)
	r.SetOn(false)
	x := be.New(4)
	be.Scale(x, x, 2)
	if p := r.Snapshot(); p.Stats[Other].Calls != 0 || p.Stats[Memory].Calls != 0 || f.now != 0 {
		t.Errorf("off: %+v, %d events", p.Stats, f.now)
	}
	r.SetOn(true)
	be.Scale(x, x, 2)
	if p := r.Snapshot(); p.Stats[Other].Calls != 1 {
		t.Errorf("on again: %+v", p.Stats)
	}
}
