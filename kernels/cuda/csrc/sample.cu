// sample.cu: device-side sampling, so that a decode step moves a few numbers
// per row to the host instead of the whole vocabulary of logits (~39 MB per
// step at Qwen's vocabulary and batch 64). Per row: temperature, top-k,
// top-p, a counter-based draw, the chosen token's log-probability under the
// unmodified distribution, and the top-N log-probabilities (what vLLM
// returns with logprobs=N). Below kernels.Backend for now (DESIGN.md,
// "Device-side sampling"); the Go side tests it directly.
//
// The order of a row is larger logits first, ties by the smaller id (-0 and
// +0 are equal). Greedy takes the first token. With top-k on (0 < top_k <
// vocab, capped at 256) the candidates are the first max(top_k, top_n) of
// the order: top-k keeps the first top_k, top-p the shortest prefix of those
// holding top_p of their mass, and the draw walks the kept ones in order.
// With top-k off, top-p keeps the shortest prefix of the whole row's order
// holding top_p of the row's mass (all of it when top_p >= 1), a threshold
// (a key, and how many tokens tied at it are kept, by id) rather than a sort,
// and the draw walks the kept tokens by id (threads sum contiguous slices,
// thread 0 finds the slice holding the draw and walks it). The first top_n
// of the order are always found, for the top-N log-probabilities.
//
// Two variants, the same results: the readable one finds candidates by
// repeated block arg-max (one pass over the row per candidate) and the top-p
// threshold by bisection over the 2^32 keys (34 passes); the fast one finds
// both by a radix select, 8 bits of the key per pass (4 passes; per-pass
// histograms in shared memory), gathers the candidates at or above the k-th
// key and ranks only those.
#include "hone_cuda.h"
#include "internal.cuh"

namespace hone {

constexpr int kSampleThreads = 256, kMaxCandidates = 256, kRadixBits = 8, kRadixBins = 1 << kRadixBits;
constexpr double kTinyMass = 1e-300;

// after reports whether (v, i) comes after (pv, pi) in the order of
// candidates: larger values first, ties by smaller index.
__device__ inline bool after(float v, long i, float pv, long pi) { return v < pv || (v == pv && i > pi); }

// better reports whether (v, i) comes before (bv, bi).
__device__ inline bool better(float v, long i, float bv, long bi) { return bi < 0 || v > bv || (v == bv && i < bi); }

// order_key maps a logit to a uint32 whose unsigned order is the float
// order: the sign bit flipped for positives, every bit for negatives, -0
// first made +0 so that the two tie as they compare equal.
__device__ inline uint32_t order_key(float v) {
  const uint32_t b = __float_as_uint(v == 0 ? 0.0f : v);
  return b & 0x80000000u ? ~b : b | 0x80000000u;
}

// key_value is order_key's inverse.
__device__ inline float key_value(uint32_t k) { return __uint_as_float(k & 0x80000000u ? k & 0x7fffffffu : ~k); }

// Threshold is a kept set of a row: the tokens whose key is above key, and
// the first ties (by id) of those at key.
struct Threshold {
  uint32_t key;
  long ties;
};

// block_argmax returns, in every thread, the best (value, index) of the
// block's candidates (index -1: none). blockDim.x is a multiple of 32.
__device__ inline void block_argmax(float& v, long& i) {
  HONE_SHARED(float, sv, 32);
  HONE_SHARED(long, si, 32);
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(kFullMask, v, o);
    const long oi = __shfl_xor_sync(kFullMask, i, o);
    if (oi >= 0 && better(ov, oi, v, i)) {
      v = ov;
      i = oi;
    }
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  if (lane == 0) {
    sv[warp] = v;
    si[warp] = i;
  }
  __syncthreads();
  v = lane < warps ? sv[lane] : -INFINITY;
  i = lane < warps ? si[lane] : -1;
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(kFullMask, v, o);
    const long oi = __shfl_xor_sync(kFullMask, i, o);
    if (oi >= 0 && better(ov, oi, v, i)) {
      v = ov;
      i = oi;
    }
  }
  __syncthreads();
}

// slice_offset returns, in thread t, the sum of v over the threads below t:
// where thread t's contiguous slice starts among the block's.
__device__ inline long slice_offset(long v) {
  HONE_SHARED(long, part, kSampleThreads);
  part[threadIdx.x] = v;
  __syncthreads();
  long s = 0;
  for (unsigned t = 0; t < threadIdx.x; t++) s += part[t];
  __syncthreads();
  return s;
}

