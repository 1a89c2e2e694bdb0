package cpu

import (
	"math"

	"github.com/hone-rl/hone/kernels"
)

// attnDims checks an attention call's shapes and returns the query count and
// the row widths of q and k.
func attnDims(q, k, v kernels.Tensor, a kernels.Attn) (n, qw, kw int) {
	d, err := kernels.AttentionShape(nil, q, k, v, a)
	must(err)
	return d.N, d.QWidth, d.KWidth
}

// Attention implements kernels.Backend: per (query, head) for a few queries
// (decode), in query blocks through the matmul kernel for many (prefill).
func (be *Backend) Attention(out, q, k, v kernels.Tensor, a kernels.Attn) {
	n, qw, kw := attnDims(q, k, v, a)
	od, qd, kd, vd := data(out), data(q), data(k), data(v)
	mustLen("attention out", len(od), len(qd))
	if a.BF16 {
		// bf16 inputs; everything after the rounding stays float32 here.
		qd, kd, vd = roundedBF16(qd), roundedBF16(kd), roundedBF16(vd)
		if a.LSE != nil {
			attentionLSE(data(a.LSE), qd, kd, n, qw, kw, a)
		}
	}
	if n >= attnBlock {
		be.attentionBlocked(od, qd, kd, vd, n, qw, kw, a)
		return
	}
	be.attentionRows(od, qd, kd, vd, n, qw, kw, a)
}

// attentionRows computes attention one (query, key/value head) pair at a
// time: the scores of the group's query heads, which share the keys, come
// from one strided matmul.
func (be *Backend) attentionRows(od, qd, kd, vd []float32, n, qw, kw int, a kernels.Attn) {
	hd, group := a.HeadDim, a.Heads/a.KVHeads
	be.parallel(n*a.KVHeads, 4*group*(a.Past+n)*hd, func(lo, hi int) {
		s := make([]float32, group*(a.Past+n))
		for idx := lo; idx < hi; idx++ {
			i, g := idx/a.KVHeads, idx%a.KVHeads
			keys, qOff := a.Past+i+1, i*qw+g*group*hd
			sc := s[:group*keys]
			clear(sc)
			be.gemmNT(ntArgs{c: sc, ldc: keys, a: qd[qOff:], lda: hd, b: kd[g*hd:], ldb: kw, k: hd, alpha: a.Scale}, 0, group, 0, keys)
			for r := 0; r < group; r++ {
				p := sc[r*keys : (r+1)*keys]
				be.softmax(p)
				be.weightedRows(od[qOff+r*hd:qOff+(r+1)*hd], p, vd[g*hd:], kw)
			}
		}
	})
}

// probs fills p with softmax_j(scale * q·k_j) over the keys len(p).
func (be *Backend) probs(p, q, kd []float32, kw, kvOff int, scale float32) {
	hd := len(q)
	for j := range p {
		p[j] = scale * dot(q, kd[j*kw+kvOff:j*kw+kvOff+hd])
	}
	be.softmax(p)
}

// softmax replaces x with softmax(x).
func softmax(x []float32) {
	mx := float32(math.Inf(-1))
	for _, s := range x {
		mx = max(mx, s)
	}
	var sum float64
	for j, s := range x {
		e := math.Exp(float64(s - mx))
		x[j] = float32(e)
		sum += e
	}
	inv := float32(1 / sum)
	for j := range x {
		x[j] *= inv
	}
}

// attnBlock is the query block of blocked attention; calls with fewer
// queries take the per-row path.
const attnBlock = 16

// attentionBlocked computes attention per (head, block of queries) as two
// matmuls: S = scale*Q*K^T over the keys the block can see, a causal softmax
// per row, then O = P*V (with V transposed once per key/value head).
func (be *Backend) attentionBlocked(od, qd, kd, vd []float32, n, qw, kw int, a kernels.Attn) {
	hd, group, keys := a.HeadDim, a.Heads/a.KVHeads, a.Past+n
	vt := make([]float32, a.KVHeads*hd*keys)
	for g := 0; g < a.KVHeads; g++ {
		for j := 0; j < keys; j++ {
			row := vd[j*kw+g*hd : j*kw+(g+1)*hd]
			for d, x := range row {
				vt[(g*hd+d)*keys+j] = x
			}
		}
	}
	blocks := (n + attnBlock - 1) / attnBlock
	be.parallel(a.Heads*blocks, 4*attnBlock*keys*hd, func(lo, hi int) {
		s := make([]float32, attnBlock*keys)
		for item := lo; item < hi; item++ {
			h, i0 := item/blocks, (item%blocks)*attnBlock
			i1 := min(i0+attnBlock, n)
			rows, seen, g := i1-i0, a.Past+i1, h/group
			sc := s[:rows*seen]
			clear(sc)
			be.gemmNT(ntArgs{c: sc, ldc: seen, a: qd[i0*qw+h*hd:], lda: qw, b: kd[g*hd:], ldb: kw, k: hd, alpha: a.Scale}, 0, rows, 0, seen)
			for r := 0; r < rows; r++ {
				row := sc[r*seen : (r+1)*seen]
				valid := a.Past + i0 + r + 1
				be.softmax(row[:valid])
				clear(row[valid:])
				clear(od[(i0+r)*qw+h*hd : (i0+r)*qw+(h+1)*hd])
			}
			be.gemmNT(ntArgs{c: od[i0*qw+h*hd:], ldc: qw, a: sc, lda: seen, b: vt[g*hd*keys:], ldb: keys, k: seen, alpha: 1}, 0, rows, 0, hd)
		}
	})
}

