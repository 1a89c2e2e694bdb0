//go:build cgo && !cuda

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hone-rl/hone/kernels"
	"github.com/hone-rl/hone/kernels/conformance"
	"github.com/hone-rl/hone/kernels/selftest"
)

// TestConformanceEmulated runs the kernels conformance suite, with the CPU
// backend's tolerances, against the CUDA kernels compiled for the host
// against the shim, for every kernel variant under both of the shim's
// schedules.
func TestConformanceEmulated(t *testing.T) {
	for _, v := range Variants() {
		t.Run(v, func(t *testing.T) {
			for _, s := range Schedules() {
				t.Run(s, func(t *testing.T) {
					be, err := NewEmulated(v)
					if err != nil {
						t.Fatal(err)
					}
					defer be.Close()
					if err := be.SetSchedule(s); err != nil {
						t.Fatal(err)
					}
					conformance.Run(t, be)
				})
			}
		})
	}
}

// TestShimSemantics checks the shim against what CUDA documents: shuffle
// sources and out-of-range lanes, ballots, atomics across blocks, and the
// launch errors for a barrier split across a warp and for a shuffle whose
// mask names lanes that exited.
func TestShimSemantics(t *testing.T) {
	out, err := emuSelftest(0)
	if err != nil {
		t.Fatal(err)
	}
	var ballot uint32
	for l := 0; l < 32; l += 3 {
		ballot |= 1 << l
	}
	for tid := 0; tid < 64; tid++ {
		lane, base := tid%32, tid-tid%32
		down := tid + 3
		if lane+3 >= 32 {
			down = tid
		}
		up := tid - 2
		if lane < 2 {
			up = tid
		}
		// Warp 1's lanes 0, 3, ... are threads 32, 35, ...: t%3 == 0 at lanes 1, 4, ...
		wb := ballot
		if base == 32 {
			wb = 0
			for l := 1; l < 32; l += 3 {
				wb |= 1 << l
			}
		}
		want := []float32{float32(tid ^ 1), float32(down), float32(base + 5), float32(up), float32(wb)}
		for i, w := range want {
			if got := out[5*tid+i]; got != w {
				t.Errorf("thread %d value %d = %g, want %g", tid, i, got, w)
			}
		}
	}
	out, err = emuSelftest(1)
	if err != nil {
		t.Fatal(err)
	}
	if want := float32(511 * 512 / 2); out[0] != want {
		t.Errorf("atomicAdd over 512 threads: %g, want %g", out[0], want)
	}
	if _, err := emuSelftest(2); err == nil || !strings.Contains(err.Error(), "deadlock") {
		t.Errorf("a barrier split across a warp: err %v, want a deadlock", err)
	}
	// The report names the first exited lane the mask names.
	if _, err := emuSelftest(3); err == nil || !strings.Contains(err.Error(), "warp operation: mask names lane 16 of warp 0, which does not exist or has exited") {
		t.Errorf("a shuffle naming exited lanes: err %v, want an error naming lane 16", err)
	}
	// Ballots over half a warp: each lane sees the votes of its mask only.
	out, err = emuSelftest(18)
	if err != nil {
		t.Fatal(err)
	}
	for tid := 0; tid < 64; tid++ {
		lane, base := tid%32, tid-tid%32
		var want uint32
		for l := 0; l < 32; l++ {
			if (l < 16) == (lane < 16) && (base+l)%5 == 0 {
				want |= 1 << l
			}
		}
		if lo, hi := out[2*tid], out[2*tid+1]; lo != float32(want&0xffff) || hi != float32(want>>16) {
			t.Errorf("thread %d: ballot over half a warp %#x, want %#x", tid, uint32(lo)|uint32(hi)<<16, want)
		}
	}
}

