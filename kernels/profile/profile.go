// Package profile times a kernels.Backend's operations by class (attention
// forward and backward, GEMMs, norms, LM head and log-probabilities, the
// optimiser, elementwise and other ops, memory and transfers): a decorator,
// Wrap, that forwards every call to the backend it wraps and records how
// long it took. Nothing is timed unless a backend is wrapped, so it costs
// nothing when off.
//
// Two clocks: a backend whose operations run asynchronously on a device
// stream and implements Events (the real CUDA build, kernels/cuda) is timed
// with a pair of device events around each operation, read back when the
// profile is read (Snapshot, Reset), so the device time of each class is
// measured without a host synchronisation per operation; any other backend
// (cpu, and the CUDA kernels emulated on the host, whose launches are
// synchronous) is timed by the host's wall clock around each call. With
// events, the sum of the classes is the device's busy time; the wall time
// of a step minus that sum is the device's idle time (host work, launch
// gaps).
package profile

import (
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/hone-rl/hone/kernels"
)

// Class is a group of operations timed together.
type Class int

// The classes, in the order tables list them.
const (
	AttentionFwd Class = iota // Attention
	AttentionBwd              // AttentionBackward
	GEMM                      // MatMul (cuBLAS / cuBLASLt on a GPU)
	Norm                      // RMSNorm and its backward
	LMHead                    // TokenLogProbs (chunked LM head + log-prob), LogProbs, CrossEntropy and backwards
	Optimizer                 // AdamWStep
	Other                     // elementwise ops, RoPE, SwiGLU, embedding, reductions, conversions, copies, fills
	Memory                    // allocations, uploads, downloads, index uploads, RoPE tables
	NumClasses
)

var classNames = [NumClasses]string{"attention fwd", "attention bwd", "GEMM", "norms", "LM head + logprob",
	"optimizer", "other ops", "memory + transfers"}

// String names the class as the tables do.
func (c Class) String() string {
	if c < 0 || c >= NumClasses {
		return fmt.Sprintf("class(%d)", int(c))
	}
	return classNames[c]
}

// Event is one device event, recorded by Events.RecordEvent.
type Event any

// Events is a backend whose operations run asynchronously on one device
// stream and which can time them with device events (CUDA events).
type Events interface {
	// RecordEvent records an event on the backend's stream, after the work
	// queued so far.
	RecordEvent() (Event, error)
	// EventSeconds waits for end and returns the device time from start
	// to end, in seconds.
	EventSeconds(start, end Event) (float64, error)
	// FreeEvent releases an event.
	FreeEvent(e Event)
}

// Stat is one class's total.
type Stat struct {
	Class   Class
	Calls   int
	Seconds float64
}

// Profile is what was recorded since the last Reset.
type Profile struct {
	Stats [NumClasses]Stat
	// Clock is "cuda events" or "wall".
	Clock string
	// Err is the first error reading the device events (the times are then
	// partial).
	Err error
}

// Total is the seconds of every class.
func (p Profile) Total() float64 {
	var s float64
	for _, st := range p.Stats {
		s += st.Seconds
	}
	return s
}

// Scale returns p with every call count and time divided by n (per step).
func (p Profile) Scale(n int) Profile {
	if n <= 1 {
		return p
	}
	for i := range p.Stats {
		p.Stats[i].Seconds /= float64(n)
		p.Stats[i].Calls = (p.Stats[i].Calls + n/2) / n
	}
	return p
}

