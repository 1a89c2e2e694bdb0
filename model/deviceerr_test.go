package model

import (
	"context"
	"errors"
	"testing"

	"github.com/hone-rl/hone/kernels/cpu"
)

// erring is the CPU backend with a device error injected through Err, as a
// device backend reports an out-of-memory or a fault.
type erring struct {
	*cpu.Backend
	err error
}

func (e *erring) Err() error { return e.err }
func (e *erring) ClearErr()  { e.err = nil }

// TestDeviceErrorsReturned: Forward, ForwardTrain and Backward return the
// backend's recorded error instead of undefined results.
func TestDeviceErrorsReturned(t *testing.T) {
	be := &erring{Backend: cpu.New(1)}
	m, err := New(testConfig(ArchQwen3), be, 7)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	act, err := m.ForwardTrain(ctx, [][]int32{{1, 2, 3}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer act.Free()
	oom := errors.New("out of memory")
	be.err = oom
	if _, err := m.Forward(ctx, []Step{{Tokens: []int32{1, 2}, Cache: m.NewCache()}}); !errors.Is(err, oom) {
		t.Errorf("Forward: %v", err)
	}
	if _, err := m.ForwardTrain(ctx, [][]int32{{1, 2, 3}}, nil); !errors.Is(err, oom) {
		t.Errorf("ForwardTrain: %v", err)
	}
	if err := m.Backward(ctx, act, [][]float32{{1, 1}}, m.NewGrads(nil, true)); !errors.Is(err, oom) {
		t.Errorf("Backward: %v", err)
	}
	be.ClearErr()
	if _, err := m.Forward(ctx, []Step{{Tokens: []int32{1, 2}, Cache: m.NewCache()}}); err != nil {
		t.Errorf("Forward after ClearErr: %v", err)
	}
}