// TestShimMMA: the shim's mma.sync m16n8k16 (bf16 in, float32 accumulate)
// computes D = A B + C with the PTX ISA's fragment layout (the self-test
// kernel places each element by the ISA's per-element table; the shim reads
// registers by its own formulas), refuses a warp that is not converged, and
// a launch over 48 KiB of dynamic shared memory is refused until
// cudaFuncSetAttribute allows it, as on the device.
func TestShimMMA(t *testing.T) {
	out, err := emuSelftest(19)
	if err != nil {
		t.Fatal(err)
	}
	for m := 0; m < 16; m++ {
		for n := 0; n < 8; n++ {
			want := float32(8*m + n)
			for k := 0; k < 16; k++ {
				want += float32(m-k) * float32((k+2*n)%7-3)
			}
			if got := out[8*m+n]; got != want {
				t.Errorf("D[%d][%d] = %g, want %g", m, n, got, want)
			}
		}
	}
	if _, err := emuSelftest(20); err == nil || !strings.Contains(err.Error(), "mma.sync: warp 0 is not converged") {
		t.Errorf("an mma reached by half a warp: err %v, want not converged", err)
	}
	if _, err := emuSelftest(21); err == nil || !strings.Contains(err.Error(), "invalid argument") {
		t.Errorf("64 KiB of dynamic shared memory without the attribute: err %v, want invalid argument", err)
	}
	if _, err := emuSelftest(22); err != nil {
		t.Errorf("64 KiB of dynamic shared memory with the attribute: %v", err)
	}
}

// TestCachingAllocator: freed tensors' memory is reused for the next
// tensors of the same rounded size instead of going back to the device,
// comes back zeroed from New, and Trim returns the cache; the peak of live
// bytes holds until ResetPeak.
func TestCachingAllocator(t *testing.T) {
	be, err := NewEmulated(VariantReadable)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	sizes := []int{1, 100, 128, 129, 1000, 300000}
	var ts []kernels.Tensor
	for _, n := range sizes {
		x := be.New(n)
		be.Fill(x, 7)
		ts = append(ts, x)
	}
	first := be.MemStats()
	if first.DeviceAllocs != int64(len(sizes)) || first.Reuses != 0 || first.LiveBytes < 4*(1+100+128+129+1000+300000) ||
		first.PeakLiveBytes != first.LiveBytes {
		t.Fatalf("after %d allocations: %+v", len(sizes), first)
	}
	for _, x := range ts {
		be.Free(x)
	}
	if m := be.MemStats(); m.LiveBytes != 0 || m.CachedBytes != first.LiveBytes || m.PeakLiveBytes != first.LiveBytes {
		t.Fatalf("after freeing: %+v (the peak stays)", m)
	}
	be.ResetPeak()
	if p := be.PeakLiveBytes(); p != 0 {
		t.Fatalf("peak %d after ResetPeak with nothing live", p)
	}
	for _, n := range sizes {
		x := be.New(n)
		got := make([]float32, n)
		be.Download(got, x)
		for i, v := range got {
			if v != 0 {
				t.Fatalf("New(%d) from the cache: [%d] = %g", n, i, v)
			}
		}
	}
	if m := be.MemStats(); m.DeviceAllocs != int64(len(sizes)) || m.Reuses != int64(len(sizes)) || m.CachedBytes != 0 {
		t.Fatalf("allocating the same sizes again: %+v", m)
	}
	x := be.New(5)
	be.Free(x)
	be.Trim()
	if m := be.MemStats(); m.CachedBytes != 0 {
		t.Fatalf("after Trim: %+v", m)
	}
}

