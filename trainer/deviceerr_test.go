package trainer

import (
	"errors"
	"slices"
	"testing"

	"github.com/hone-rl/hone/kernels/cpu"
	"github.com/hone-rl/hone/model"
)

// erring is the CPU backend with a device error injected through Err, as a
// device backend reports an out-of-memory or a fault.
type erring struct {
	*cpu.Backend
	err error
}

func (e *erring) Err() error { return e.err }
func (e *erring) ClearErr()  { e.err = nil }

// TestOptimizeRefusesDeviceError: with the backend's error set, the
// optimizer step returns it and leaves the parameters as they were.
func TestOptimizeRefusesDeviceError(t *testing.T) {
	be := &erring{Backend: cpu.New(1)}
	m, err := model.New(microConfig(), be, 3)
	if err != nil {
		t.Fatal(err)
	}
	a, err := model.NewAdapter(m, "test", model.AdapterConfig{Rank: 4, Alpha: 8}, 3)
	if err != nil {
		t.Fatal(err)
	}
	p := NewPolicy(m, a)
	params := p.params()
	before := make([][]float32, len(params))
	for i, prm := range params {
		before[i] = make([]float32, prm.Tensor.Len())
		be.Download(before[i], prm.Tensor)
		be.Fill(p.gradParams()[i].Tensor, 0.5)
	}
	fault := errors.New("illegal address")
	be.err = fault
	if _, err := p.optimize(1e-2, 1, AdamWOptions{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}); !errors.Is(err, fault) {
		t.Fatalf("optimize with a device error: %v", err)
	}
	for i, prm := range params {
		after := make([]float32, prm.Tensor.Len())
		be.Download(after, prm.Tensor)
		if !slices.Equal(after, before[i]) {
			t.Errorf("%s changed under a device error", prm.Name)
		}
	}
}