// AttentionBackward implements kernels.Backend. Probabilities are recomputed;
// work splits by key/value head so each goroutine owns its dk/dv columns.
func (be *Backend) AttentionBackward(dq, dk, dv, dout, q, k, v kernels.Tensor, a kernels.Attn) {
	n, qw, kw := attnDims(q, k, v, a)
	t := attnGrads{dq: data(dq), dk: data(dk), dv: data(dv), dout: data(dout), q: data(q), k: data(k), v: data(v), n: n, qw: qw, kw: kw}
	mustLen("attention backward dq", len(t.dq), len(t.q))
	mustLen("attention backward dout", len(t.dout), len(t.q))
	mustLen("attention backward dk", len(t.dk), len(t.k))
	mustLen("attention backward dv", len(t.dv), len(t.v))
	if a.BF16 {
		// The same rounding as the forward's; LSE and Out are not needed.
		t.q, t.k, t.v, t.dout = roundedBF16(t.q), roundedBF16(t.k), roundedBF16(t.v), roundedBF16(t.dout)
	}
	if n >= attnBlock {
		be.attentionBackwardBlocked(t, a)
		return
	}
	be.attentionBackwardRows(t, a)
}

// attnGrads are the host slices of an attention backward call.
type attnGrads struct {
	dq, dk, dv, dout, q, k, v []float32
	n, qw, kw                 int
}

// attentionBackwardRows is the per-(head, query) backward.
func (be *Backend) attentionBackwardRows(t attnGrads, a kernels.Attn) {
	n, qw, kw := t.n, t.qw, t.kw
	dqd, dkd, dvd, dod, qd, kd, vd := t.dq, t.dk, t.dv, t.dout, t.q, t.k, t.v
	hd, group := a.HeadDim, a.Heads/a.KVHeads
	be.parallel(a.KVHeads, 8*group*n*(a.Past+n)*hd, func(lo, hi int) {
		p := make([]float32, a.Past+n)
		dp := make([]float32, a.Past+n)
		for g := lo; g < hi; g++ {
			kvOff := g * hd
			for h := g * group; h < (g+1)*group; h++ {
				for i := 0; i < n; i++ {
					keys := a.Past + i + 1
					qr := qd[i*qw+h*hd : i*qw+(h+1)*hd]
					dor := dod[i*qw+h*hd : i*qw+(h+1)*hd]
					dqr := dqd[i*qw+h*hd : i*qw+(h+1)*hd]
					be.probs(p[:keys], qr, kd, kw, kvOff, a.Scale)
					var d float64
					for j := 0; j < keys; j++ {
						dp[j] = dot(dor, vd[j*kw+kvOff:j*kw+kvOff+hd])
						d += float64(p[j] * dp[j])
					}
					clear(dqr)
					for j := 0; j < keys; j++ {
						ds := p[j] * (dp[j] - float32(d)) * a.Scale
						kr := kd[j*kw+kvOff : j*kw+kvOff+hd]
						dkr := dkd[j*kw+kvOff : j*kw+kvOff+hd]
						dvr := dvd[j*kw+kvOff : j*kw+kvOff+hd]
						for x := range qr {
							dqr[x] += ds * kr[x]
							dkr[x] += ds * qr[x]
							dvr[x] += p[j] * dor[x]
						}
					}
				}
			}
		}
	})
}

// transposeInto writes the [cols, rows] transpose of a rows x cols matrix
// whose rows start every ld elements of src.
func transposeInto(dst, src []float32, rows, cols, ld int) {
	for i := 0; i < rows; i++ {
		row := src[i*ld : i*ld+cols]
		for j, x := range row {
			dst[j*rows+i] = x
		}
	}
}

