package cpu

import (
	"math"

	"github.com/hone-rl/hone/kernels"
)

// RMSNorm implements kernels.Backend.
func (be *Backend) RMSNorm(out, x, w kernels.Tensor, eps float32) {
	o, xs, ws := data(out), data(x), data(w)
	n, width := kernels.Rows(x)
	mustLen("rmsnorm out", len(o), len(xs))
	mustLen("rmsnorm weight", len(ws), width)
	be.parallel(n, 4*width, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			xr, or := xs[i*width:(i+1)*width], o[i*width:(i+1)*width]
			r := invRMS(xr, eps)
			for j, v := range xr {
				or[j] = v * r * ws[j]
			}
		}
	})
}

func invRMS(x []float32, eps float32) float32 {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	return float32(1 / math.Sqrt(ss/float64(len(x))+float64(eps)))
}

// RMSNormBackward implements kernels.Backend. With r = 1/rms(x) and
// g = dy*w: dx = r*g - x * r^3 * mean(g*x); dw += dy * x * r.
func (be *Backend) RMSNormBackward(dx, dw, dy, x kernels.Tensor, w kernels.Tensor, eps float32) {
	dxs, dys, xs, ws := data(dx), data(dy), data(x), data(w)
	n, width := kernels.Rows(x)
	mustLen("rmsnorm backward dx", len(dxs), len(xs))
	mustLen("rmsnorm backward dy", len(dys), len(xs))
	rs := make([]float32, n)
	be.parallel(n, 6*width, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			xr, dyr, dxr := xs[i*width:(i+1)*width], dys[i*width:(i+1)*width], dxs[i*width:(i+1)*width]
			r := invRMS(xr, eps)
			rs[i] = r
			var gx float64
			for j, v := range xr {
				gx += float64(dyr[j]*ws[j]) * float64(v)
			}
			c := float32(gx/float64(width)) * r * r * r
			for j, v := range xr {
				dxr[j] = r*dyr[j]*ws[j] - v*c
			}
		}
	})
	if dw == nil {
		return
	}
	dws := data(dw)
	mustLen("rmsnorm backward dw", len(dws), width)
	for i := 0; i < n; i++ {
		xr, dyr := xs[i*width:(i+1)*width], dys[i*width:(i+1)*width]
		for j, v := range xr {
			dws[j] += dyr[j] * v * rs[i]
		}
	}
}
