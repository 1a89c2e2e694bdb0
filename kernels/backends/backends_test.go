package backends

import (
	"errors"
	"strings"
	"testing"
)

// TestOpen: what each name opens in this build (the tests run in the
// default cgo build without the cuda tag: cuda is unavailable and says why,
// auto falls back to cpu, emulated opens the shim).
func TestOpen(t *testing.T) {
	cases := []struct {
		name, variant string
		wantName      string // "" = an error
		unavailable   bool   // the error wraps ErrUnavailable
		errHas        string
		fallback      bool
	}{
		{name: "cpu", wantName: "cpu"},
		{name: "cpu", variant: "generic", wantName: "cpu"},
		{name: "cpu", variant: "bogus", errHas: "backend cpu"},
		{name: "cuda", unavailable: true, errHas: "built without CUDA support"},
		{name: "emulated", wantName: "emulated"},
		{name: "emulated", variant: "readable", wantName: "emulated"},
		{name: "emulated", variant: "bogus", errHas: "backend emulated"},
		{name: "auto", wantName: "cpu", fallback: true},
		{name: "gpu", errHas: "want one of cpu, cuda, emulated, auto"},
	}
	if CUDABuilt() {
		t.Skip("these cases describe a build without -tags cuda")
	}
	for _, tc := range cases {
		t.Run(tc.name+"/"+tc.variant, func(t *testing.T) {
			o, err := Open(tc.name, tc.variant)
			if tc.wantName == "" {
				if err == nil {
					o.Close()
					t.Fatalf("opened %s, want an error", o.Label())
				}
				if !strings.Contains(err.Error(), tc.errHas) || errors.Is(err, ErrUnavailable) != tc.unavailable {
					t.Fatalf("error %q: want it to say %q (unavailable: %v)", err, tc.errHas, tc.unavailable)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer o.Close()
			if o.Name != tc.wantName || o.Backend == nil || (o.Fallback != "") != tc.fallback {
				t.Fatalf("opened %+v, want %s (fallback %v)", o, tc.wantName, tc.fallback)
			}
			if tc.fallback && !strings.Contains(o.Fallback, "built without CUDA support") {
				t.Errorf("fallback reason %q does not say why", o.Fallback)
			}
			// A quick op, so the backend is really there.
			x := o.Backend.Upload([]float32{1, 2, 3}, 3)
			got := make([]float32, 3)
			o.Backend.Scale(x, x, 2)
			o.Backend.Download(got, x)
			if got[2] != 6 {
				t.Errorf("scale on %s: %v", o.Label(), got)
			}
		})
	}
}
