package kernels

import (
	"math"
	"testing"
)

func TestBF16Rounding(t *testing.T) {
	for _, tc := range []struct {
		in   float32
		want uint16
	}{
		{1, 0x3f80},
		{-2, 0xc000},
		{0, 0},
		{float32(math.Copysign(0, -1)), 0x8000},
		{math.Float32frombits(0x3f808000), 0x3f80}, // tie, even below
		{math.Float32frombits(0x3f818000), 0x3f82}, // tie, even above
		{math.Float32frombits(0x3f808001), 0x3f81}, // just over the tie
		{math.Float32frombits(0x3f807fff), 0x3f80}, // just under
		{math.MaxFloat32, 0x7f80},                  // rounds up to infinity
		{float32(math.Inf(-1)), 0xff80},
		{math.Float32frombits(0x00018000), 0x0002}, // subnormal tie to even
	} {
		if got := ToBF16(tc.in); got != tc.want {
			t.Errorf("ToBF16(%g = %#08x) = %#04x, want %#04x", tc.in, math.Float32bits(tc.in), got, tc.want)
		}
	}
	if nan := FromBF16(ToBF16(float32(math.NaN()))); !math.IsNaN(float64(nan)) {
		t.Errorf("NaN became %g", nan)
	}
	if got := FromBF16(0x3f81); got != 1+1.0/128 {
		t.Errorf("FromBF16(0x3f81) = %g", got)
	}
	if F32.Size() != 4 || BF16.Size() != 2 || F32.String() != "f32" || BF16.String() != "bf16" {
		t.Errorf("dtype names or sizes")
	}
}
