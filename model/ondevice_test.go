package model

import (
	"context"
	"math"
	"testing"

	"github.com/hone-rl/hone/kernels"
	"github.com/hone-rl/hone/kernels/cpu"
)

// TestNewOnDevice: the weights made by device copies of one random block
// have New's layout and types (base matrices as asked, norms 1 and float32),
// values of N(0, 0.02)'s spread with no zeros left unfilled, matrices that
// differ from one another, and a model that runs a forward pass.
func TestNewOnDevice(t *testing.T) {
	cfg, err := Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	for _, dt := range []kernels.DType{kernels.F32, kernels.BF16} {
		t.Run(dt.String(), func(t *testing.T) {
			be := cpu.New(1)
			m, err := NewOnDevice(cfg, be, dt, 7)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Free()
			ref, err := New(cfg, be, 7)
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Free()
			got, want := m.Params(), ref.Params()
			if len(got) != len(want) {
				t.Fatalf("%d params, New has %d", len(got), len(want))
			}
			var firsts []float32
			for i, p := range got {
				if p.Name != want[i].Name || !equalShape(p.Tensor.Shape(), want[i].Tensor.Shape()) {
					t.Fatalf("param %d: %s %v, New has %s %v", i, p.Name, p.Tensor.Shape(), want[i].Name, want[i].Tensor.Shape())
				}
				h := make([]float32, p.Tensor.Len())
				be.Download(h, p.Tensor)
				if len(p.Tensor.Shape()) == 1 { // a norm
					if p.Tensor.DType() != kernels.F32 || h[0] != 1 || h[len(h)-1] != 1 {
						t.Errorf("%s: %v, want float32 ones", p.Name, p.Tensor.DType())
					}
					continue
				}
				if p.Tensor.DType() != dt {
					t.Errorf("%s stored %v, want %v", p.Name, p.Tensor.DType(), dt)
				}
				var ss float64
				zeros := 0
				for _, v := range h {
					ss += float64(v) * float64(v)
					if v == 0 {
						zeros++
					}
				}
				if sd := math.Sqrt(ss / float64(len(h))); sd < 0.018 || sd > 0.022 || zeros > len(h)/100 {
					t.Errorf("%s: sd %.4f, %d zeros of %d", p.Name, sd, zeros, len(h))
				}
				firsts = append(firsts, h[0])
			}
			same := 0
			for i := 1; i < len(firsts); i++ {
				if firsts[i] == firsts[0] {
					same++
				}
			}
			if same > len(firsts)/4 {
				t.Errorf("%d of %d matrices start with the same value: offsets not random", same, len(firsts))
			}
			lp, err := m.ForwardTrain(context.Background(), [][]int32{{1, 2, 3, 4, 5}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer lp.Free()
		})
	}
}

// TestFillFromTile: a tensor longer than the tile is filled with the tile
// from the offset, wrapping, then repeated.
func TestFillFromTile(t *testing.T) {
	be := cpu.New(1)
	tile := be.Upload([]float32{1, 2, 3, 4, 5}, 5)
	for _, tc := range []struct {
		n, off int
		want   []float32
	}{
		{3, 0, []float32{1, 2, 3}},
		{3, 4, []float32{5, 1, 2}},
		{12, 2, []float32{3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3, 4}},
		{11, 0, []float32{1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1}},
	} {
		x := be.New(tc.n)
		fillFromTile(be, x, tile, tc.off)
		got := make([]float32, tc.n)
		be.Download(got, x)
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("n %d off %d: %v, want %v", tc.n, tc.off, got, tc.want)
				break
			}
		}
	}
}
