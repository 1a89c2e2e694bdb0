package kernels

import (
	"strings"
	"testing"
)

type shaped []int

func (s shaped) Shape() []int { return s }
func (s shaped) DType() DType { return F32 }
func (s shaped) Len() int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// hostIndex is an Index over a slice, for the checks.
type hostIndex []int32

func (x hostIndex) Len() int              { return len(x) }
func (x hostIndex) Range() (lo, hi int32) { return IndexRange(x) }

type table struct{ half, maxPos int }

func (r table) Half() int   { return r.half }
func (r table) MaxPos() int { return r.maxPos }

func TestIndexRange(t *testing.T) {
	for _, tc := range []struct {
		ids    []int32
		lo, hi int32
	}{
		{nil, 0, -1},
		{[]int32{5}, 5, 5},
		{[]int32{3, -2, 9, 0}, -2, 9},
	} {
		if lo, hi := IndexRange(tc.ids); lo != tc.lo || hi != tc.hi {
			t.Errorf("IndexRange(%v) = %d, %d; want %d, %d", tc.ids, lo, hi, tc.lo, tc.hi)
		}
	}
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

func TestRows(t *testing.T) {
	for _, tc := range []struct {
		s        shaped
		n, width int
	}{
		{shaped{}, 1, 1},
		{shaped{7}, 1, 7},
		{shaped{3, 4}, 3, 4},
		{shaped{2, 3, 4}, 6, 4},
		{shaped{3, 0}, 0, 0},
	} {
		if n, w := Rows(tc.s); n != tc.n || w != tc.width {
			t.Errorf("Rows(%v) = %d, %d; want %d, %d", tc.s, n, w, tc.n, tc.width)
		}
	}
}

func TestAttentionShape(t *testing.T) {
	gqa := Attn{Heads: 4, KVHeads: 2, HeadDim: 8, Past: 3}
	for _, tc := range []struct {
		name         string
		out, q, k, v Tensor
		a            Attn
		want         AttnDims
		err          string
	}{
		{"gqa", shaped{5, 32}, shaped{5, 32}, shaped{8, 16}, shaped{8, 16}, gqa, AttnDims{N: 5, QWidth: 32, KWidth: 16}, ""},
		{"no out", nil, shaped{5, 32}, shaped{8, 16}, shaped{8, 16}, gqa, AttnDims{N: 5, QWidth: 32, KWidth: 16}, ""},
		{"heads not a multiple", nil, shaped{5, 24}, shaped{8, 16}, shaped{8, 16}, Attn{Heads: 3, KVHeads: 2, HeadDim: 8, Past: 3}, AttnDims{}, "must be positive"},
		{"zero head dim", nil, shaped{5, 0}, shaped{8, 0}, shaped{8, 0}, Attn{Heads: 4, KVHeads: 2, Past: 3}, AttnDims{}, "must be positive"},
		{"negative past", nil, shaped{5, 32}, shaped{2, 16}, shaped{2, 16}, Attn{Heads: 4, KVHeads: 2, HeadDim: 8, Past: -3}, AttnDims{}, "must be positive"},
		{"q width", nil, shaped{5, 16}, shaped{8, 16}, shaped{8, 16}, gqa, AttnDims{}, "attention q"},
		{"k rows without past", nil, shaped{5, 32}, shaped{5, 16}, shaped{5, 16}, gqa, AttnDims{}, "attention q"},
		{"v differs from k", nil, shaped{5, 32}, shaped{8, 16}, shaped{8, 8}, gqa, AttnDims{}, "attention q"},
		{"out length", shaped{4, 32}, shaped{5, 32}, shaped{8, 16}, shaped{8, 16}, gqa, AttnDims{}, "attention out"},
	} {
		got, err := AttentionShape(tc.out, tc.q, tc.k, tc.v, tc.a)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

func TestCheckTargets(t *testing.T) {
	for _, tc := range []struct {
		targets     []int32
		rows, vocab int
		err         string
	}{
		{[]int32{0, 9, 4}, 3, 10, ""},
		{nil, 0, 10, ""},
		{[]int32{0, 9}, 3, 10, "2 targets for 3 rows"},
		{[]int32{0, 10, 4}, 3, 10, "id 10 outside vocabulary [0,10)"},
		{[]int32{-1, 1, 4}, 3, 10, "id -1 outside"},
		{[]int32{-1, 1, 40}, 3, 10, "id -1 outside"},
	} {
		err := CheckTargets(hostIndex(tc.targets), tc.rows, tc.vocab)
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("CheckTargets(%v, %d, %d) = %v, want %q", tc.targets, tc.rows, tc.vocab, err, tc.err)
		}
	}
}

func TestCheckElem(t *testing.T) {
	if err := CheckElem("x", 0, 1); err != nil {
		t.Errorf("element 0 of 1: %v", err)
	}
	for _, i := range []int{-1, 1} {
		if err := CheckElem("x", i, 1); err == nil || !strings.Contains(err.Error(), "x: element") {
			t.Errorf("element %d of 1: %v", i, err)
		}
	}
}

func TestCheckLen(t *testing.T) {
	if err := CheckLen("x", 3, 3); err != nil {
		t.Errorf("equal lengths: %v", err)
	}
	if err := CheckLen("x", 2, 3); err == nil || err.Error() != "x: length 2, want 3" {
		t.Errorf("unequal lengths: %v", err)
	}
}

func TestRoPEShape(t *testing.T) {
	for _, tc := range []struct {
		x            shaped
		pos          []int32
		half, maxPos int
		ok           bool
	}{
		{shaped{3, 16}, []int32{0, 1, 2}, 4, 3, true},
		{shaped{3, 16}, []int32{0, 1, 2}, 8, 10, true},
		{shaped{0, 16}, nil, 8, 10, true},
		{shaped{3, 16}, []int32{0, 1}, 4, 10, false},
		{shaped{3, 16}, []int32{0, 1, 2}, 0, 10, false},
		{shaped{3, 12}, []int32{0, 1, 2}, 8, 10, false},
		{shaped{3, 16}, []int32{0, 1, 3}, 4, 3, false},
		{shaped{3, 16}, []int32{0, -1, 2}, 4, 3, false},
	} {
		n, w, err := RoPEShape(tc.x, hostIndex(tc.pos), table{tc.half, tc.maxPos})
		if (err == nil) != tc.ok || (tc.ok && (n != tc.x[0] || w != tc.x[1])) {
			t.Errorf("RoPEShape(%v, %v, half %d, max %d) = %d, %d, %v", tc.x, tc.pos, tc.half, tc.maxPos, n, w, err)
		}
	}
}
