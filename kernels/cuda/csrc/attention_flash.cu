// attention_flash.cu: causal grouped-query attention with bf16 inputs on
// tensor cores, FlashAttention-2 style (Dao, 2023), forward and backward;
// the shape contract is attention.cu's (q [n, heads*D], k and v
// [past+n, kv_heads*D], query i at position past+i sees keys 0..past+i,
// query head h reads kv head h / (heads/kv_heads)).
//
// Precision (kernels.Attn.BF16): q, k, v and dout are rounded to bf16
// (round to nearest even) once per call, into packed copies the kernels
// read; every product runs on
// mma.sync m16n8k16 (bf16 x bf16, float32 accumulate); the softmax, its
// statistics and every accumulator are float32; the probabilities P (for
// P V and P^T dO) and the score gradients dS (for dS K and dS^T Q) are
// rounded to bf16 for their matrix products, as FlashAttention-2 does.
// The readable reference is attention.cu's kernels run on the rounded
// inputs (hone_attention_bf16 falls back to them for the readable variant
// and head dimensions other than 64 and 128).
//
// Layout: a block is 4 warps. Forward and dQ: a block takes 64 rows (the
// blocks of the last rows, which see the most keys, start first, so the
// short ones fill the tail of the grid), a row
// being a (query, head of the KV group) pair, packed query-major (row R is
// query R / group, head kvh*group + R % group), so the query heads of a KV
// group share each key/value tile the block loads; each warp owns 16 rows
// and streams 64-key tiles through shared memory, two stages deep (the
// next tile's cp.async copies run while this one is multiplied): S = Q K^T
// (16 x 64 per warp), an online softmax in registers, O += P V. dK/dV: a block takes 64
// keys of one KV head, each warp 16 keys, and streams 64-row tiles of the
// rows that see them, two stages deep: S^T = K Q^T, P^T = exp(S^T - lse), dV += P^T dO,
// dP^T = V dO^T, dS^T = P^T (dP^T - delta), dK += dS^T Q. dQ has its own
// pass (S, P, dP = dO V^T, dS, dQ += dS K), so every output element has one
// writer: no atomics, deterministic. delta = rowsum(dO * O) comes from the
// forward's output and log-sum-exp when the caller kept them (else the
// backward runs the forward once to get them). No T x T matrix exists.
#include "hone_cuda.h"
#include "internal.cuh"

// The loops over a thread's fragments must unroll for them to stay in
// registers (an array indexed at run time goes to local memory).
#ifdef HONE_CUDA_EMU
#define HONE_UNROLL
#else
#define HONE_UNROLL _Pragma("unroll")
#endif

namespace hone {
namespace flash {

constexpr int kThreads = 128;  // 4 warps
constexpr int kBlock = 64;     // rows (forward, dQ) or keys (dK/dV) per block
constexpr int kTile = 64;      // keys (forward, dQ) or rows (dK/dV) per tile
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

struct Shape {
  long n, past;  // queries; cached keys before them
  int heads, kv_heads, group;
  long qw, kw;       // row widths of q and k
  float scale;       // of the scores
  float scale_log2;  // scale * log2(e): the softmax runs in base 2
};

// A tile in shared memory: 64 rows of D bf16 values, two per 32-bit word
// (the lower column in the low half), Stride<D> words per row. The 4
// words of padding per row put the 8 rows a fragment load touches in
// different banks and keep each row 16-byte aligned.
template <int D>
constexpr int Stride = D / 2 + 4;

__device__ inline uint32_t pack_bf16(float lo, float hi) {
  return uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(lo))) |
         (uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(hi))) << 16);
}

__device__ inline float round_bf16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

// copy16 starts copying 16 bytes (8 bf16) from global src to the tile's
// words w..w+3: cp.async (Ampere and later), landed by cp_wait (the
// emulator writes the words then, emu::cp_async16).
template <class P>
__device__ inline void copy16(P tile, int w, const uint16_t* src) {
#ifdef HONE_CUDA_EMU
  ::emu::cp_async16(tile + w, src);
#else
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(tile + w));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
#endif
}

// cp_commit closes the group of copies started since the last one;
// cp_wait<N> waits until at most N groups are still in flight. A
// __syncthreads after the wait makes every thread's copies visible.
__device__ inline void cp_commit() {
#ifdef HONE_CUDA_EMU
  ::emu::cp_async_commit();
#else
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ inline void cp_wait() {
#ifdef HONE_CUDA_EMU
  ::emu::cp_async_wait(N);
#else
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

// prefetch_then_wait is a two-stage pipeline's turn: when there is a next
// tile, start its copies (load, one group) and wait for all but them, else
// wait for everything; a __syncthreads must follow before the tile is read.
template <class F>
__device__ inline void prefetch_then_wait(bool more, F load) {
  if (more) {
    load();
    cp_wait<1>();
  } else {
    cp_wait<0>();
  }
}

// load_tile starts filling a 64-row tile: row r is the D bf16 values at
// row(r) (16-byte aligned), or zeros where row(r) is null. Each thread
// copies whole 16-byte pieces.
template <int D, class P, class RowFn>
__device__ inline void load_tile(P tile, RowFn row) {
  constexpr int SW = Stride<D>, C = D / 8;
  for (int e = threadIdx.x; e < kTile * C; e += kThreads) {
    const int r = e / C, c = e % C;
    const uint16_t* src = row(r);
    if (src) {
      copy16(tile, r * SW + 4 * c, src + 8 * c);
    } else {
      for (int i = 0; i < 4; i++) tile[r * SW + 4 * c + i] = 0u;
    }
  }
}

// ldsm<N, T>: ldmatrix.sync.aligned.m8n8.xN[.trans].shared.b16, one warp
// loading N 8 x 8 bf16 matrices from shared memory; lane l gives the
// address of row l % 8 of matrix l / 8 (16 bytes, 16-byte aligned) and
// receives of matrix i the elements (row l/4, cols 2(l%4), +1), or with T
// (rows 2(l%4), +1, col l/4), in d[i]: one instruction where four 32-bit
// loads (and, transposed, halfword shuffling) did the same.
template <int N, bool T, class P>
__device__ inline void ldsm(uint32_t (&d)[N], P row) {
#ifdef HONE_CUDA_EMU
  hone_ldmatrix(d, N, T, row);
#else
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(row));
  if constexpr (N == 4 && !T) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(a));
  } else if constexpr (N == 2 && !T) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(d[0]), "=r"(d[1]) : "r"(a));
  } else if constexpr (N == 2 && T) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n" : "=r"(d[0]), "=r"(d[1]) : "r"(a));
  } else {
    static_assert(N == 4 || N == 2, "ldsm: x2 or x4");
  }