// Slice is a thread's contiguous part of a row, [lo, hi).
struct Slice {
  long per, lo, hi;
};

// my_slice is the calling thread's slice: ceil(vocab / blockDim.x) ids.
__device__ inline Slice my_slice(long vocab) {
  const long per = ceil_div(vocab, blockDim.x), lo = threadIdx.x * per;
  return {per, lo < vocab ? lo : vocab, lo + per < vocab ? lo + per : vocab};
}

// kept reports whether a token of key k is kept by a threshold at key:
// above it, or among the first keep ties at it in the thread's slice (seen
// counts the ties met so far).
__device__ inline bool kept(uint32_t k, uint32_t key, long keep, long& seen) {
  return k > key || (k == key && seen++ < keep);
}

// slice_kept_ties returns how many of the ties at key in the thread's slice
// the threshold keeps: the first ties of the row by id, so the slices
// below take theirs first.
__device__ long slice_kept_ties(const float* x, Slice s, Threshold th) {
  long eq = 0;
  for (long j = s.lo; j < s.hi; j++) eq += order_key(x[j]) == th.key;
  const long left = th.ties - slice_offset(eq);
  return left < 0 ? 0 : left < eq ? left : eq;
}

// ties_needed returns how many tokens tied at key complete target, given
// the mass above key: at least one, at most the vocabulary.
__device__ inline long ties_needed(double target, double above, uint32_t key, float m, float inv_t, long vocab) {
  const double n = ceil((target - above) / expf((key_value(key) - m) * inv_t));
  return !(n >= 1) ? 1 : n < double(vocab) ? long(n) : vocab;
}

// mass_from returns, in every thread, the temperature-scaled mass of the
// logits whose key is at least key (above it when strict), in double.
__device__ double mass_from(const float* x, long vocab, float m, float inv_t, uint32_t key, bool strict) {
  double s = 0;
  for (long j = threadIdx.x; j < vocab; j += blockDim.x) {
    const uint32_t k = order_key(x[j]);
    if (k > key || (!strict && k == key)) s += expf((x[j] - m) * inv_t);
  }
  return block_sum(s);
}

// top_p_target is top_p of the row's temperature-scaled mass, or a tiny
// positive mass if that is less (or NaN): a top_p of 0 or below keeps the
// first token, a prefix holds at least one.
__device__ double top_p_target(const float* x, long vocab, float m, float inv_t, float top_p) {
  const double t = double(top_p) * mass_from(x, vocab, m, inv_t, 0, false);
  return t > kTinyMass ? t : kTinyMass;
}

// ---- readable: candidates by arg-max, the top-p threshold by bisection ----

// readable_candidates writes the first k of the row's order to cand, by
// repeated block arg-max past the previous candidate: k passes. Thread 0
// writes cand and is the only one to read it.
template <class V, class I>
__device__ void readable_candidates(const float* x, long vocab, long k, V& cand_v, I& cand_i) {
  float pv = INFINITY;
  long pi = -1;
  for (long c = 0; c < k; c++) {
    float bv = -INFINITY;
    long bi = -1;
    for (long j = threadIdx.x; j < vocab; j += blockDim.x) {
      if (after(x[j], j, pv, pi) && better(x[j], j, bv, bi)) {
        bv = x[j];
        bi = j;
      }
    }
    block_argmax(bv, bi);
    if (threadIdx.x == 0) {
      cand_v[c] = bv;
      cand_i[c] = bi;
    }
    pv = bv;
    pi = bi;
  }
}

