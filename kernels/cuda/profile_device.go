//go:build cuda

package cuda

/*
#include <stdlib.h>
#include "csrc/profile.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/hone-rl/hone/kernels/profile"
)

// The real backend times operations with CUDA events on its stream
// (kernels/profile.Events; csrc/profile.cu). Freed events go back to a pool
// (Backend.events) and are recorded again, so a profiled step creates no
// events once warm.

var _ profile.Events = (*Backend)(nil)

func init() { closeEvents = (*Backend).destroyEvents }

// cudaEvent is a recorded event.
type cudaEvent struct{ p unsafe.Pointer }

// RecordEvent implements profile.Events.
func (b *Backend) RecordEvent() (profile.Event, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx == nil {
		return nil, errors.New("kernels/cuda: event on a closed backend")
	}
	var p unsafe.Pointer
	if n := len(b.events); n > 0 {
		p, b.events = b.events[n-1], b.events[:n-1]
	}
	var msg [256]C.char
	if C.hone_event_record(b.ctx, &p, &msg[0], C.size_t(len(msg))) != 0 {
		C.hone_event_destroy(p)
		return nil, fmt.Errorf("kernels/cuda: %s", C.GoString(&msg[0]))
	}
	return &cudaEvent{p}, nil
}

// EventSeconds implements profile.Events. It waits for end without the
// backend's lock (other calls may queue work meanwhile).
func (b *Backend) EventSeconds(start, end profile.Event) (float64, error) {
	s, e := start.(*cudaEvent), end.(*cudaEvent)
	var ms C.float
	var msg [256]C.char
	if C.hone_event_ms(s.p, e.p, &ms, &msg[0], C.size_t(len(msg))) != 0 {
		return 0, fmt.Errorf("kernels/cuda: %s", C.GoString(&msg[0]))
	}
	return float64(ms) / 1e3, nil
}

// FreeEvent implements profile.Events: the event returns to the pool.
func (b *Backend) FreeEvent(ev profile.Event) {
	e, ok := ev.(*cudaEvent)
	if !ok || e.p == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx == nil {
		C.hone_event_destroy(e.p)
		return
	}
	b.events = append(b.events, e.p)
	e.p = nil
}

// destroyEvents releases the pool (Close, with b.mu held).
func (b *Backend) destroyEvents() {
	for _, p := range b.events {
		C.hone_event_destroy(p)
	}
	b.events = nil
}