#endif
}

// Fragments of mma.m16n8k16 (the PTX ISA's layout; g = lane / 4, t = lane % 4),
// each by one ldmatrix.
// frag_a: the A operand (16 x 16) at rows r0.., columns c0.. of a tile:
// a[0] = (row g, cols 2t, 2t+1), a[1] = (row g+8, ...), a[2] = (row g,
// cols 2t+8, +9), a[3] = (row g+8, cols 2t+8, +9): matrices (rows r0 or
// r0+8) x (cols c0 or c0+8).
template <int D, class P>
__device__ inline void frag_a(uint32_t (&a)[4], P t, int r0, int c0, int lane) {
  constexpr int SW = Stride<D>;
  const int i = lane >> 3, r = r0 + (i & 1) * 8 + (lane & 7), c = c0 + (i >> 1) * 8;
  ldsm<4, false>(a, t + r * SW + c / 2);
}

// frag_b_nk: the B operand (16 x 8, k x n) of a tile stored n-major:
// B[k][n] = tile(n0 + n, k0 + k): b[0] = (k 2t, 2t+1; n g), b[1] = (k 2t+8,
// +9; n g), matrices rows n0.. x cols k0 or k0+8.
template <int D, class P>
__device__ inline void frag_b_nk(uint32_t (&b)[2], P t, int n0, int k0, int lane) {
  constexpr int SW = Stride<D>;
  const int i = (lane >> 3) & 1, r = n0 + (lane & 7), c = k0 + i * 8;
  ldsm<2, false>(b, t + r * SW + c / 2);
}

// frag_b_kn: the B operand of a tile stored k-major: B[k][n] = tile(k0 + k,
// n0 + n): the transposes of the matrices rows k0 or k0+8 x cols n0...
template <int D, class P>
__device__ inline void frag_b_kn(uint32_t (&b)[2], P t, int k0, int n0, int lane) {
  constexpr int SW = Stride<D>;
  const int i = (lane >> 3) & 1, r = k0 + i * 8 + (lane & 7);
  ldsm<2, true>(b, t + r * SW + n0 / 2);
}

// a_from_c: the A operand for k columns 16kk..16kk+15 from accumulators
// c[2kk] and c[2kk+1] (two 16 x 8 n-tiles), rounded to bf16: the layouts
// line up, so P and dS never leave registers.
__device__ inline void a_from_c(uint32_t (&a)[4], const float (&c0)[4], const float (&c1)[4]) {
  a[0] = pack_bf16(c0[0], c0[1]);
  a[1] = pack_bf16(c0[2], c0[3]);
  a[2] = pack_bf16(c1[0], c1[1]);
  a[3] = pack_bf16(c1[2], c1[3]);
}

// mma: d += a b, one warp-wide m16n8k16 bf16 product with float32
// accumulation.
__device__ inline void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#ifdef HONE_CUDA_EMU
  hone_mma_bf16_m16n8k16(d, a, b, d);
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// The row's reductions over the 4 lanes (t = 0..3) that hold its columns.
__device__ inline float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(kFullMask, x, 1));
  return fmaxf(x, __shfl_xor_sync(kFullMask, x, 2));
}
__device__ inline float quad_sum(float x) {
  x += __shfl_xor_sync(kFullMask, x, 1);
  return x + __shfl_xor_sync(kFullMask, x, 2);
}

// row_query is packed row R's query, or -1 past the last row.
__device__ inline long row_query(long R, const Shape& a) { return R < a.n * a.group ? R / a.group : -1; }
// row_head is packed row R's query head, of KV head kvh.
__device__ inline int row_head(long R, int kvh, const Shape& a) { return kvh * a.group + int(R % a.group); }

// packed_rows is load_tile's row function for the 64 packed rows from R0
// of KV head kvh of a [n, heads*D] tensor (q, dout): null past the last.
template <int D>
__device__ inline auto packed_rows(const uint16_t* base, long R0, int kvh, const Shape& a) {
  return [=, &a](int r) -> const uint16_t* {
    const long R = R0 + r;
    return R < a.n * a.group ? base + (R / a.group) * a.qw + long(row_head(R, kvh, a)) * D : nullptr;
  };
}