// readable_top_p returns the shortest prefix of the row's order holding
// top_p of its mass: the largest key whose mass at and above reaches that,
// by bisection (the mass only falls as the key grows), and how many of the
// ties at it complete the prefix.
__device__ Threshold readable_top_p(const float* x, long vocab, float m, float inv_t, float top_p) {
  const double target = top_p_target(x, vocab, m, inv_t, top_p);
  uint32_t lo = 0, hi = 0xffffffffu;  // mass_from(lo) >= target
  while (lo < hi) {
    const uint32_t mid = uint32_t((uint64_t(lo) + hi + 1) / 2);
    if (mass_from(x, vocab, m, inv_t, mid, false) >= target) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const double above = mass_from(x, vocab, m, inv_t, lo, true);
  return {lo, ties_needed(target, above, lo, m, inv_t, vocab)};
}

// ---- fast: radix select ----------------------------------------------------

// radix_select returns, in every thread, the largest key whose weight at
// and above reaches target, and the weight above it: a weight of 1 per logit
// (W = int: the k-th key of the order) or its temperature-scaled mass (W =
// double: top-p's key). Each pass histograms the next 8 bits of the keys
// that share the bits found so far and keeps the highest bin whose weight,
// with that of the bins above it and of the keys above the prefix, reaches
// target: 4 passes over the row.
template <class W>
__device__ void radix_select(const float* x, long vocab, float m, float inv_t, double target, uint32_t& key,
                             double& above) {
  HONE_SHARED(W, hist, kRadixBins);
  constexpr bool mass = sizeof(W) == sizeof(double);
  key = 0;
  above = 0;
  for (int shift = 32 - kRadixBits; shift >= 0; shift -= kRadixBits) {
    for (int b = threadIdx.x; b < kRadixBins; b += blockDim.x) hist[b] = 0;
    __syncthreads();
    const uint32_t found = shift + kRadixBits >= 32 ? 0 : ~0u << (shift + kRadixBits);  // the bits found so far
    for (long j = threadIdx.x; j < vocab; j += blockDim.x) {
      const uint32_t k = order_key(x[j]);
      if ((k & found) != key) continue;
      atomicAdd(&hist[(k >> shift) & (kRadixBins - 1)], mass ? W(expf((x[j] - m) * inv_t)) : W(1));
    }
    __syncthreads();
    // Every thread walks the bins down from the top (no broadcast needed);
    // bin 0 when rounding leaves the total short of target.
    int b = kRadixBins - 1;
    for (; b > 0 && above + double(hist[b]) < target; b--) above += double(hist[b]);
    key |= uint32_t(b) << shift;
    __syncthreads();
  }
}

// gather_kept writes the tokens th keeps to cand, in id order: slices in
// thread order, each thread's after those of the slices below it.
template <class V, class I>
__device__ void gather_kept(const float* x, long vocab, Threshold th, V& cand_v, I& cand_i) {
  const Slice s = my_slice(vocab);
  const long keep = slice_kept_ties(x, s, th);
  long gt = 0;
  for (long j = s.lo; j < s.hi; j++) gt += order_key(x[j]) > th.key;
  long at = slice_offset(gt + keep), seen = 0;
  for (long j = s.lo; j < s.hi; j++) {
    if (kept(order_key(x[j]), th.key, keep, seen)) {
      cand_v[at] = x[j];
      cand_i[at++] = j;
    }
  }
  __syncthreads();
}

// rank_candidates sorts k candidates (k <= blockDim.x) into the row's
// order: thread c moves candidate c to its rank, the number of candidates
// before it.
template <class V, class I>
__device__ void rank_candidates(long k, V& cand_v, I& cand_i) {
  const long c = threadIdx.x;
  float v = 0;
  long i = -1, rank = 0;
  if (c < k) {
    v = cand_v[c];
    i = cand_i[c];
    for (long o = 0; o < k; o++) rank += better(cand_v[o], cand_i[o], v, i);
  }
  __syncthreads();
  if (c < k) {
    cand_v[rank] = v;
    cand_i[rank] = i;
  }
  __syncthreads();
}

// fast_candidates writes the first k of the row's order to cand: the k-th
// key by radix select, the tokens at or above it gathered (ties at it by
// id, as many as complete k), then ranked.
template <class V, class I>
__device__ void fast_candidates(const float* x, long vocab, long k, V& cand_v, I& cand_i) {
  if (k == 0) return;
  uint32_t key;
  double above;
  radix_select<int>(x, vocab, 0, 1, double(k), key, above);
  gather_kept(x, vocab, Threshold{key, k - long(above)}, cand_v, cand_i);
  rank_candidates(k, cand_v, cand_i);
}

// fast_top_p is readable_top_p by radix select.
__device__ Threshold fast_top_p(const float* x, long vocab, float m, float inv_t, float top_p) {
  const double target = top_p_target(x, vocab, m, inv_t, top_p);
  uint32_t key;
  double above;
  radix_select<double>(x, vocab, m, inv_t, target, key, above);
  return {key, ties_needed(target, above, key, m, inv_t, vocab)};
}

// ---- the draw ----------------------------------------------------------------

// splitmix64 is the draw's counter-based generator: the same (seed, row)
// gives the same number on every backend.
__host__ __device__ inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// draw_row returns, in thread 0, the token of th's kept set that u01 falls
// on, walking the kept tokens by id with their temperature-scaled masses:
// threads sum their contiguous slices, thread 0 finds the slice holding the
// draw and walks it.
__device__ long draw_row(const float* x, long vocab, float m, float inv_t, Threshold th, float u01) {
  HONE_SHARED(float, mass, kSampleThreads);
  HONE_SHARED(long, keep, kSampleThreads);
  const Slice s = my_slice(vocab);
  keep[threadIdx.x] = th.ties >= vocab ? vocab : slice_kept_ties(x, s, th);
  float e = 0;
  long seen = 0;
  for (long j = s.lo; j < s.hi; j++) {
    if (kept(order_key(x[j]), th.key, keep[threadIdx.x], seen)) e += expf((x[j] - m) * inv_t);
  }
  mass[threadIdx.x] = e;
  __syncthreads();
  if (threadIdx.x != 0) return -1;
  float total = 0;
  for (unsigned t = 0; t < blockDim.x; t++) total += mass[t];
  const float u = u01 * total;
  // The first slice whose mass reaches past u, else (u rounded up to the
  // total) the last one with any.
  float cum = 0;
  unsigned t = 0, last = 0;
  for (; t < blockDim.x && (mass[t] == 0 || u >= cum + mass[t]); t++) {
    if (mass[t] > 0) last = t;
    cum += mass[t];
  }
  const bool past = t == blockDim.x;  // then the last kept token
  if (past) t = last;
  const long per = s.per, lo = t * per < vocab ? t * per : vocab, hi = lo + per < vocab ? lo + per : vocab;
  long chosen = -1;
  seen = 0;
  for (long j = lo; j < hi; j++) {
    if (!kept(order_key(x[j]), th.key, keep[t], seen)) continue;
    const float ej = expf((x[j] - m) * inv_t);
    if (ej > 0) chosen = j;  // never a token of no mass, even when the sum falls short of u by rounding
    cum += ej;
    if (!past && u < cum) break;
  }
  return chosen;
}

// draw_candidates returns the candidate u01 falls on among the first top_k
// (in order), top-p keeping the shortest prefix of them that holds top_p of
// their mass.
template <class V, class I>
__device__ long draw_candidates(V& cand_v, I& cand_i, long top_k, float m, float inv_t, float top_p, float u01) {
  float total = 0;
  for (long c = 0; c < top_k; c++) total += expf((cand_v[c] - m) * inv_t);
  long kept = top_k;
  if (top_p < 1) {
    float cum = 0;
    for (long c = 0; c < top_k; c++) {
      cum += expf((cand_v[c] - m) * inv_t) / total;
      if (cum >= top_p) {
        kept = c + 1;
        break;
      }
    }
  }
  float mass = 0;
  for (long c = 0; c < kept; c++) mass += expf((cand_v[c] - m) * inv_t);
  const float u = u01 * mass;
  float cum = 0;
  long last = 0;  // the last candidate with mass: u can round up to the whole mass
  for (long c = 0; c < kept; c++) {
    const float e = expf((cand_v[c] - m) * inv_t);
    if (e > 0) last = c;
    cum += e;
    if (u < cum) return cand_i[c];
  }
  return cand_i[last];
}

// sample_kernel: one block per row, at most kSampleThreads threads; kFast
// picks the radix select over arg-max and bisection.
template <bool kFast>
__global__ void sample_kernel(const float* logits, long vocab, const hone_sampling* params, int top_n, int32_t* tokens,
                              float* logp, int32_t* top_ids, float* top_logp) {
  HONE_SHARED(float, cand_v, kMaxCandidates);
  HONE_SHARED(long, cand_i, kMaxCandidates);
  const long row = blockIdx.x;
  const float* x = logits + row * vocab;
  const hone_sampling p = params[row];

  // The raw log-sum-exp, for the log-probabilities returned.
  float m = -INFINITY;
  for (long j = threadIdx.x; j < vocab; j += blockDim.x) m = fmaxf(m, x[j]);
  m = block_max(m);
  float s = 0;
  for (long j = threadIdx.x; j < vocab; j += blockDim.x) s += expf(x[j] - m);
  s = block_sum(s);
  const float lse = m + logf(s);

  const bool greedy = p.temperature <= 0;
  const float inv_t = greedy ? 1.0f : 1.0f / p.temperature;
  const long top_k = greedy || p.top_k <= 0 || p.top_k >= vocab ? 0
                     : p.top_k < kMaxCandidates                   ? p.top_k
                                                                  : kMaxCandidates;
  // Candidates: the first top_n of the order, top_k with top-k on, one
  // for greedy.
  long k = top_n > top_k ? top_n : top_k;
  if (greedy && k == 0) k = 1;
  if (kFast) {
    fast_candidates(x, vocab, k, cand_v, cand_i);
  } else {
    readable_candidates(x, vocab, k, cand_v, cand_i);
  }
  const uint64_t r = splitmix64(p.seed ^ splitmix64(uint64_t(row)));
  const float u01 = float(r >> 40) * (1.0f / 16777216.0f);
  long chosen = -1;
  if (!greedy && top_k == 0) {
    const Threshold keep_all{0, vocab};
    const Threshold th = p.top_p >= 1 ? keep_all
                         : kFast      ? fast_top_p(x, vocab, m, inv_t, p.top_p)
                                      : readable_top_p(x, vocab, m, inv_t, p.top_p);
    chosen = draw_row(x, vocab, m, inv_t, th, u01);
  }
  if (threadIdx.x != 0) return;
  if (greedy) chosen = cand_i[0];
  if (top_k > 0) chosen = draw_candidates(cand_v, cand_i, top_k, m, inv_t, p.top_p, u01);
  if (chosen < 0) chosen = 0;  // NaN logits only: a token rather than a read outside the row
  tokens[row] = int32_t(chosen);
  logp[row] = x[chosen] - lse;
  for (int c = 0; c < top_n; c++) {
    top_ids[row * top_n + c] = int32_t(cand_i[c]);
    top_logp[row * top_n + c] = cand_v[c] - lse;
  }
}

}  // namespace hone

