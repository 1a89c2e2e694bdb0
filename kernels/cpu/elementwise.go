package cpu

import "github.com/hone-rl/hone/kernels"

// Add implements kernels.Backend.
func (be *Backend) Add(dst, a, b kernels.Tensor) {
	d, x, y := data(dst), data(a), data(b)
	mustLen("add", len(x), len(d))
	mustLen("add", len(y), len(d))
	for i := range d {
		d[i] = x[i] + y[i]
	}
}

// Mul implements kernels.Backend.
func (be *Backend) Mul(dst, a, b kernels.Tensor) {
	d, x, y := data(dst), data(a), data(b)
	mustLen("mul", len(x), len(d))
	mustLen("mul", len(y), len(d))
	for i := range d {
		d[i] = x[i] * y[i]
	}
}

// Scale implements kernels.Backend.
func (be *Backend) Scale(dst, a kernels.Tensor, s float32) {
	d, x := data(dst), data(a)
	mustLen("scale", len(x), len(d))
	for i := range d {
		d[i] = s * x[i]
	}
}

// AXPY implements kernels.Backend.
func (be *Backend) AXPY(dst, x kernels.Tensor, s float32) {
	d, v := data(dst), data(x)
	mustLen("axpy", len(v), len(d))
	for i := range d {
		d[i] += s * v[i]
	}
}

// AddRow implements kernels.Backend.
func (be *Backend) AddRow(dst, v kernels.Tensor) {
	d, r := data(dst), data(v)
	n, w := kernels.Rows(dst)
	mustLen("addrow", len(r), w)
	for i := 0; i < n; i++ {
		row := d[i*w : (i+1)*w]
		for j := range row {
			row[j] += r[j]
		}
	}
}

// SumRows implements kernels.Backend.
func (be *Backend) SumRows(dst, x kernels.Tensor) {
	d, s := data(dst), data(x)
	n, w := kernels.Rows(x)
	mustLen("sumrows", len(d), w)
	for i := 0; i < n; i++ {
		row := s[i*w : (i+1)*w]
		for j, v := range row {
			d[j] += v
		}
	}
}

// Sum implements kernels.Backend.
func (be *Backend) Sum(x kernels.Tensor) float64 {
	var s float64
	for _, v := range data(x) {
		s += float64(v)
	}
	return s
}

// SumSquares implements kernels.Backend.
func (be *Backend) SumSquares(x kernels.Tensor) float64 {
	var s float64
	for _, v := range data(x) {
		s += float64(v) * float64(v)
	}
	return s
}

// SumInto implements kernels.Backend.
func (be *Backend) SumInto(dst kernels.Tensor, i int, x kernels.Tensor) {
	d := data(dst)
	must(kernels.CheckElem("sum into", i, len(d)))
	d[i] = float32(float64(d[i]) + be.Sum(x))
}

// SumSquaresInto implements kernels.Backend.
func (be *Backend) SumSquaresInto(dst kernels.Tensor, i int, x kernels.Tensor) {
	d := data(dst)
	must(kernels.CheckElem("sum squares into", i, len(d)))
	d[i] = float32(float64(d[i]) + be.SumSquares(x))
}