// WriteTable prints one row per class that ran (calls, milliseconds, share
// of the classes' total) and the total; wall, when > 0, is the wall time
// of the same span, and a last row gives what the classes do not cover
// (with device events: the device's idle time).
func (p Profile) WriteTable(w io.Writer, wall float64) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "op class\tcalls\tms\tshare\n")
	total := p.Total()
	for _, st := range p.Stats {
		if st.Calls == 0 {
			continue
		}
		share := 0.0
		if total > 0 {
			share = 100 * st.Seconds / total
		}
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.1f%%\n", st.Class, st.Calls, 1e3*st.Seconds, share)
	}
	fmt.Fprintf(tw, "all classes (%s)\t\t%.3f\t100.0%%\n", p.Clock, 1e3*total)
	if wall > 0 {
		label := "untimed (host between ops)"
		if p.Clock == ClockEvents {
			label = "device idle (launch gaps, host work)"
		}
		fmt.Fprintf(tw, "%s\t\t%.3f\t\n", label, 1e3*max(0, wall-total))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if p.Err != nil {
		if _, err := fmt.Fprintf(w, "(device events: %v; the times above are partial)\n", p.Err); err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
	return nil
}

// Clocks.
const (
	ClockEvents = "cuda events"
	ClockWall   = "wall"
)

// pending is one operation's pair of events, read at the next flush.
type pending struct {
	class      Class
	start, end Event
}

// Recorder accumulates the times of the operations of a wrapped backend.
type Recorder struct {
	off     atomic.Bool // SetOn(false): calls pass through untimed
	mu      sync.Mutex
	ev      Events // nil: wall clock
	pending []pending
	stats   [NumClasses]Stat
	err     error
}

// maxPending bounds the event pairs waiting to be read: beyond it the
// oldest half is read (the device has long finished them, so reading
// them barely waits).
const maxPending = 1 << 16

func newRecorder(be kernels.Backend) *Recorder {
	r := &Recorder{}
	if ev, ok := be.(Events); ok {
		r.ev = ev
	}
	for i := range r.stats {
		r.stats[i].Class = Class(i)
	}
	return r
}

// Clock is ClockEvents or ClockWall.
func (r *Recorder) Clock() string {
	if r.ev != nil {
		return ClockEvents
	}
	return ClockWall
}

// SetOn turns timing on (the default after Wrap) or off: off, a call costs
// the wrapper's forwarding and one atomic load, and nothing is recorded.
func (r *Recorder) SetOn(on bool) { r.off.Store(!on) }

// span is one timed operation.
type span struct {
	class Class
	off   bool
	t0    time.Time
	start Event
}

func (r *Recorder) begin(c Class) span {
	if r.off.Load() {
		return span{off: true}
	}
	if r.ev == nil {
		return span{class: c, t0: time.Now()}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return span{class: c, start: r.record()}
}

func (r *Recorder) end(s span) {
	if s.off {
		return
	}
	if r.ev == nil {
		d := time.Since(s.t0).Seconds()
		r.mu.Lock()
		r.stats[s.class].Calls++
		r.stats[s.class].Seconds += d
		r.mu.Unlock()
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.record()
	if s.start == nil || e == nil {
		r.stats[s.class].Calls++ // counted, not timed (an event failed: r.err says so)
		r.release(s.start)
		r.release(e)
		return
	}
	r.pending = append(r.pending, pending{s.class, s.start, e})
	if len(r.pending) >= maxPending {
		r.flush(len(r.pending) / 2)
	}
}

// record records an event (r.mu held); nil after an error. The Events
// implementation keeps a pool: FreeEvent returns an event to it.
func (r *Recorder) record() Event {
	if r.err != nil {
		return nil
	}
	e, err := r.ev.RecordEvent()
	if err != nil {
		r.err = err
		return nil
	}
	return e
}

func (r *Recorder) release(e Event) {
	if e != nil {
		r.ev.FreeEvent(e)
	}
}

// flush reads the first n pending pairs (r.mu held).
func (r *Recorder) flush(n int) {
	for _, p := range r.pending[:n] {
		if r.err == nil {
			s, err := r.ev.EventSeconds(p.start, p.end)
			if err != nil {
				r.err = err
			} else {
				r.stats[p.class].Seconds += s
			}
		}
		r.stats[p.class].Calls++
		r.release(p.start)
		r.release(p.end)
	}
	r.pending = slices.Delete(r.pending, 0, n)
}

// Snapshot reads every pending event (waiting for the device) and returns
// the totals since the last Reset.
func (r *Recorder) Snapshot() Profile {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ev != nil {
		r.flush(len(r.pending))
	}
	return Profile{Stats: r.stats, Clock: r.Clock(), Err: r.err}
}

// Reset reads and drops what was recorded (a warm-up's operations).
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ev != nil {
		r.flush(len(r.pending))
	}
	r.stats = [NumClasses]Stat{}
	for i := range r.stats {
		r.stats[i].Class = Class(i)
	}
	r.err = nil
}
