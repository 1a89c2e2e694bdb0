// attention.cu: causal grouped-query attention. q is [n, heads*D]; k and v
// are [past+n, kv_heads*D] (cached positions, then the new ones); query i
// sits at position past+i and attends to keys 0..past+i; query head h reads
// key/value head h / (heads/kv_heads).
//
// Forward: a readable kernel (one thread per query and head, three passes
// over the keys through global memory) and a tiled one in the
// FlashAttention style (a block of queries of one head streams key/value
// tiles through shared memory with an online softmax, so the score matrix
// never exists). Backward: the readable kernel, recomputing the softmax
// (the probabilities are not stored), with atomics for the key and value
// gradients that several queries and heads share; and a tiled one beside it
// (three passes, no atomics, see attention_bwd_stats_kernel).
#include "hone_cuda.h"
#include "internal.cuh"

namespace hone {

struct AttnShape {
  long n, past;
  int heads, kv_heads, dim;
  float scale;
  __host__ __device__ long qw() const { return long(heads) * dim; }
  __host__ __device__ long kw() const { return long(kv_heads) * dim; }
};

// dot is a template so that the host shim's instrumented shared-memory
// pointers (racecheck) pass through it; on the device both are float*.
template <class A, class B>
__device__ inline float dot(A a, B b, int d) {
  float s = 0;
  for (int x = 0; x < d; x++) s += a[x] * b[x];
  return s;
}

// attention_kernel1 (readable): one thread per (query, head).
__global__ void attention_kernel1(float* out, const float* q, const float* k, const float* v, AttnShape a) {
  const long idx = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= a.n * a.heads) return;
  const long i = idx / a.heads;
  const int h = int(idx % a.heads), kvh = h / (a.heads / a.kv_heads), D = a.dim;
  const float* qi = q + i * a.qw() + long(h) * D;
  float* oi = out + i * a.qw() + long(h) * D;
  const long keys = a.past + i + 1;
  float m = -INFINITY;
  for (long j = 0; j < keys; j++) m = fmaxf(m, a.scale * dot(qi, k + j * a.kw() + long(kvh) * D, D));
  for (int d = 0; d < D; d++) oi[d] = 0;
  double l = 0;  // sums in double, as kernels/cpu does
  for (long j = 0; j < keys; j++) {
    const float p = expf(a.scale * dot(qi, k + j * a.kw() + long(kvh) * D, D) - m);
    l += p;
    const float* vj = v + j * a.kw() + long(kvh) * D;
    for (int d = 0; d < D; d++) oi[d] += p * vj[d];
  }
  for (int d = 0; d < D; d++) oi[d] = float(oi[d] / l);
}

// The tiled kernel's shapes: kRows queries per block (one per thread), kCols
// keys per shared-memory tile, head dimensions up to kMaxDim in registers.
constexpr int kRows = 64, kCols = 32, kMaxDim = 128;

// attention_kernel2 (tiled): grid (query blocks, heads), one thread per
// query. Every thread helps load each key/value tile, including threads past
// the last query, so the barriers are reached by all.
__global__ void attention_kernel2(float* out, const float* q, const float* k, const float* v, AttnShape a) {
  HONE_DYNAMIC_SHARED(float, smem);
  // auto: float* on the device, the host shim's instrumented pointer (racecheck).
  auto ks = smem;                 // [kCols][D]
  auto vs = smem + kCols * a.dim; // [kCols][D]
  const int h = blockIdx.y, kvh = h / (a.heads / a.kv_heads), D = a.dim;
  const long i0 = long(blockIdx.x) * kRows, i = i0 + threadIdx.x;
  const bool active = i < a.n;
  float qr[kMaxDim], acc[kMaxDim];
  float m = -INFINITY;
  double l = 0;
  for (int d = 0; d < D; d++) {
    qr[d] = active ? q[i * a.qw() + long(h) * D + d] * a.scale : 0;
    acc[d] = 0;
  }
  // Keys up to the last query of the block.
  const long last = i0 + kRows - 1 < a.n - 1 ? i0 + kRows - 1 : a.n - 1;
  const long keys = a.past + last + 1;
  for (long j0 = 0; j0 < keys; j0 += kCols) {
    for (long e = threadIdx.x; e < long(kCols) * D; e += blockDim.x) {
      const long j = j0 + e / D, d = e % D;
      ks[e] = j < keys ? k[j * a.kw() + long(kvh) * D + d] : 0;
      vs[e] = j < keys ? v[j * a.kw() + long(kvh) * D + d] : 0;
    }
    __syncthreads();
    if (active) {
      const long mine = a.past + i + 1;  // keys this query sees
      for (int jj = 0; jj < kCols && j0 + jj < mine; jj++) {
        const float s = dot(qr, ks + jj * D, D);
        if (s > m) {
          // Rescale what was accumulated under the old maximum.
          const float corr = expf(m - s);
          l *= corr;
          for (int d = 0; d < D; d++) acc[d] *= corr;
          m = s;
        }
        const float p = expf(s - m);
        l += p;
        for (int d = 0; d < D; d++) acc[d] += p * vs[jj * D + d];
      }
    }
    __syncthreads();
  }
  if (active) {
    for (int d = 0; d < D; d++) out[i * a.qw() + long(h) * D + d] = float(acc[d] / l);
  }
}

