package kernels

import (
	"strings"
	"testing"
)

type shaped []int

func (s shaped) Shape() []int { return s }
func (s shaped) Len() int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

func TestMatMulShape(t *testing.T) {
	for _, tc := range []struct {
		c, a, b        shaped
		transA, transB bool
		want           MatMulDims
		err            string
	}{
		{c: shaped{2, 4}, a: shaped{2, 3}, b: shaped{3, 4}, want: MatMulDims{Batch: 1, M: 2, N: 4, K: 3}},
		{c: shaped{2, 4}, a: shaped{3, 2}, b: shaped{4, 3}, transA: true, transB: true, want: MatMulDims{Batch: 1, M: 2, N: 4, K: 3}},
		{c: shaped{5, 2, 4}, a: shaped{5, 2, 3}, b: shaped{3, 4}, want: MatMulDims{Batch: 5, M: 2, N: 4, K: 3}},
		{c: shaped{5, 2, 4}, a: shaped{5, 2, 3}, b: shaped{5, 3, 4}, want: MatMulDims{Batch: 5, M: 2, N: 4, K: 3, BBatched: true}},
		{c: shaped{2, 4}, a: shaped{5, 2, 3}, b: shaped{3, 4}, err: "needs C [5,M,N]"},
		{c: shaped{5, 2, 4}, a: shaped{5, 2, 3}, b: shaped{4, 3, 4}, err: "batch mismatch"},
		{c: shaped{2, 4}, a: shaped{6}, b: shaped{3, 4}, err: "matmul shapes"},
		{c: shaped{2, 4}, a: shaped{2, 3}, b: shaped{4, 4}, err: "matmul A [2 3](T=false)"},
	} {
		got, err := MatMulShape(tc.c, tc.a, tc.b, tc.transA, tc.transB)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("A %v B %v C %v: error %v, want one with %q", tc.a, tc.b, tc.c, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("A %v B %v C %v: %+v %v, want %+v", tc.a, tc.b, tc.c, got, err, tc.want)
		}
	}
}