// TestErrorsAreStickyAndNamed: a failed call records an error naming the
// backend, the operation and the cause; it sticks (later calls are no-ops,
// tensors made meanwhile have no storage) until ClearErr, and another
// backend is unaffected.
func TestErrorsAreStickyAndNamed(t *testing.T) {
	a, err := NewEmulated(VariantReadable)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := NewEmulated(VariantReadable)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	x := a.New(4)
	if b.Err() != nil {
		t.Fatalf("fresh backend: %v", b.Err())
	}
	b.Free(x)
	first := b.Err()
	if first == nil || !strings.Contains(first.Error(), "kernels/cuda-emu: free: free: pointer not allocated by this context") {
		t.Fatalf("freeing a tensor of another backend: %v", first)
	}
	y := b.New(3)
	b.Fill(y, 1)
	if b.Err() != first {
		t.Fatalf("the error did not stick: %v", b.Err())
	}
	got := []float32{7, 7, 7}
	b.Download(got, y)
	if got[0] != 7 {
		t.Fatalf("a download after the error wrote %v", got)
	}
	b.ClearErr()
	if b.Err() != nil {
		t.Fatalf("after ClearErr: %v", b.Err())
	}
	z := b.Upload([]float32{1, 2, 3}, 3)
	b.Download(got, z)
	if b.Err() != nil || got[2] != 3 {
		t.Fatalf("after ClearErr the backend works again: %v, %v", got, b.Err())
	}
	// A tensor made while the error was set has no storage.
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "made while the backend's Err was set") {
				t.Errorf("using a tensor made during the error: %v", r)
			}
		}()
		b.Copy(z, y)
	}()
	// The other backend is unaffected.
	a.Fill(x, 2)
	a.Download(got[:0:0], a.New(0))
	out := make([]float32, 4)
	a.Download(out, x)
	if out[3] != 2 || a.Err() != nil {
		t.Fatalf("backend a after b failed: %v, %v", out, a.Err())
	}
}

// TestMatMulEmptyK: with K == 0 the product is empty, so C = beta*C (zero
// with beta == 0, even over NaN), as BLAS and cuBLAS define it.
func TestMatMulEmptyK(t *testing.T) {
	be, err := NewEmulated(VariantReadable)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	nan := float32(math.NaN())
	for _, beta := range []float32{0, 0.5} {
		c := be.Upload([]float32{nan, nan, nan, 2, 4, 6}, 2, 3)
		if beta != 0 {
			c = be.Upload([]float32{1, 2, 3, 2, 4, 6}, 2, 3)
		}
		be.MatMul(c, be.New(2, 0), be.New(0, 3), false, false, 1, beta)
		got := make([]float32, 6)
		be.Download(got, c)
		want := []float32{0, 0, 0, 0, 0, 0}
		if beta != 0 {
			want = []float32{0.5, 1, 1.5, 1, 2, 3}
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("beta %g: C = %v, want %v", beta, got, want)
			}
		}
	}
}

// TestEmptyShapes: every operation accepts zero rows (an empty batch, a
// step with nothing to train) without launching an empty grid, which the
// device refuses.
func TestEmptyShapes(t *testing.T) {
	be, err := NewEmulated(VariantFast)
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	e := func(shape ...int) kernels.Tensor { return be.New(shape...) }
	w8, w4 := be.Upload([]float32{1, 2, 3, 4, 5, 6, 7, 8}, 8), e(2, 4)
	be.Fill(e(0), 1)
	be.Add(e(0), e(0), e(0))
	be.Mul(e(0), e(0), e(0))
	be.Scale(e(0), e(0), 2)
	be.AXPY(e(0), e(0), 2)
	be.AddRow(e(0, 8), w8)
	dst := be.Upload([]float32{1, 2, 3, 4, 5, 6, 7, 8}, 8)
	be.SumRows(dst, e(0, 8))
	if s := be.Sum(dst); s != 36 {
		t.Fatalf("SumRows over no rows changed dst: sum %g", s)
	}
	if s := be.Sum(e(0)); s != 0 {
		t.Fatalf("Sum of nothing = %g", s)
	}
	be.SumInto(dst, 2, e(0))
	be.SumSquaresInto(dst, 2, e(0))
	if s := be.Sum(dst); s != 36 {
		t.Fatalf("SumInto of nothing changed dst: sum %g", s)
	}
	be.MatMul(e(0, 3), e(0, 4), e(4, 3), false, false, 1, 0)
	be.RMSNorm(e(0, 8), e(0, 8), w8, 1e-6)
	be.RMSNormBackward(e(0, 8), e(8), e(0, 8), e(0, 8), w8, 1e-6)
	none := be.UploadIndex(nil)
	defer be.FreeIndex(none)
	rt := be.NewRoPETable([]float32{1, 0.5}, 16)
	defer be.FreeRoPETable(rt)
	be.RoPE(e(0, 8), none, rt, false)
	a := kernels.Attn{Heads: 2, KVHeads: 1, HeadDim: 4, Past: 3, Scale: 0.5}
	be.Attention(e(0, 8), e(0, 8), e(3, 4), e(3, 4), a)
	be.AttentionBackward(e(0, 8), e(3, 4), e(3, 4), e(0, 8), e(0, 8), e(3, 4), e(3, 4), a)
	be.SiLU(e(0), e(0))
	be.SwiGLU(e(0), e(0), e(0))
	be.SwiGLUBackward(e(0), e(0), e(0), e(0), e(0))
	be.Embedding(e(0, 4), w4, none)
	be.EmbeddingBackward(w4, e(0, 4), none)
	be.LogProbs(e(0), e(0, 5), none)
	be.CrossEntropy(e(0), e(0, 5), none)
	be.LogProbsBackward(e(0, 5), e(0, 5), none, e(0))
	be.TokenLogProbs(e(0), e(0), e(0, 4), w4, none)
	be.TokenLogProbsBackward(e(0, 4), w4, e(0, 4), w4, e(0), none, e(0))
	be.AdamWStep(e(0), e(0), e(0), e(0), kernels.AdamW{LR: 1, Beta1: 0.9, Beta2: 0.99, Step: 1})
	if out := be.Sample(e(0, 5), nil, 2); len(out.Tokens) != 0 || len(out.TopIDs) != 0 {
		t.Fatalf("Sample of no rows: %+v", out)
	}
}