// attention_backward_kernel1 (readable): one thread per (query, head). With
// p_j the softmax of s_j = scale q.k_j, dp_j = dout.v_j and
// delta = sum_j p_j dp_j: ds_j = p_j (dp_j - delta), dq = scale sum_j ds_j
// k_j (overwritten), dk_j += scale ds_j q and dv_j += p_j dout (atomics).
__global__ void attention_backward_kernel1(float* dq, float* dk, float* dv, const float* dout, const float* q,
                                           const float* k, const float* v, AttnShape a) {
  const long idx = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= a.n * a.heads) return;
  const long i = idx / a.heads;
  const int h = int(idx % a.heads), kvh = h / (a.heads / a.kv_heads), D = a.dim;
  const long off = i * a.qw() + long(h) * D;
  const float *qi = q + off, *doi = dout + off;
  float* dqi = dq + off;
  const long keys = a.past + i + 1;
  float m = -INFINITY;
  for (long j = 0; j < keys; j++) m = fmaxf(m, a.scale * dot(qi, k + j * a.kw() + long(kvh) * D, D));
  double l = 0;
  for (long j = 0; j < keys; j++) l += expf(a.scale * dot(qi, k + j * a.kw() + long(kvh) * D, D) - m);
  const float lse = m + float(log(l));
  double delta = 0;
  for (long j = 0; j < keys; j++) {
    const float* kj = k + j * a.kw() + long(kvh) * D;
    const float* vj = v + j * a.kw() + long(kvh) * D;
    delta += expf(a.scale * dot(qi, kj, D) - lse) * dot(doi, vj, D);
  }
  for (int d = 0; d < D; d++) dqi[d] = 0;
  for (long j = 0; j < keys; j++) {
    const long kvoff = j * a.kw() + long(kvh) * D;
    const float p = expf(a.scale * dot(qi, k + kvoff, D) - lse);
    const float ds = p * (dot(doi, v + kvoff, D) - float(delta)) * a.scale;
    for (int d = 0; d < D; d++) {
      dqi[d] += ds * k[kvoff + d];
      atomicAdd(&dk[kvoff + d], ds * qi[d]);
      atomicAdd(&dv[kvoff + d], p * doi[d]);
    }
  }
}

// The tiled backward (FlashAttention-2's split, without atomics): a stats
// pass recomputes each query's log-sum-exp and delta = sum_j p_j dp_j with
// the same online softmax as the forward; a dq pass streams key/value tiles
// per block of queries; a dk/dv pass streams query tiles (of every query
// head of the KV group) per block of keys, one thread per key, so each
// thread owns its key's gradient and the result is deterministic.

// attention_bwd_stats_kernel: grid (query blocks, heads), one thread per
// query; stats[2*(i*heads+h)] = lse, stats[2*(i*heads+h)+1] = delta.
__global__ void attention_bwd_stats_kernel(float* stats, const float* dout, const float* q, const float* k,
                                           const float* v, AttnShape a) {
  HONE_DYNAMIC_SHARED(float, smem);
  auto ks = smem;
  auto vs = smem + kCols * a.dim;
  const int h = blockIdx.y, kvh = h / (a.heads / a.kv_heads), D = a.dim;
  const long i0 = long(blockIdx.x) * kRows, i = i0 + threadIdx.x;
  const bool active = i < a.n;
  float qr[kMaxDim], dor[kMaxDim];
  for (int d = 0; d < D; d++) {
    qr[d] = active ? q[i * a.qw() + long(h) * D + d] * a.scale : 0;
    dor[d] = active ? dout[i * a.qw() + long(h) * D + d] : 0;
  }
  float m = -INFINITY;
  double l = 0, acc = 0;  // acc = sum_j exp(s_j - m) dp_j; sums in double, as kernels/cpu does
  const long last = i0 + kRows - 1 < a.n - 1 ? i0 + kRows - 1 : a.n - 1;
  const long keys = a.past + last + 1;
  for (long j0 = 0; j0 < keys; j0 += kCols) {
    for (long e = threadIdx.x; e < long(kCols) * D; e += blockDim.x) {
      const long j = j0 + e / D, d = e % D;
      ks[e] = j < keys ? k[j * a.kw() + long(kvh) * D + d] : 0;
      vs[e] = j < keys ? v[j * a.kw() + long(kvh) * D + d] : 0;
    }
    __syncthreads();
    if (active) {
      const long mine = a.past + i + 1;
      for (int jj = 0; jj < kCols && j0 + jj < mine; jj++) {
        const float s = dot(qr, ks + jj * D, D);
        if (s > m) {
          const float corr = expf(m - s);
          l *= corr;
          acc *= corr;
          m = s;
        }
        const float p = expf(s - m);
        l += p;
        acc += p * dot(dor, vs + jj * D, D);
      }
    }
    __syncthreads();
  }
  if (active) {
    stats[2 * (i * a.heads + h)] = m + float(log(l));
    stats[2 * (i * a.heads + h) + 1] = float(acc / l);
  }
}

