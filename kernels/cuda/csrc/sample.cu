// sample.cu: device-side sampling, so that a decode step moves a few numbers
// per row to the host instead of the whole vocabulary of logits (~39 MB per
// step at Qwen's vocabulary and batch 64). Per row: temperature, top-k,
// top-p, a counter-based draw, the chosen token's log-probability under the
// unmodified distribution, and the top-N log-probabilities (what vLLM
// returns with logprobs=N). Below kernels.Backend for now (DESIGN.md,
// "Device-side sampling"); the Go side tests it directly.
//
// With top-k and top-p off the draw is over the whole row (threads sum
// contiguous slices, thread 0 finds the slice holding the draw and walks
// it). Otherwise the draw is over candidates: the top min(max(top_k,
// top_n), 256) logits (256 when top-k is off), found by repeated block
// arg-max (the readable way; a radix select is the faster one to write
// beside it). top_k over 256 is capped at 256 (top_k >= vocab is off). With
// top-k off, top-p is applied to the 256 candidates against the full
// softmax mass; when they hold less than top_p of it, all 256 are kept.
#include "hone_cuda.h"
#include "internal.cuh"

namespace hone {

constexpr int kSampleThreads = 256, kMaxCandidates = 256;

// after reports whether (v, i) comes after (pv, pi) in the order of
// candidates: larger values first, ties by smaller index.
__device__ inline bool after(float v, long i, float pv, long pi) { return v < pv || (v == pv && i > pi); }

// better reports whether (v, i) comes before (bv, bi).
__device__ inline bool better(float v, long i, float bv, long bi) { return bi < 0 || v > bv || (v == bv && i < bi); }

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

// splitmix64 is the draw's counter-based generator: the same (seed, row)
// gives the same number on every backend.
__host__ __device__ inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// sample_kernel: one block per row, at most kSampleThreads threads.
__global__ void sample_kernel(const float* logits, long vocab, const hone_sampling* params, int top_n, int32_t* tokens,
                              float* logp, int32_t* top_ids, float* top_logp) {
  HONE_SHARED(float, cand_v, kMaxCandidates);
  HONE_SHARED(long, cand_i, kMaxCandidates);
  HONE_SHARED(float, slice, kSampleThreads);
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
  // The temperature-scaled mass of the whole row (top-p with top-k off).
  const bool greedy = p.temperature <= 0;
  const float inv_t = greedy ? 1.0f : 1.0f / p.temperature;
  float st = 0;
  if (!greedy) {
    for (long j = threadIdx.x; j < vocab; j += blockDim.x) st += expf((x[j] - m) * inv_t);
    st = block_sum(st);
  }

  const int top_k = p.top_k >= vocab ? 0 : p.top_k;
  const bool whole_row = !greedy && top_k <= 0 && p.top_p >= 1;
  // The whole-row draw: each thread's mass over its contiguous slice.
  const long per = ceil_div(vocab, blockDim.x), lo = threadIdx.x * per, hi = lo + per < vocab ? lo + per : vocab;
  if (whole_row) {
    float e = 0;
    for (long j = lo; j < hi; j++) e += expf((x[j] - m) * inv_t);
    slice[threadIdx.x] = e;
  }
  // Candidates in order, by repeated arg-max past the previous one.
  long k = top_k > 0 ? top_k : kMaxCandidates;
  if (k < top_n) k = top_n;
  if (k > kMaxCandidates) k = kMaxCandidates;
  if (k > vocab) k = vocab;
  if (whole_row) k = top_n;  // candidates only for the top-N log-probabilities
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
  __syncthreads();

  if (threadIdx.x != 0) return;
  long chosen = cand_i[0];
  const uint64_t r = splitmix64(p.seed ^ splitmix64(uint64_t(row)));
  const float u01 = float(r >> 40) * (1.0f / 16777216.0f);
  if (whole_row) {
    float total = 0;
    for (unsigned t = 0; t < blockDim.x; t++) total += slice[t];
    const float u = u01 * total;
    float cum = 0;
    unsigned t = 0;
    while (t < blockDim.x - 1 && (slice[t] == 0 || u >= cum + slice[t])) cum += slice[t++];
    const long tlo = t * per, thi = tlo + per < vocab ? tlo + per : vocab;
    chosen = thi - 1;
    for (long j = tlo; j < thi; j++) {
      cum += expf((x[j] - m) * inv_t);
      if (u < cum) {
        chosen = j;
        break;
      }
    }
  } else if (!greedy) {
    // Top-k keeps the first min(top_k, k) candidates; their mass is the
    // denominator of top-p, or the whole row's when top-k is off.
    const long kept_k = top_k > 0 && top_k < k ? top_k : k;
    float total = st;
    if (top_k > 0) {
      total = 0;
      for (long c = 0; c < kept_k; c++) total += expf((cand_v[c] - m) * inv_t);
    }
    long kept = kept_k;
    if (p.top_p < 1) {
      float cum = 0;
      for (long c = 0; c < kept_k; c++) {
        cum += expf((cand_v[c] - m) * inv_t) / total;
        if (cum >= p.top_p) {
          kept = c + 1;
          break;
        }
      }
    }
    float mass = 0;
    for (long c = 0; c < kept; c++) mass += expf((cand_v[c] - m) * inv_t);
    const float u = u01 * mass;
    float cum = 0;
    chosen = cand_i[kept - 1];
    for (long c = 0; c < kept; c++) {
      cum += expf((cand_v[c] - m) * inv_t);
      if (u < cum) {
        chosen = cand_i[c];
        break;
      }
    }
  }
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
  HONE_LAUNCH(sample_kernel, unsigned(rows), threads, 0, c->stream, logits, vocab, params, top_n, tokens, logp,
              top_ids, top_logp);
  if (check_launch(c, "sample")) return -1;
  if (hone_download(c, host_tokens, tokens, rows * sizeof(int32_t))) return -1;
  if (hone_download(c, host_logp, logp, rows * sizeof(float))) return -1;
  if (top_n == 0) return 0;
  if (hone_download(c, host_top_ids, top_ids, rows * top_n * sizeof(int32_t))) return -1;
  return hone_download(c, host_top_logp, top_logp, rows * top_n * sizeof(float));
}

}  // extern "C"
