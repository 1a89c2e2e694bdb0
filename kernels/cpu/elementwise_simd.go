package cpu

import "math"

// The Backend's hot elementwise loops: the assembly kernels over the
// multiple-of-8 prefix and the generic code for the tail, or the generic
// code alone.

// softmax replaces x with softmax(x).
func (be *Backend) softmax(x []float32) {
	s := be.simd
	if s == nil || len(x) < 8 {
		softmax(x)
		return
	}
	n8 := len(x) &^ 7
	mx := s.max(&x[0], n8)
	for _, v := range x[n8:] {
		mx = max(mx, v)
	}
	sum := s.exp(&x[0], &x[0], n8, mx)
	for i, v := range x[n8:] {
		e := float32(math.Exp(float64(v - mx)))
		x[n8+i] = e
		sum += e
	}
	inv := 1 / sum
	s.scale(&x[0], n8, inv)
	for i := n8; i < len(x); i++ {
		x[i] *= inv
	}
}

// silu sets o = x * sigmoid(x).
func (be *Backend) silu(o, x []float32) {
	x = x[:len(o)]
	n8 := 0
	if s := be.simd; s != nil && len(o) >= 8 {
		n8 = len(o) &^ 7
		s.silu(&o[0], &x[0], n8)
	}
	for i := n8; i < len(o); i++ {
		o[i] = x[i] * sigmoid(x[i])
	}
}

// swiglu sets o = silu(g) * u.
func (be *Backend) swiglu(o, g, u []float32) {
	g, u = g[:len(o)], u[:len(o)]
	n8 := 0
	if s := be.simd; s != nil && len(o) >= 8 {
		n8 = len(o) &^ 7
		s.swiglu(&o[0], &g[0], &u[0], n8)
	}
	for i := n8; i < len(o); i++ {
		o[i] = g[i] * sigmoid(g[i]) * u[i]
	}
}

// swigluBackward sets dup = dout*g*s and dgate = dout*u*s*(1 + g*(1-s))
// with s = sigmoid(g).
func (be *Backend) swigluBackward(dg, du, do, g, u []float32) {
	du, do, g, u = du[:len(dg)], do[:len(dg)], g[:len(dg)], u[:len(dg)]
	n8 := 0
	if s := be.simd; s != nil && len(dg) >= 8 {
		n8 = len(dg) &^ 7
		s.swigluBack(&dg[0], &du[0], &do[0], &g[0], &u[0], n8)
	}
	for i := n8; i < len(dg); i++ {
		s := sigmoid(g[i])
		du[i] = do[i] * g[i] * s
		dg[i] = do[i] * u[i] * s * (1 + g[i]*(1-s))
	}
}

// weightedRows sets o = sum_j p[j] * v[j*ld : j*ld+len(o)].
func (be *Backend) weightedRows(o, p, v []float32, ld int) {
	hd := len(o)
	if s := be.simd; s != nil && hd%8 == 0 && hd > 0 && len(p) > 0 {
		_ = v[(len(p)-1)*ld+hd-1]
		s.weightedRows(&o[0], hd, &p[0], len(p), &v[0], ld)
		return
	}
	weightedRows(o, p, v, ld)
}