// load_kv starts copying the key and value tiles of keys j0.. (those
// before kend) of KV head kvh into stage and stage + one tile, as one
// cp.async group.
template <int D, class P>
__device__ inline void load_kv(P stage, const uint16_t* k, const uint16_t* v, long j0, long kend, int kvh,
                               const Shape& a) {
  load_tile<D>(stage, [&](int r) -> const uint16_t* { return j0 + r < kend ? k + (j0 + r) * a.kw + long(kvh) * D : nullptr; });
  load_tile<D>(stage + kTile * Stride<D>,
               [&](int r) -> const uint16_t* { return j0 + r < kend ? v + (j0 + r) * a.kw + long(kvh) * D : nullptr; });
  cp_commit();
}

// attention_flash_fwd<D>: grid (row blocks, kv heads). Writes out and, if
// lse is set, each (query, head)'s log-sum-exp of the scaled scores
// (natural log) at lse[query*heads + head].
template <int D>
__global__ void __launch_bounds__(kThreads) attention_flash_fwd(float* out, float* lse, const uint16_t* q,
                                                                 const uint16_t* k, const uint16_t* v, Shape a) {
  constexpr int SW = Stride<D>, KS = D / 16, NT = D / 8, TW = kTile * SW;
  HONE_DYNAMIC_SHARED(uint32_t, smem);  // two stages of [key tile][value tile]; the queries first in stage 1
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane >> 2, tg = lane & 3;
  const int kvh = blockIdx.y;
  const long R0 = long(gridDim.x - 1 - blockIdx.x) * kBlock, rows = a.n * a.group;  // the longest (last) rows first
  const long first = R0 / a.group, last = ((R0 + kBlock < rows ? R0 + kBlock : rows) - 1) / a.group;
  const long kend = a.past + last + 1;  // keys the block's last query sees
  auto kv_tile = [&](long j0, int stage) { load_kv<D>(smem + stage * 2 * TW, k, v, j0, kend, kvh, a); };
  load_tile<D>(smem + 2 * TW, packed_rows<D>(q, R0, kvh, a));
  cp_commit();
  kv_tile(0, 0);
  cp_wait<1>();
  __syncthreads();
  uint32_t qf[KS][4];
  HONE_UNROLL
  for (int kk = 0; kk < KS; kk++) frag_a<D>(qf[kk], smem + 2 * TW, warp * 16, kk * 16, lane);
  __syncthreads();  // stage 1 holds key and value tiles from here on
  long qi[2];       // the queries of this thread's rows warp*16 + g and + 8
  HONE_UNROLL
  for (int x = 0; x < 2; x++) qi[x] = row_query(R0 + warp * 16 + g + 8 * x, a);
  float o[NT][4] = {};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0, 0};  // running max (base 2) and this lane's part of the sum
  for (long j0 = 0, it = 0; j0 < kend; j0 += kTile, it++) {
    // The next tile's copies run while this one is multiplied.
    prefetch_then_wait(j0 + kTile < kend, [&] { kv_tile(j0 + kTile, int((it + 1) & 1)); });
    __syncthreads();
    const auto ks = smem + (it & 1) * 2 * TW, vs = ks + TW;
    float s[8][4] = {};
    HONE_UNROLL
    for (int kk = 0; kk < KS; kk++) {
      HONE_UNROLL
      for (int nt = 0; nt < 8; nt++) {
        uint32_t b[2];
        frag_b_nk<D>(b, ks, nt * 8, kk * 16, lane);
        mma(s[nt], qf[kk], b);
      }
    }
    // The causal mask, on tiles that reach past the block's first query.
    const bool diag = j0 + kTile - 1 > a.past + first;
    HONE_UNROLL
    for (int x = 0; x < 2; x++) {
      float mx = m[x];
      HONE_UNROLL
      for (int nt = 0; nt < 8; nt++) {
        HONE_UNROLL
        for (int e = 0; e < 2; e++) {
          const long j = j0 + nt * 8 + 2 * tg + e;
          float& sv = s[nt][2 * x + e];
          sv = diag && (qi[x] < 0 || j > a.past + qi[x]) ? -INFINITY : sv * a.scale_log2;
          mx = fmaxf(mx, sv);
        }
      }
      mx = quad_max(mx);
      const float mu = mx == -INFINITY ? 0.f : mx;  // a row with no key yet (past the last row)
      // Online softmax: what was accumulated under the old maximum shrinks.
      const float corr = exp2f(m[x] - mu);
      m[x] = mx;
      l[x] *= corr;
      HONE_UNROLL
      for (int nt = 0; nt < NT; nt++) {
        o[nt][2 * x] *= corr;
        o[nt][2 * x + 1] *= corr;
      }
      HONE_UNROLL
      for (int nt = 0; nt < 8; nt++) {
        HONE_UNROLL
        for (int e = 0; e < 2; e++) {
          const float p = exp2f(s[nt][2 * x + e] - mu);
          s[nt][2 * x + e] = p;
          l[x] += p;
        }
      }
    }
    // O += P V: P (bf16) straight from the score registers.
    HONE_UNROLL
    for (int kk = 0; kk < kTile / 16; kk++) {
      uint32_t pa[4];
      a_from_c(pa, s[2 * kk], s[2 * kk + 1]);
      HONE_UNROLL
      for (int nt = 0; nt < NT; nt++) {
        uint32_t b[2];
        frag_b_kn<D>(b, vs, kk * 16, nt * 8, lane);
        mma(o[nt], pa, b);
      }
    }
    __syncthreads();  // before the next iteration's copies overwrite this stage
  }
  HONE_UNROLL
  for (int x = 0; x < 2; x++) {
    const float sum = quad_sum(l[x]);
    if (qi[x] < 0) continue;
    const long R = R0 + warp * 16 + g + 8 * x;
    const int h = row_head(R, kvh, a);
    float* orow = out + qi[x] * a.qw + long(h) * D;
    const float inv = 1.f / sum;
    HONE_UNROLL
    for (int nt = 0; nt < NT; nt++) {
      orow[nt * 8 + 2 * tg] = o[nt][2 * x] * inv;
      orow[nt * 8 + 2 * tg + 1] = o[nt][2 * x + 1] * inv;
    }
    if (lse && tg == 0) lse[qi[x] * a.heads + h] = (m[x] + log2f(sum)) * kLn2;
  }
}