using namespace hone;

extern "C" {

int hone_sample(hone_ctx* c, const float* logits, long rows, long vocab, const hone_sampling* host_params, int top_n,
                int32_t* host_tokens, float* host_logp, int32_t* host_top_ids, float* host_top_logp) {
  HONE_ENTRY(c);
  if (rows == 0) return 0;
  if (top_n < 0 || top_n > kMaxCandidates || top_n > vocab || vocab <= 0) return failed(c, "sample", "top_n out of range");
  Workspace ws{c};
  const size_t outs = Workspace::align(rows * sizeof(int32_t)) + Workspace::align(rows * sizeof(float)) +
                      Workspace::align(rows * top_n * sizeof(int32_t) + 1) + Workspace::align(rows * top_n * sizeof(float) + 1);
  if (ws.reserve(Workspace::align(rows * sizeof(hone_sampling)) + outs)) return -1;
  const hone_sampling* params = ws.upload(host_params, rows, "sample params");
  if (!params) return -1;
  int32_t* tokens = ws.take<int32_t>(rows);
  float* logp = ws.take<float>(rows);
  int32_t* top_ids = ws.take<int32_t>(rows * top_n + 1);
  float* top_logp = ws.take<float>(rows * top_n + 1);
  // Up to 256 threads per row, fewer for a small vocabulary (whole warps).
  const int threads = vocab >= kSampleThreads ? kSampleThreads : int(ceil_div(vocab, 32) * 32);
  if (c->variant == hone_variant_readable) {
    HONE_LAUNCH(sample_kernel<false>, unsigned(rows), threads, 0, c->stream, logits, vocab, params, top_n, tokens, logp,
                top_ids, top_logp);
  } else {
    HONE_LAUNCH(sample_kernel<true>, unsigned(rows), threads, 0, c->stream, logits, vocab, params, top_n, tokens, logp,
                top_ids, top_logp);
  }
  if (check_launch(c, "sample")) return -1;
  if (hone_download(c, host_tokens, tokens, rows * sizeof(int32_t))) return -1;
  if (hone_download(c, host_logp, logp, rows * sizeof(float))) return -1;
  if (top_n == 0) return 0;
  if (hone_download(c, host_top_ids, top_ids, rows * top_n * sizeof(int32_t))) return -1;
  return hone_download(c, host_top_logp, top_logp, rows * top_n * sizeof(float));
}

}  // extern "C"