// attention_bwd_dq_kernel: grid (query blocks, heads), one thread per query:
// dq = scale * sum_j p_j (dp_j - delta) k_j, overwritten.
__global__ void attention_bwd_dq_kernel(float* dq, const float* stats, const float* dout, const float* q,
                                        const float* k, const float* v, AttnShape a) {
  HONE_DYNAMIC_SHARED(float, smem);
  auto ks = smem;
  auto vs = smem + kCols * a.dim;
  const int h = blockIdx.y, kvh = h / (a.heads / a.kv_heads), D = a.dim;
  const long i0 = long(blockIdx.x) * kRows, i = i0 + threadIdx.x;
  const bool active = i < a.n;
  float qr[kMaxDim], dor[kMaxDim], acc[kMaxDim];
  for (int d = 0; d < D; d++) {
    qr[d] = active ? q[i * a.qw() + long(h) * D + d] * a.scale : 0;
    dor[d] = active ? dout[i * a.qw() + long(h) * D + d] : 0;
    acc[d] = 0;
  }
  const float lse = active ? stats[2 * (i * a.heads + h)] : 0;
  const float delta = active ? stats[2 * (i * a.heads + h) + 1] : 0;
  const long last = i0 + kRows - 1 < a.n - 1 ? i0 + kRows - 1 : a.n - 1;
  const long keys = a.past + last + 1;
  for (long j0 = 0; j0 < keys; j0 += kCols) {
    for (long e = threadIdx.x; e < long(kCols) * D; e += blockDim.x) {
      const long j = j0 + e / D, d = e % D;
      ks[e] = j < keys ? k[j * a.kw() + long(kvh) * D + d] : 0;
      vs[e] = j < keys ? v[j * a.kw() + long(kvh) * D + d] : 0;
    }
    __syncthreads();
    if (active) {
      const long mine = a.past + i + 1;
      for (int jj = 0; jj < kCols && j0 + jj < mine; jj++) {
        const float p = expf(dot(qr, ks + jj * D, D) - lse);
        const float ds = p * (dot(dor, vs + jj * D, D) - delta) * a.scale;
        for (int d = 0; d < D; d++) acc[d] += ds * ks[jj * D + d];
      }
    }
    __syncthreads();
  }
  if (active) {
    for (int d = 0; d < D; d++) dq[i * a.qw() + long(h) * D + d] = acc[d];
  }
}

// The dk/dv pass: kKeys keys per block (one per thread), kQueries query rows
// per shared-memory tile.
constexpr int kKeys = 64, kQueries = 32;

