package cpu

import (
	"math"

	"github.com/hone-rl/hone/kernels"
)

// RoPE implements kernels.Backend. As in Hugging Face, the products pos*freq
// are formed in float32, then cos/sin are taken.
func (be *Backend) RoPE(x kernels.Tensor, pos []int32, freqs []float32, inverse bool) {
	xs := data(x)
	half := len(freqs)
	headDim := 2 * half
	n, width, err := kernels.RoPEShape(x, len(pos), half)
	must(err)
	freq := freqs
	sign := float32(1)
	if inverse {
		sign = -1
	}
	be.parallel(n, 4*width, func(lo, hi int) {
		cos := make([]float32, half)
		sin := make([]float32, half)
		for t := lo; t < hi; t++ {
			for j, f := range freq {
				a := float64(float32(pos[t]) * f)
				cos[j] = float32(math.Cos(a))
				sin[j] = sign * float32(math.Sin(a))
			}
			row := xs[t*width : (t+1)*width]
			for h := 0; h < width; h += headDim {
				x1, x2 := row[h:h+half], row[h+half:h+headDim]
				for j := range x1 {
					a, b := x1[j], x2[j]
					x1[j] = a*cos[j] - b*sin[j]
					x2[j] = b*cos[j] + a*sin[j]
				}
			}
		}
	})
}