// attention_flash_delta: one thread per (query, head): stats[2e] = lse,
// stats[2e+1] = delta = sum_d bf16(dout) * out (dP's row sum against P:
// sum_j P_j dP_j = dO . sum_j P_j V_j = dO . O).
__global__ void attention_flash_delta(float* stats, const float* lse, const float* dout, const float* out, Shape a,
                                      int D) {
  const long e = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= a.n * a.heads) return;
  const long i = e / a.heads;
  const int h = int(e % a.heads);
  const float *d = dout + i * a.qw + long(h) * D, *o = out + i * a.qw + long(h) * D;
  float s = 0;
  for (int x = 0; x < D; x++) s += round_bf16(d[x]) * o[x];
  stats[2 * e] = lse[e];
  stats[2 * e + 1] = s;
}

// attention_flash_dq<D>: grid (row blocks, kv heads); dq is overwritten:
// dq = scale * sum_j P_j (dP_j - delta) k_j.
template <int D>
__global__ void __launch_bounds__(kThreads) attention_flash_dq(float* dq, const float* stats, const uint16_t* dout,
                                                                const uint16_t* q, const uint16_t* k,
                                                                const uint16_t* v, Shape a) {
  constexpr int SW = Stride<D>, KS = D / 16, NT = D / 8, TW = kTile * SW;
  HONE_DYNAMIC_SHARED(uint32_t, smem);  // two stages of [key tile][value tile]; queries and dout first in stage 1
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane >> 2, tg = lane & 3;
  const int kvh = blockIdx.y;
  const long R0 = long(gridDim.x - 1 - blockIdx.x) * kBlock, rows = a.n * a.group;  // the longest (last) rows first
  const long first = R0 / a.group, last = ((R0 + kBlock < rows ? R0 + kBlock : rows) - 1) / a.group;
  const long kend = a.past + last + 1;
  auto kv_tile = [&](long j0, int stage) { load_kv<D>(smem + stage * 2 * TW, k, v, j0, kend, kvh, a); };
  load_tile<D>(smem + 2 * TW, packed_rows<D>(q, R0, kvh, a));
  load_tile<D>(smem + 3 * TW, packed_rows<D>(dout, R0, kvh, a));
  cp_commit();
  kv_tile(0, 0);
  cp_wait<1>();
  __syncthreads();
  uint32_t qf[KS][4], df[KS][4];
  HONE_UNROLL
  for (int kk = 0; kk < KS; kk++) {
    frag_a<D>(qf[kk], smem + 2 * TW, warp * 16, kk * 16, lane);
    frag_a<D>(df[kk], smem + 3 * TW, warp * 16, kk * 16, lane);
  }
  __syncthreads();
  long qi[2];
  float lse2[2], delta[2];
  HONE_UNROLL
  for (int x = 0; x < 2; x++) {
    const long R = R0 + warp * 16 + g + 8 * x;
    qi[x] = row_query(R, a);
    const long e = qi[x] * a.heads + (qi[x] < 0 ? 0 : row_head(R, kvh, a));
    lse2[x] = qi[x] < 0 ? INFINITY : stats[2 * e] * kLog2e;  // a row past the end: P = 0
    delta[x] = qi[x] < 0 ? 0.f : stats[2 * e + 1];
  }
  float acc[NT][4] = {};
  for (long j0 = 0, it = 0; j0 < kend; j0 += kTile, it++) {
    prefetch_then_wait(j0 + kTile < kend, [&] { kv_tile(j0 + kTile, int((it + 1) & 1)); });
    __syncthreads();
    const auto ks = smem + (it & 1) * 2 * TW, vs = ks + TW;
    float s[8][4] = {}, dp[8][4] = {};
    HONE_UNROLL
    for (int kk = 0; kk < KS; kk++) {
      HONE_UNROLL
      for (int nt = 0; nt < 8; nt++) {
        uint32_t b[2];
        frag_b_nk<D>(b, ks, nt * 8, kk * 16, lane);
        mma(s[nt], qf[kk], b);
        frag_b_nk<D>(b, vs, nt * 8, kk * 16, lane);
        mma(dp[nt], df[kk], b);
      }
    }
    const bool diag = j0 + kTile - 1 > a.past + first;
    HONE_UNROLL
    for (int nt = 0; nt < 8; nt++) {
      HONE_UNROLL
      for (int c = 0; c < 4; c++) {
        const int x = c >> 1;
        const long j = j0 + nt * 8 + 2 * tg + (c & 1);
        const bool masked = diag && (qi[x] < 0 || j > a.past + qi[x]);
        const float p = masked ? 0.f : exp2f(s[nt][c] * a.scale_log2 - lse2[x]);
        s[nt][c] = p * (dp[nt][c] - delta[x]);  // dS
      }
    }
    HONE_UNROLL
    for (int kk = 0; kk < kTile / 16; kk++) {
      uint32_t da[4];
      a_from_c(da, s[2 * kk], s[2 * kk + 1]);
      HONE_UNROLL
      for (int nt = 0; nt < NT; nt++) {
        uint32_t b[2];
        frag_b_kn<D>(b, ks, kk * 16, nt * 8, lane);
        mma(acc[nt], da, b);
      }
    }
    __syncthreads();
  }
  HONE_UNROLL
  for (int x = 0; x < 2; x++) {
    if (qi[x] < 0) continue;
    const long R = R0 + warp * 16 + g + 8 * x;
    float* drow = dq + qi[x] * a.qw + long(row_head(R, kvh, a)) * D;
    HONE_UNROLL
    for (int nt = 0; nt < NT; nt++) {
      drow[nt * 8 + 2 * tg] = acc[nt][2 * x] * a.scale;
      drow[nt * 8 + 2 * tg + 1] = acc[nt][2 * x + 1] * a.scale;
    }
  }
}