// attentionBackwardBlocked is the backward of attentionBlocked, per key/value
// head and block of queries, as matmuls: P = softmax(scale*Q*K^T),
// dP = dO*V^T, dS = P*(dP - rowsum(P*dP)), dQ = scale*dS*K,
// dK += scale*dS^T*Q, dV += P^T*dO.
func (be *Backend) attentionBackwardBlocked(t attnGrads, a kernels.Attn) {
	hd, group, keys := a.HeadDim, a.Heads/a.KVHeads, a.Past+t.n
	be.parallel(a.KVHeads, 8*group*t.n*keys*hd, func(lo, hi int) {
		kt := make([]float32, hd*keys)
		p, ds := make([]float32, attnBlock*keys), make([]float32, attnBlock*keys)
		pt, dst := make([]float32, attnBlock*keys), make([]float32, attnBlock*keys)
		qt, dOt := make([]float32, hd*attnBlock), make([]float32, hd*attnBlock)
		for g := lo; g < hi; g++ {
			transposeInto(kt, t.k[g*hd:], keys, hd, t.kw)
			for h := g * group; h < (g+1)*group; h++ {
				for i0 := 0; i0 < t.n; i0 += attnBlock {
					rows := min(attnBlock, t.n-i0)
					seen := a.Past + i0 + rows
					qOff := i0*t.qw + h*hd
					pb, db := p[:rows*seen], ds[:rows*seen]
					clear(pb)
					clear(db)
					be.gemmNT(ntArgs{c: pb, ldc: seen, a: t.q[qOff:], lda: t.qw, b: t.k[g*hd:], ldb: t.kw, k: hd, alpha: a.Scale}, 0, rows, 0, seen)
					be.gemmNT(ntArgs{c: db, ldc: seen, a: t.dout[qOff:], lda: t.qw, b: t.v[g*hd:], ldb: t.kw, k: hd, alpha: 1}, 0, rows, 0, seen)
					for r := 0; r < rows; r++ {
						pr, dr := pb[r*seen:(r+1)*seen], db[r*seen:(r+1)*seen]
						valid := a.Past + i0 + r + 1
						be.softmax(pr[:valid])
						clear(pr[valid:])
						var d float64
						for j, x := range pr[:valid] {
							d += float64(x * dr[j])
						}
						for j := range dr {
							dr[j] = pr[j] * (dr[j] - float32(d))
						}
						clear(t.dq[qOff+r*t.qw : qOff+r*t.qw+hd])
					}
					be.gemmNT(ntArgs{c: t.dq[qOff:], ldc: t.qw, a: db, lda: seen, b: kt, ldb: keys, k: seen, alpha: a.Scale}, 0, rows, 0, hd)
					transposeInto(pt, pb, rows, seen, seen)
					transposeInto(dst, db, rows, seen, seen)
					transposeInto(qt, t.q[qOff:], rows, hd, t.qw)
					transposeInto(dOt, t.dout[qOff:], rows, hd, t.qw)
					be.gemmNT(ntArgs{c: t.dk[g*hd:], ldc: t.kw, a: dst, lda: rows, b: qt, ldb: rows, k: rows, alpha: a.Scale}, 0, seen, 0, hd)
					be.gemmNT(ntArgs{c: t.dv[g*hd:], ldc: t.kw, a: pt, lda: rows, b: dOt, ldb: rows, k: rows, alpha: 1}, 0, seen, 0, hd)
				}
			}
		}
	})
}

// weightedRows sets o = sum_j p[j] * v[j*ld : j*ld+len(o)], four rows per
// pass so o is loaded and stored a quarter as often.
func weightedRows(o, p, v []float32, ld int) {
	hd := len(o)
	clear(o)
	j := 0
	for ; j+4 <= len(p); j += 4 {
		p0, p1, p2, p3 := p[j], p[j+1], p[j+2], p[j+3]
		v0 := v[j*ld : j*ld+hd]
		v1 := v[(j+1)*ld : (j+1)*ld+hd][:len(v0)]
		v2 := v[(j+2)*ld : (j+2)*ld+hd][:len(v0)]
		v3 := v[(j+3)*ld : (j+3)*ld+hd][:len(v0)]
		o := o[:len(v0)]
		for d := range v0 {
			o[d] += p0*v0[d] + p1*v1[d] + p2*v2[d] + p3*v3[d]
		}
	}
	for ; j < len(p); j++ {
		vr := v[j*ld : j*ld+hd]
		for d, x := range vr {
			o[d] += p[j] * x
		}
	}
}

// roundedBF16 returns a copy of x rounded to bf16 (round to nearest even),
// as float32: Attn.BF16's inputs.
func roundedBF16(x []float32) []float32 {
	r := make([]float32, len(x))
	for i, v := range x {
		r[i] = kernels.FromBF16(kernels.ToBF16(v))
	}
	return r
}

// attentionLSE sets lse[i*Heads+h] to the log-sum-exp of query i's scaled
// scores against head h's keys (sums in double).
func attentionLSE(lse, qd, kd []float32, n, qw, kw int, a kernels.Attn) {
	hd, group := a.HeadDim, a.Heads/a.KVHeads
	mustLen("attention lse", len(lse), n*a.Heads)
	s := make([]float64, a.Past+n)
	for i := 0; i < n; i++ {
		for h := 0; h < a.Heads; h++ {
			qi, kv := qd[i*qw+h*hd:i*qw+(h+1)*hd], (h/group)*hd
			mx := math.Inf(-1)
			for j := 0; j <= a.Past+i; j++ {
				var d float32
				for x, qv := range qi {
					d += qv * kd[j*kw+kv+x]
				}
				s[j] = float64(a.Scale * d)
				mx = math.Max(mx, s[j])
			}
			var sum float64
			for j := 0; j <= a.Past+i; j++ {
				sum += math.Exp(s[j] - mx)
			}
			lse[i*a.Heads+h] = float32(mx + math.Log(sum))
		}
	}
}