// attention_bwd_dkdv_kernel: grid (key blocks, kv heads), one thread per key
// j: for every query head of the group and every query i that sees j
// (past + i >= j), dv_j += p dO_i and dk_j += scale * p (dp - delta_i) q_i;
// both accumulate into dk and dv.
__global__ void attention_bwd_dkdv_kernel(float* dk, float* dv, const float* stats, const float* dout,
                                          const float* q, const float* k, const float* v, AttnShape a) {
  HONE_DYNAMIC_SHARED(float, smem);
  const int D = a.dim, kvh = blockIdx.y, group = a.heads / a.kv_heads;
  auto qs = smem;                      // [kQueries][D], scaled queries
  auto dos = smem + kQueries * D;      // [kQueries][D]
  auto st = smem + 2 * kQueries * D;   // [kQueries][2]: lse, delta
  const long keys = a.past + a.n;
  const long j0 = long(blockIdx.x) * kKeys, j = j0 + threadIdx.x;
  const bool active = j < keys;
  float kr[kMaxDim], vr[kMaxDim], dkr[kMaxDim], dvr[kMaxDim];
  for (int d = 0; d < D; d++) {
    kr[d] = active ? k[j * a.kw() + long(kvh) * D + d] : 0;
    vr[d] = active ? v[j * a.kw() + long(kvh) * D + d] : 0;
    dkr[d] = 0;
    dvr[d] = 0;
  }
  // The first query that sees key j0 is i = j0 - past.
  const long first = j0 - a.past > 0 ? j0 - a.past : 0;
  for (int h = kvh * group; h < (kvh + 1) * group; h++) {
    for (long i0 = first; i0 < a.n; i0 += kQueries) {
      for (long e = threadIdx.x; e < long(kQueries) * D; e += blockDim.x) {
        const long i = i0 + e / D, d = e % D;
        qs[e] = i < a.n ? q[i * a.qw() + long(h) * D + d] * a.scale : 0;
        dos[e] = i < a.n ? dout[i * a.qw() + long(h) * D + d] : 0;
      }
      for (long e = threadIdx.x; e < 2L * kQueries; e += blockDim.x) {
        const long i = i0 + e / 2;
        st[e] = i < a.n ? stats[2 * (i * a.heads + h) + e % 2] : 0;
      }
      __syncthreads();
      if (active) {
        for (int ii = 0; ii < kQueries && i0 + ii < a.n; ii++) {
          if (a.past + i0 + ii < j) continue;  // causal: query i0+ii does not see key j
          const auto qi = qs + ii * D;
          const auto doi = dos + ii * D;
          const float p = expf(dot(qi, kr, D) - st[2 * ii]);
          const float ds = p * (dot(doi, vr, D) - st[2 * ii + 1]);
          for (int d = 0; d < D; d++) {
            dvr[d] += p * doi[d];
            dkr[d] += ds * qi[d];  // qi carries the scale
          }
        }
      }
      __syncthreads();
    }
  }
  if (active) {
    for (int d = 0; d < D; d++) {
      dk[j * a.kw() + long(kvh) * D + d] += dkr[d];
      dv[j * a.kw() + long(kvh) * D + d] += dvr[d];
    }
  }
}

}  // namespace hone

using namespace hone;

extern "C" {

int hone_attention(hone_ctx* c, float* out, const float* q, const float* k, const float* v, long n, int heads,
                   int kv_heads, int head_dim, long past, float scale) {
  HONE_ENTRY(c);
  if (n == 0) return 0;
  const AttnShape a{n, past, heads, kv_heads, head_dim, scale};
  if (c->variant == hone_variant_fast && head_dim <= kMaxDim) {
    const dim3 grid(unsigned(ceil_div(n, kRows)), unsigned(heads));
    HONE_LAUNCH(attention_kernel2, grid, kRows, 2 * kCols * head_dim * sizeof(float), c->stream, out, q, k, v, a);
  } else {
    HONE_LAUNCH(attention_kernel1, unsigned(ceil_div(n * heads, 64)), 64, 0, c->stream, out, q, k, v, a);
  }
  return check_launch(c, "attention");
}

int hone_attention_backward(hone_ctx* c, float* dq, float* dk, float* dv, const float* dout, const float* q,
                            const float* k, const float* v, long n, int heads, int kv_heads, int head_dim, long past,
                            float scale) {
  HONE_ENTRY(c);
  if (n == 0) return 0;
  const AttnShape a{n, past, heads, kv_heads, head_dim, scale};
  if (c->variant == hone_variant_fast && head_dim <= kMaxDim) {
    Workspace ws{c};
    if (ws.reserve(Workspace::align(2 * n * heads * sizeof(float)))) return -1;
    float* stats = ws.take<float>(2 * n * heads);
    const dim3 qgrid(unsigned(ceil_div(n, kRows)), unsigned(heads));
    const size_t tiles = 2 * kCols * head_dim * sizeof(float);
    HONE_LAUNCH(attention_bwd_stats_kernel, qgrid, kRows, tiles, c->stream, stats, dout, q, k, v, a);
    if (check_launch(c, "attention_backward stats")) return -1;
    HONE_LAUNCH(attention_bwd_dq_kernel, qgrid, kRows, tiles, c->stream, dq, stats, dout, q, k, v, a);
    if (check_launch(c, "attention_backward dq")) return -1;
    const dim3 kgrid(unsigned(ceil_div(past + n, kKeys)), unsigned(kv_heads));
    HONE_LAUNCH(attention_bwd_dkdv_kernel, kgrid, kKeys, (2 * kQueries * head_dim + 2 * kQueries) * sizeof(float),
                c->stream, dk, dv, stats, dout, q, k, v, a);
    return check_launch(c, "attention_backward dk dv");
  }
  HONE_LAUNCH(attention_backward_kernel1, unsigned(ceil_div(n * heads, 64)), 64, 0, c->stream, dq, dk, dv, dout, q, k,
              v, a);
  return check_launch(c, "attention_backward");
}

}  // extern "C"