// attention_flash_dkdv<D>: grid (key blocks, kv heads, row splits): the
// gradients of the block's 64 keys over its split's share of the rows
// (query, head of the group) that see them. One split (gridDim.z == 1)
// adds them to dk and dv; with several, split z stores its part at
// part_k, part_v + z * keys * kw (every element, zeros where it has no
// rows) and attention_flash_sum_parts adds the parts in split order, so
// the key blocks that every row sees (the first ones, under the causal
// mask) no longer run alone at the end of the grid.
template <int D>
__global__ void __launch_bounds__(kThreads) attention_flash_dkdv(float* dk, float* dv, float* part_k, float* part_v,
                                                                  const float* stats, const uint16_t* dout,
                                                                  const uint16_t* q, const uint16_t* k,
                                                                  const uint16_t* v, Shape a) {
  constexpr int SW = Stride<D>, KS = D / 16, NT = D / 8, TW = kTile * SW;
  HONE_DYNAMIC_SHARED(uint32_t, smem);
  auto ks = smem;           // [64][SW] the block's keys
  auto vs = smem + TW;      // [64][SW] their values
  // Then two stages, each [64][SW] of a row tile's queries, [64][SW] of their
  // output gradients and [64][2] of their lse (base 2) and delta (float bits).
  constexpr int kStage = 2 * TW + 2 * kTile;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane >> 2, tg = lane & 3;
  const int kvh = blockIdx.y;
  const long keys = a.past + a.n, j0 = long(blockIdx.x) * kBlock, rows = a.n * a.group;
  load_tile<D>(ks, [&](int r) -> const uint16_t* { return j0 + r < keys ? k + (j0 + r) * a.kw + long(kvh) * D : nullptr; });
  load_tile<D>(vs, [&](int r) -> const uint16_t* { return j0 + r < keys ? v + (j0 + r) * a.kw + long(kvh) * D : nullptr; });
  auto row_tile = [&](long R0, int stage) {
    auto base = smem + 2 * TW + stage * kStage;
    load_tile<D>(base, packed_rows<D>(q, R0, kvh, a));
    load_tile<D>(base + TW, packed_rows<D>(dout, R0, kvh, a));
    cp_commit();
    auto st = base + 2 * TW;
    for (int r = threadIdx.x; r < kTile; r += kThreads) {
      const long R = R0 + r, i = row_query(R, a);
      const long e = i * a.heads + (i < 0 ? 0 : row_head(R, kvh, a));
      st[2 * r] = __float_as_uint(i < 0 ? INFINITY : stats[2 * e] * kLog2e);
      st[2 * r + 1] = __float_as_uint(i < 0 ? 0.f : stats[2 * e + 1]);
    }
  };
  float dka[NT][4] = {}, dva[NT][4] = {};
  long kj[2];  // this thread's keys (rows warp*16 + g and + 8 of the block)
  HONE_UNROLL
  for (int x = 0; x < 2; x++) kj[x] = j0 + warp * 16 + g + 8 * x;
  // The first query that sees key j0 is j0 - past; the split takes an
  // equal share of the row tiles from there.
  const long i_first = j0 - a.past > 0 ? j0 - a.past : 0;
  const long tiles = ceil_div(rows - i_first * a.group, kTile), per = ceil_div(tiles, long(gridDim.z));
  const long r_begin = i_first * a.group + long(blockIdx.z) * per * kTile;
  const long r_end = r_begin + per * kTile < rows ? r_begin + per * kTile : rows;
  if (r_begin < r_end) {
    row_tile(r_begin, 0);  // its copies join the group of the keys and values
  } else {
    cp_commit();
  }
  for (long R0 = r_begin, it = 0; R0 < r_end; R0 += kTile, it++) {
    prefetch_then_wait(R0 + kTile < r_end, [&] { row_tile(R0 + kTile, int((it + 1) & 1)); });
    __syncthreads();
    const auto qs = smem + 2 * TW + (it & 1) * kStage, ds = qs + TW, st = qs + 2 * TW;
    float s[8][4] = {}, dp[8][4] = {};
    HONE_UNROLL
    for (int kk = 0; kk < KS; kk++) {
      uint32_t ka[4], va[4];
      frag_a<D>(ka, ks, warp * 16, kk * 16, lane);
      frag_a<D>(va, vs, warp * 16, kk * 16, lane);
      HONE_UNROLL
      for (int nt = 0; nt < 8; nt++) {
        uint32_t b[2];
        frag_b_nk<D>(b, qs, nt * 8, kk * 16, lane);
        mma(s[nt], ka, b);  // S^T = K Q^T
        frag_b_nk<D>(b, ds, nt * 8, kk * 16, lane);
        mma(dp[nt], va, b);  // dP^T = V dO^T
      }
    }
    HONE_UNROLL
    for (int nt = 0; nt < 8; nt++) {
      HONE_UNROLL
      for (int c = 0; c < 4; c++) {
        const int col = nt * 8 + 2 * tg + (c & 1);
        const long i = row_query(R0 + col, a);
        const bool masked = i < 0 || kj[c >> 1] > a.past + i;  // also keys past the end: past + i < keys
        const float p = masked ? 0.f : exp2f(s[nt][c] * a.scale_log2 - __uint_as_float(st[2 * col]));
        s[nt][c] = p;
        dp[nt][c] = p * (dp[nt][c] - __uint_as_float(st[2 * col + 1]));  // dS^T
      }
    }
    HONE_UNROLL
    for (int kk = 0; kk < kTile / 16; kk++) {
      uint32_t pa[4], da[4];
      a_from_c(pa, s[2 * kk], s[2 * kk + 1]);
      a_from_c(da, dp[2 * kk], dp[2 * kk + 1]);
      HONE_UNROLL
      for (int nt = 0; nt < NT; nt++) {
        uint32_t b[2];
        frag_b_kn<D>(b, ds, kk * 16, nt * 8, lane);
        mma(dva[nt], pa, b);  // dV += P^T dO
        frag_b_kn<D>(b, qs, kk * 16, nt * 8, lane);
        mma(dka[nt], da, b);  // dK += dS^T Q
      }
    }
    __syncthreads();  // before the next iteration's copies overwrite this stage
  }
  cp_wait<0>();  // a split without rows still waits for its key and value copies
  const bool parts = gridDim.z > 1;
  const long off = parts ? long(blockIdx.z) * keys * a.kw : 0;
  HONE_UNROLL
  for (int x = 0; x < 2; x++) {
    if (kj[x] >= keys) continue;
    float* dkr = (parts ? part_k + off : dk) + kj[x] * a.kw + long(kvh) * D;
    float* dvr = (parts ? part_v + off : dv) + kj[x] * a.kw + long(kvh) * D;
    HONE_UNROLL
    for (int nt = 0; nt < NT; nt++) {
      HONE_UNROLL
      for (int e = 0; e < 2; e++) {
        const int c = nt * 8 + 2 * tg + e;
        if (parts) {
          dkr[c] = dka[nt][2 * x + e] * a.scale;
          dvr[c] = dva[nt][2 * x + e];
        } else {
          dkr[c] += dka[nt][2 * x + e] * a.scale;
          dvr[c] += dva[nt][2 * x + e];
        }
      }
    }
  }
}

