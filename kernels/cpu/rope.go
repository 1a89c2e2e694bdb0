package cpu

import (
	"github.com/hone-rl/hone/kernels"
)

// RoPE implements kernels.Backend from the table's cos/sin rows (as in
// Hugging Face, the products pos*freq are formed in float32, then cos/sin
// are taken).
func (be *Backend) RoPE(x kernels.Tensor, pos kernels.Index, rt kernels.RoPETable, inverse bool) {
	xs, ps, tab := data(x), ints(pos), rope(rt)
	n, width, err := kernels.RoPEShape(x, pos, rt)
	must(err)
	if n == 0 {
		return
	}
	_, hi := pos.Range()
	rows := tab.upTo(int(hi))
	half := tab.Half()
	headDim := 2 * half
	sign := float32(1)
	if inverse {
		sign = -1
	}
	be.parallel(n, 4*width, func(lo, hi int) {
		for t := lo; t < hi; t++ {
			p := int(ps[t])
			cos, sin := rows.cos[p*half:(p+1)*half], rows.sin[p*half:(p+1)*half]
			row := xs[t*width : (t+1)*width]
			for h := 0; h < width; h += headDim {
				x1, x2 := row[h:h+half], row[h+half:h+headDim]
				for j := range x1 {
					a, b := x1[j], x2[j]
					s := sign * sin[j]
					x1[j] = a*cos[j] - b*s
					x2[j] = b*cos[j] + a*s
				}
			}
		}
	})
}