// TestAttentionHeadDimBoundary: the tiled kernels keep a head in registers
// up to kMaxDim (128) and fall back to the readable ones above; at 128
// (tiled, full register arrays) and 136 (fallback) the fast variant equals
// the readable one, forward and backward.
func TestAttentionHeadDimBoundary(t *testing.T) {
	readable, err := NewEmulated(VariantReadable)
	if err != nil {
		t.Fatal(err)
	}
	defer readable.Close()
	fast, err := NewEmulated(VariantFast)
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	rng := rand.New(rand.NewPCG(21, 22))
	randn := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	for _, hd := range []int{128, 136} {
		a := kernels.Attn{Heads: 4, KVHeads: 2, HeadDim: hd, Past: 40, Scale: float32(1 / math.Sqrt(float64(hd)))}
		const n = 5
		qw, kw, keys := a.Heads*hd, a.KVHeads*hd, a.Past+n
		q, k, v, dout := randn(n*qw), randn(keys*kw), randn(keys*kw), randn(n*qw)
		run := func(be *Backend) (out, dq, dk, dv []float32) {
			qt, kt, vt := be.Upload(q, n, qw), be.Upload(k, keys, kw), be.Upload(v, keys, kw)
			ot, dqt, dkt, dvt := be.New(n, qw), be.New(n, qw), be.New(keys, kw), be.New(keys, kw)
			be.Attention(ot, qt, kt, vt, a)
			be.AttentionBackward(dqt, dkt, dvt, be.Upload(dout, n, qw), qt, kt, vt, a)
			out, dq, dk, dv = make([]float32, n*qw), make([]float32, n*qw), make([]float32, keys*kw), make([]float32, keys*kw)
			be.Download(out, ot)
			be.Download(dq, dqt)
			be.Download(dk, dkt)
			be.Download(dv, dvt)
			return
		}
		o1, q1, k1, v1 := run(readable)
		o2, q2, k2, v2 := run(fast)
		for _, c := range []struct {
			name      string
			got, want []float32
		}{{"out", o2, o1}, {"dq", q2, q1}, {"dk", k2, k1}, {"dv", v2, v1}} {
			if e := selftest.RelErr(c.got, c.want); !(e <= 1e-5) {
				t.Errorf("head dim %d %s: fast vs readable relative error %.2g", hd, c.name, e)
			}
		}
	}
}
