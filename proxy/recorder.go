package proxy

import (
	"sync"

	"github.com/hone-rl/hone/capture"
)

// Recorder receives captured calls. The capture package implements it on
// Badger; MemRecorder keeps calls in memory.
type Recorder interface {
	// Admit is called on the hot path before a call goes upstream. It
	// resolves the session and decides whether the call is captured. It
	// must not do disk I/O. a.Body is only valid during the call.
	Admit(a *capture.Admission) capture.Verdict
	// Record hands over a finished captured call. It must not block; the
	// recorder owns c afterwards. When c.Durable is set the recorder sends
	// it one value once the call (and its header reward/commit) is stored.
	Record(c *capture.Call)
	// Abandon says that the call Admit captured as callID (in session, of
	// owner) will never be recorded: no engine answered it, or its request
	// could not be rewritten. The recorder releases what it holds for it.
	Abandon(callID, session, owner string)
}

// MemRecorder is an in-memory Recorder that captures every call. Sessions
// are the agent's X-Hone-Session or a fresh id.
type MemRecorder struct {
	mu    sync.Mutex
	calls []*capture.Call
	// abandoned are the ids of calls admitted, captured and never recorded
	abandoned []string
	added     chan struct{}
}

// NewMemRecorder returns an empty MemRecorder.
func NewMemRecorder() *MemRecorder { return &MemRecorder{added: make(chan struct{}, 1024)} }

// Admit captures everything.
func (m *MemRecorder) Admit(a *capture.Admission) capture.Verdict {
	s := a.Hone.Session
	if s == "" {
		s = capture.NewID()
	}
	return capture.Verdict{Session: s, Capture: true}
}

// Record stores c (in memory: durable at once).
func (m *MemRecorder) Record(c *capture.Call) {
	m.mu.Lock()
	m.calls = append(m.calls, c)
	m.mu.Unlock()
	if c.Durable != nil {
		c.Durable <- nil
	}
	select {
	case m.added <- struct{}{}:
	default:
	}
}

// Abandon notes the call id (Abandoned); it holds nothing to release.
func (m *MemRecorder) Abandon(callID, session, owner string) {
	m.mu.Lock()
	m.abandoned = append(m.abandoned, callID)
	m.mu.Unlock()
}

// Abandoned returns the ids of the calls abandoned so far.
func (m *MemRecorder) Abandoned() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.abandoned...)
}

// Calls returns the calls recorded so far.
func (m *MemRecorder) Calls() []*capture.Call {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*capture.Call(nil), m.calls...)
}

// Added is signalled after each Record (best effort), for tests.
func (m *MemRecorder) Added() <-chan struct{} { return m.added }