// attention_flash_sum_parts: dst[e] += sum over the splits s, in order, of
// part[s * n + e], for dk and dv (n = keys * kw).
__global__ void attention_flash_sum_parts(float* dk, float* dv, const float* part_k, const float* part_v, long n,
                                          int splits) {
  for (long e = long(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += long(gridDim.x) * blockDim.x) {
    float sk = 0, sv = 0;
    for (int z = 0; z < splits; z++) {
      sk += part_k[z * n + e];
      sv += part_v[z * n + e];
    }
    dk[e] += sk;
    dv[e] += sv;
  }
}

// attention_lse_kernel1 (readable, for the fallback): one thread per
// (query, head), the log-sum-exp of the scaled scores, sums in double.
__global__ void attention_lse_kernel1(float* lse, const float* q, const float* k, Shape a, int D) {
  const long e = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= a.n * a.heads) return;
  const long i = e / a.heads;
  const int h = int(e % a.heads), kvh = h / a.group;
  const float* qi = q + i * a.qw + long(h) * D;
  float m = -INFINITY;
  for (long j = 0; j <= a.past + i; j++) {
    float s = 0;
    for (int x = 0; x < D; x++) s += qi[x] * k[j * a.kw + long(kvh) * D + x];
    m = fmaxf(m, a.scale * s);
  }
  double l = 0;
  for (long j = 0; j <= a.past + i; j++) {
    float s = 0;
    for (int x = 0; x < D; x++) s += qi[x] * k[j * a.kw + long(kvh) * D + x];
    l += expf(a.scale * s - m);
  }
  lse[e] = m + float(log(l));
}

// round_kernel: dst = bf16(src), as float32.
__global__ void round_bf16_kernel(float* dst, const float* src, long n) {
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
    dst[i] = round_bf16(src[i]);
  }
}

inline Shape shape(long n, int heads, int kv_heads, int head_dim, long past, float scale) {
  return Shape{n, past, heads, kv_heads, heads / kv_heads, long(heads) * head_dim, long(kv_heads) * head_dim, scale,
               scale * kLog2e};
}

