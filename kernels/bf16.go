package kernels

import "math"

// ToBF16 rounds x to bfloat16 (the upper 16 bits of a float32), to nearest
// even; NaN stays NaN (quiet) and overflow rounds to infinity.
func ToBF16(x float32) uint16 {
	u := math.Float32bits(x)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// FromBF16 widens a bfloat16 to float32 (exact).
func FromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }
