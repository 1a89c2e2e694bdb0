// Package backends opens a kernels.Backend by name: cpu, cuda (a GPU, in a
// binary built with -tags cuda), emulated (the CUDA kernels on the host
// through kernels/cuda's shim, in a cgo build without the tag) or auto
// (cuda when built with it and a device answers, else cpu). hone selftest,
// hone serve --train and bench/gpu choose their backend through it.
package backends

import (
	"errors"
	"fmt"

	"github.com/hone-rl/hone/kernels"
	"github.com/hone-rl/hone/kernels/cpu"
)

// Backend names.
const (
	CPU      = "cpu"
	CUDA     = "cuda"
	Emulated = "emulated"
	Auto     = "auto"
)

// ErrUnavailable is wrapped by Open's error when the backend exists but not
// in this binary or not on this machine (no CUDA build, no GPU, no cgo).
var ErrUnavailable = errors.New("backend unavailable")

// Opened is an open backend.
type Opened struct {
	Backend kernels.Backend
	// Name is what was opened: cpu, cuda or emulated (never auto).
	Name    string
	Variant string // the kernel variant ("" = the backend's own choice)
	// Fallback says why auto chose cpu ("" when it did not fall back).
	Fallback string
	close    func()
}

// Close releases the backend's device context (a no-op for cpu).
func (o Opened) Close() {
	if o.close != nil {
		o.close()
	}
}

// Label is "name" or "name/variant".
func (o Opened) Label() string {
	if o.Variant == "" {
		return o.Name
	}
	return o.Name + "/" + o.Variant
}

// CUDABuilt reports whether this binary has the real CUDA backend (-tags cuda).
func CUDABuilt() bool { return cudaBuilt }

// Open opens the backend called name with the kernel variant ("" = the
// default: the CPU's fastest for this machine, the CUDA kernels' fast ones).
// cuda in a binary without it, or on a machine without a GPU, and emulated
// in a binary without it, fail with an error wrapping ErrUnavailable that
// says why; auto then opens cpu and says why in Fallback.
func Open(name, variant string) (Opened, error) {
	switch name {
	case CPU:
		if variant == "" {
			return Opened{Backend: cpu.New(0), Name: CPU}, nil
		}
		be, err := cpu.NewVariant(0, variant)
		if err != nil {
			return Opened{}, fmt.Errorf("backend cpu: %w", err)
		}
		return Opened{Backend: be, Name: CPU, Variant: variant}, nil
	case CUDA, Emulated:
		if variant == "" {
			variant = defaultCUDAVariant
		}
		open := openCUDA
		if name == Emulated {
			open = openEmulated
		}
		be, closeFn, err := open(variant)
		if err != nil {
			return Opened{}, fmt.Errorf("backend %s: %w", name, err)
		}
		return Opened{Backend: be, Name: name, Variant: variant, close: closeFn}, nil
	case Auto:
		o, err := Open(CUDA, variant)
		if err == nil {
			return o, nil
		}
		if !errors.Is(err, ErrUnavailable) {
			return Opened{}, err
		}
		c, cerr := Open(CPU, "")
		if cerr != nil {
			return Opened{}, cerr
		}
		c.Fallback = err.Error()
		return c, nil
	}
	return Opened{}, fmt.Errorf("backend %q: want one of cpu, cuda, emulated, auto", name)
}

// defaultCUDAVariant is kernels/cuda's VariantFast (named here so that
// builds without cgo, which have no kernels/cuda backend, still compile).
const defaultCUDAVariant = "fast"