// fast reports whether the tensor-core kernels take a call: the fast
// variant and a head dimension they are built for. They read bf16 copies
// of the operands that the call makes (packed, 16-byte aligned), so any
// float32 view will do.
inline bool fast(hone_ctx* c, int head_dim) {
  return c->variant == hone_variant_fast && (head_dim == 64 || head_dim == 128);
}

// Temp is device memory from the context's caching allocator for one call.
struct Temp {
  hone_ctx* c;
  void* p = nullptr;
  explicit Temp(hone_ctx* c_) : c(c_) {}
  float* get(size_t floats, const char* op) { return static_cast<float*>(bytes(floats * sizeof(float), op)); }
  void* bytes(size_t n, const char* op) {
    if (check_cuda(c, op, c->alloc.alloc(&p, n))) return nullptr;
    return p;
  }
  ~Temp() {
    if (p) c->alloc.free(p);
  }
  Temp(const Temp&) = delete;
  Temp& operator=(const Temp&) = delete;
};

constexpr size_t tiles_bytes(int head_dim, int tiles) { return size_t(tiles) * kTile * (head_dim / 2 + 4) * 4; }

// smem_limit lets kernel take bytes of dynamic shared memory (over the
// default 48 KiB).
template <class K>
int smem_limit(hone_ctx* c, K* kernel, size_t bytes, const char* op) {
  return check_cuda(c, op, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

template <int D>
int forward(hone_ctx* c, float* out, float* lse, const uint16_t* q, const uint16_t* k, const uint16_t* v,
            const Shape& a) {
  const size_t smem = tiles_bytes(D, 4);  // two stages of a key and a value tile
  if (smem_limit(c, attention_flash_fwd<D>, smem, "attention bf16")) return -1;
  const dim3 grid(unsigned(ceil_div(a.n * a.group, kBlock)), unsigned(a.kv_heads));
  HONE_LAUNCH(attention_flash_fwd<D>, grid, kThreads, smem, c->stream, out, lse, q, k, v, a);
  return check_launch(c, "attention bf16");
}

// dkdv_splits is how many row splits the dK/dV pass takes: enough blocks
// for about four waves of two per multiprocessor, no more than the row
// tiles (a split of none only writes zeros), at most 8.
inline int dkdv_splits(hone_ctx* c, long blocks, long row_tiles) {
  const long want = ceil_div(8L * c->sm_count, blocks > 0 ? blocks : 1);
  long s = want < 8 ? want : 8;
  if (s > row_tiles) s = row_tiles;
  return s < 1 ? 1 : int(s);
}

template <int D>
int backward(hone_ctx* c, float* dq, float* dk, float* dv, const float* stats, const uint16_t* dout,
             const uint16_t* q, const uint16_t* k, const uint16_t* v, const Shape& a) {
  const size_t qsmem = tiles_bytes(D, 4);
  if (smem_limit(c, attention_flash_dq<D>, qsmem, "attention bf16 backward dq")) return -1;
  const dim3 qgrid(unsigned(ceil_div(a.n * a.group, kBlock)), unsigned(a.kv_heads));
  HONE_LAUNCH(attention_flash_dq<D>, qgrid, kThreads, qsmem, c->stream, dq, stats, dout, q, k, v, a);
  if (check_launch(c, "attention bf16 backward dq")) return -1;
  // The keys and values, then two stages of a row tile and its statistics.
  const size_t smem = tiles_bytes(D, 6) + 2 * 2 * kTile * sizeof(float);
  if (smem_limit(c, attention_flash_dkdv<D>, smem, "attention bf16 backward dk dv")) return -1;
  const long kblocks = ceil_div(a.past + a.n, kBlock), n = (a.past + a.n) * a.kw;
  const int splits = dkdv_splits(c, kblocks * a.kv_heads, ceil_div(a.n * a.group, kTile));
  Temp tp(c);
  float *part_k = nullptr, *part_v = nullptr;
  if (splits > 1) {
    part_k = tp.get(size_t(2 * splits * n), "attention bf16 backward dk dv");
    if (!part_k) return -1;
    part_v = part_k + splits * n;
  }
  const dim3 kgrid(unsigned(kblocks), unsigned(a.kv_heads), unsigned(splits));
  HONE_LAUNCH(attention_flash_dkdv<D>, kgrid, kThreads, smem, c->stream, dk, dv, part_k, part_v, stats, dout, q, k, v,
              a);
  if (check_launch(c, "attention bf16 backward dk dv")) return -1;
  if (splits == 1) return 0;
  HONE_LAUNCH(attention_flash_sum_parts, grid_for(n, 256), 256, 0, c->stream, dk, dv, part_k, part_v, n, splits);
  return check_launch(c, "attention bf16 backward dk dv sum");
}


// to_bf16 returns x (n floats) rounded to bf16, in t.
inline const uint16_t* to_bf16(hone_ctx* c, Temp& t, const float* x, long n, const char* op) {
  auto* p = static_cast<uint16_t*>(t.bytes(size_t(n) * sizeof(uint16_t), op));
  if (!p || hone_f32_to_bf16(c, p, x, n)) return nullptr;
  return p;
}

// rounded returns a bf16-rounded float32 copy of x (n floats) in t.
inline const float* rounded(hone_ctx* c, Temp& t, const float* x, long n, const char* op) {
  float* p = t.get(size_t(n), op);
  if (!p) return nullptr;
  HONE_LAUNCH(round_bf16_kernel, grid_for(n, 256), 256, 0, c->stream, p, x, n);
  return check_launch(c, op) ? nullptr : p;
}

}  // namespace flash
}  // namespace hone

using namespace hone;

extern "C" {

int hone_attention_bf16(hone_ctx* c, float* out, float* lse, const float* q, const float* k, const float* v, long n,
                        int heads, int kv_heads, int head_dim, long past, float scale) {
  HONE_ENTRY(c);
  if (n == 0) return 0;
  const flash::Shape a = flash::shape(n, heads, kv_heads, head_dim, past, scale);
  if (flash::fast(c, head_dim)) {
    // The operands in bf16 once, read by the kernels with 16-byte copies.
    flash::Temp tq(c), tk(c), tv(c);
    const uint16_t* qb = flash::to_bf16(c, tq, q, n * a.qw, "attention bf16 round");
    const uint16_t* kb = qb ? flash::to_bf16(c, tk, k, (past + n) * a.kw, "attention bf16 round") : nullptr;
    const uint16_t* vb = kb ? flash::to_bf16(c, tv, v, (past + n) * a.kw, "attention bf16 round") : nullptr;
    if (!vb) return -1;
    return head_dim == 64 ? flash::forward<64>(c, out, lse, qb, kb, vb, a)
                          : flash::forward<128>(c, out, lse, qb, kb, vb, a);
  }
  // The reference: the float32 kernels on the rounded inputs.
  flash::Temp tq(c), tk(c), tv(c);
  const float* qr = flash::rounded(c, tq, q, n * a.qw, "attention bf16 round");
  const float* kr = qr ? flash::rounded(c, tk, k, (past + n) * a.kw, "attention bf16 round") : nullptr;
  const float* vr = kr ? flash::rounded(c, tv, v, (past + n) * a.kw, "attention bf16 round") : nullptr;
  if (!vr) return -1;
  if (hone_attention(c, out, qr, kr, vr, n, heads, kv_heads, head_dim, past, scale)) return -1;
  if (!lse) return 0;
  HONE_LAUNCH(flash::attention_lse_kernel1, unsigned(ceil_div(n * heads, 64)), 64, 0, c->stream, lse, qr, kr, a,
              head_dim);
  return check_launch(c, "attention bf16 lse");
}

int hone_attention_bf16_backward(hone_ctx* c, float* dq, float* dk, float* dv, const float* dout, const float* q,
                                 const float* k, const float* v, const float* out, const float* lse, long n,
                                 int heads, int kv_heads, int head_dim, long past, float scale) {
  HONE_ENTRY(c);
  if (n == 0) return 0;
  const flash::Shape a = flash::shape(n, heads, kv_heads, head_dim, past, scale);
  if (flash::fast(c, head_dim)) {
    flash::Temp to(c), tl(c), tq(c), tk(c), tv(c), td(c);
    if (!out || !lse) {
      // The forward's output and log-sum-exp, recomputed.
      float* o = to.get(size_t(n * a.qw), "attention bf16 backward");
      float* l = o ? tl.get(size_t(n * heads), "attention bf16 backward") : nullptr;
      if (!l) return -1;
      if (hone_attention_bf16(c, o, l, q, k, v, n, heads, kv_heads, head_dim, past, scale)) return -1;
      out = o;
      lse = l;
    }
    Workspace ws{c};
    if (ws.reserve(Workspace::align(2 * n * heads * sizeof(float)))) return -1;
    float* stats = ws.take<float>(2 * n * heads);
    HONE_LAUNCH(flash::attention_flash_delta, unsigned(ceil_div(n * heads, 128)), 128, 0, c->stream, stats, lse, dout,
                out, a, head_dim);
    if (check_launch(c, "attention bf16 backward delta")) return -1;
    const uint16_t* qb = flash::to_bf16(c, tq, q, n * a.qw, "attention bf16 backward round");
    const uint16_t* kb = qb ? flash::to_bf16(c, tk, k, (past + n) * a.kw, "attention bf16 backward round") : nullptr;
    const uint16_t* vb = kb ? flash::to_bf16(c, tv, v, (past + n) * a.kw, "attention bf16 backward round") : nullptr;
    const uint16_t* db = vb ? flash::to_bf16(c, td, dout, n * a.qw, "attention bf16 backward round") : nullptr;
    if (!db) return -1;
    return head_dim == 64 ? flash::backward<64>(c, dq, dk, dv, stats, db, qb, kb, vb, a)
                          : flash::backward<128>(c, dq, dk, dv, stats, db, qb, kb, vb, a);
  }
  flash::Temp tq(c), tk(c), tv(c), td(c);
  const float* qr = flash::rounded(c, tq, q, n * a.qw, "attention bf16 backward round");
  const float* kr = qr ? flash::rounded(c, tk, k, (past + n) * a.kw, "attention bf16 backward round") : nullptr;
  const float* vr = kr ? flash::rounded(c, tv, v, (past + n) * a.kw, "attention bf16 backward round") : nullptr;
  const float* dr = vr ? flash::rounded(c, td, dout, n * a.qw, "attention bf16 backward round") : nullptr;
  if (!dr) return -1;
  return hone_attention_backward(c, dq, dk, dv, dr, qr, kr, vr, n, heads, kv_heads, head_dim, past, scale);
}

}  // extern "C"
