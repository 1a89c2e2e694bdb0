// logprob.cu: token log-probabilities, cross-entropy and their backward,
// on full logits and chunked over the vocabulary (logits = h w^T formed one
// chunk of columns at a time by cuBLAS, so [rows, vocab] never exists).
//
// Both paths share one online log-sum-exp: per row a running maximum m and
// sum s of exp(x - m); a chunk with maximum cm and sum cs merges as
//   m' = max(m, cm),  s' = s exp(m - m') + cs exp(cm - m'),
// and the chunk holding the target keeps its logit. At the end
// lse = m + log s and logp = logit[target] - lse.
#include "hone_cuda.h"
#include "internal.cuh"

namespace hone {

// lse_merge_kernel1 (readable): one thread per row of the chunk
// L[rows, cols] (row stride ld) whose first column is vocabulary id c0.
__global__ void lse_merge_kernel1(float* m, float* s, float* tl, const float* L, long ld, long rows, long cols,
                                  long c0, const int32_t* targets) {
  const long t = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= rows) return;
  const float* row = L + t * ld;
  float cm = -INFINITY;
  for (long j = 0; j < cols; j++) cm = fmaxf(cm, row[j]);
  float cs = 0;
  for (long j = 0; j < cols; j++) cs += expf(row[j] - cm);
  const float nm = fmaxf(m[t], cm);
  s[t] = s[t] * expf(m[t] - nm) + cs * expf(cm - nm);
  m[t] = nm;
  const long tg = targets[t];
  if (tg >= c0 && tg < c0 + cols) tl[t] = row[tg - c0];
}

// lse_merge_kernel2 (fast): one block per row, block reductions for the
// chunk's maximum and sum.
__global__ void lse_merge_kernel2(float* m, float* s, float* tl, const float* L, long ld, long rows, long cols,
                                  long c0, const int32_t* targets) {
  const long t = blockIdx.x;
  if (t >= rows) return;
  const float* row = L + t * ld;
  float cm = -INFINITY;
  for (long j = threadIdx.x; j < cols; j += blockDim.x) cm = fmaxf(cm, row[j]);
  cm = block_max(cm);
  float cs = 0;
  for (long j = threadIdx.x; j < cols; j += blockDim.x) cs += expf(row[j] - cm);
  cs = block_sum(cs);
  if (threadIdx.x == 0) {
    const float nm = fmaxf(m[t], cm);
    s[t] = s[t] * expf(m[t] - nm) + cs * expf(cm - nm);
    m[t] = nm;
    const long tg = targets[t];
    if (tg >= c0 && tg < c0 + cols) tl[t] = row[tg - c0];
  }
}

__global__ void lse_init_kernel(float* m, float* s, long rows) {
  for (long t = long(blockIdx.x) * blockDim.x + threadIdx.x; t < rows; t += long(gridDim.x) * blockDim.x) {
    m[t] = -INFINITY;
    s[t] = 0;
  }
}

// lse_finish_kernel: lse = m + log s (when lse is not null) and
// logp = sign * (target logit - lse).
__global__ void lse_finish_kernel(float* logp, float* lse, const float* m, const float* s, const float* tl, long rows,
                                  float sign) {
  for (long t = long(blockIdx.x) * blockDim.x + threadIdx.x; t < rows; t += long(gridDim.x) * blockDim.x) {
    const float l = m[t] + logf(s[t]);
    if (lse) lse[t] = l;
    logp[t] = sign * (tl[t] - l);
  }
}

// softmax_grad_kernel: D[t, j] = g[t] * (onehot(target - c0) - exp(X[t, j] -
// lse[t])) over a [rows, cols] chunk with row stride ld; D may be X.
__global__ void softmax_grad_kernel(float* D, const float* X, long ld, long rows, long cols, long c0,
                                    const int32_t* targets, const float* lse, const float* g) {
  for (long e = long(blockIdx.x) * blockDim.x + threadIdx.x; e < rows * cols; e += long(gridDim.x) * blockDim.x) {
    const long t = e / cols, j = e % cols;
    float d = -g[t] * expf(X[t * ld + j] - lse[t]);
    if (c0 + j == targets[t]) d += g[t];
    D[t * ld + j] = d;
  }
}

// softmax_grad_bf16_kernel is softmax_grad_kernel rounding D to bf16 (into
// its own [rows, cols] buffer, packed): autocast's LM head backward, whose
// GEMMs take the logits' gradient in bf16. One block row per token row, so
// no division per element.
__global__ void softmax_grad_bf16_kernel(__nv_bfloat16* D, const float* X, long ld, long rows, long cols, long c0,
                                         const int32_t* targets, const float* lse, const float* g) {
  for (long t = blockIdx.y; t < rows; t += gridDim.y) {
    const float gt = g[t], lt = lse[t];
    const long tg = targets[t] - c0;
    for (long j = long(blockIdx.x) * blockDim.x + threadIdx.x; j < cols; j += long(gridDim.x) * blockDim.x) {
      float d = -gt * expf(X[t * ld + j] - lt);
      if (j == tg) d += gt;
      D[t * cols + j] = __float2bfloat16_rn(d);
    }
  }
}

// lse_state carves the per-row online state from a workspace.
struct LseState {
  float *m, *s, *tl, *lse;
  const int32_t* targets;
};

int lse_begin(hone_ctx* c, Workspace& ws, LseState& st, const int32_t* targets, long rows, const char* op) {
  st.targets = targets;
  st.m = ws.take<float>(rows);
  st.s = ws.take<float>(rows);
  st.tl = ws.take<float>(rows);
  st.lse = ws.take<float>(rows);
  HONE_LAUNCH(lse_init_kernel, grid_for(rows, 256), 256, 0, c->stream, st.m, st.s, rows);
  return check_launch(c, op);
}

int lse_merge(hone_ctx* c, LseState& st, const float* L, long ld, long rows, long cols, long c0, const char* op) {
  if (c->variant == hone_variant_readable) {
    HONE_LAUNCH(lse_merge_kernel1, unsigned(ceil_div(rows, 64)), 64, 0, c->stream, st.m, st.s, st.tl, L, ld, rows,
                cols, c0, st.targets);
  } else {
    HONE_LAUNCH(lse_merge_kernel2, unsigned(rows), 256, 0, c->stream, st.m, st.s, st.tl, L, ld, rows, cols, c0,
                st.targets);
  }
  return check_launch(c, op);
}

size_t lse_bytes(long rows) { return 4 * Workspace::align(rows * sizeof(float)); }

}  // namespace hone

using namespace hone;

extern "C" {

int hone_logprobs(hone_ctx* c, float* logp, const float* logits, const int32_t* targets, long n, long vocab,
                  int negate) {
  HONE_ENTRY(c);
  if (n == 0) return 0;
  Workspace ws{c};
  LseState st;
  if (ws.reserve(lse_bytes(n)) || lse_begin(c, ws, st, targets, n, "logprobs")) return -1;
  if (lse_merge(c, st, logits, vocab, n, vocab, 0, "logprobs")) return -1;
  HONE_LAUNCH(lse_finish_kernel, grid_for(n, 256), 256, 0, c->stream, logp, (float*)nullptr, st.m, st.s, st.tl, n,
              negate ? -1.0f : 1.0f);
  return check_launch(c, "logprobs");
}

int hone_logprobs_backward(hone_ctx* c, float* dlogits, const float* logits, const int32_t* targets,
                           const float* dlogp, long n, long vocab) {
  HONE_ENTRY(c);
  if (n == 0) return 0;
  Workspace ws{c};
  LseState st;
  if (ws.reserve(lse_bytes(n)) || lse_begin(c, ws, st, targets, n, "logprobs_backward")) return -1;
  if (lse_merge(c, st, logits, vocab, n, vocab, 0, "logprobs_backward")) return -1;
  HONE_LAUNCH(lse_finish_kernel, grid_for(n, 256), 256, 0, c->stream, st.tl, st.lse, st.m, st.s, st.tl, n, 1.0f);
  if (check_launch(c, "logprobs_backward")) return -1;
  HONE_LAUNCH(softmax_grad_kernel, grid_for(n * vocab, 256), 256, 0, c->stream, dlogits, logits, vocab, n, vocab, 0,
              st.targets, st.lse, dlogp);
  return check_launch(c, "logprobs_backward");
}

// chunk_cols is how many vocabulary columns one chunk of n rows may have;
// with a bf16 w widened into the workspace (h float32), the widened rows
// (cols x hidden) obey the same budget.
static long chunk_cols(hone_ctx* c, long n, long hidden, long vocab, int widen) {
  long cols = c->chunk_elems / (n > 0 ? n : 1);
  if (widen) {
    const long wcols = c->chunk_elems / (hidden > 0 ? hidden : 1);
    if (wcols < cols) cols = wcols;
  }
  if (cols < 1) cols = 1;
  return cols < vocab ? cols : vocab;
}

// w_chunk returns rows [c0, c0+cc) of w as float32: a pointer into w, or for
// a bf16 w those rows widened into wide (cc x hidden floats).
static const float* w_chunk(hone_ctx* c, const void* w, int w_bf16, float* wide, long c0, long cc, long hidden) {
  if (!w_bf16) return static_cast<const float*>(w) + c0 * hidden;
  if (hone_bf16_to_f32(c, wide, static_cast<const uint16_t*>(w) + c0 * hidden, cc * hidden)) return nullptr;
  return wide;
}

// head_logits sets L[n, cc] = h[n, H] w[c0:c0+cc, H]^T: the bf16 GEMM when h
// is bf16 (autocast; w is bf16 too), else float32 with w's chunk widened
// into wide when w is bf16 (exact mode).
static int head_logits(hone_ctx* c, float* L, const void* h, int h_bf16, const void* w, int w_bf16, float* wide,
                       long n, long c0, long cc, long hidden) {
  if (h_bf16) {
    return hone_gemm_bf16(c, 0, 1, n, cc, hidden, 1.0f, static_cast<const uint16_t*>(h), n * hidden,
                          static_cast<const uint16_t*>(w) + c0 * hidden, cc * hidden, 0.0f, L, n * cc, 1);
  }
  const float* wc = w_chunk(c, w, w_bf16, wide, c0, cc, hidden);
  if (!wc) return -1;
  return hone_gemm(c, 0, 1, n, cc, hidden, 1.0f, static_cast<const float*>(h), 0, wc, 0, 0.0f, L, 0, 1);
}

static int check_head(hone_ctx* c, int h_bf16, int w_bf16, const char* op) {
  if (h_bf16 && !w_bf16) return failed(c, op, "a bf16 h needs a bf16 w");
  return 0;
}

int hone_token_logprobs(hone_ctx* c, float* logp, float* lse, const void* h, int h_bf16, const void* w, int w_bf16,
                        const int32_t* targets, long n, long hidden, long vocab) {
  HONE_ENTRY(c);
  if (n == 0) return 0;
  if (check_head(c, h_bf16, w_bf16, "token_logprobs")) return -1;
  const int widen = w_bf16 && !h_bf16;
  const long cols = chunk_cols(c, n, hidden, vocab, widen);
  const size_t wide_bytes = widen ? Workspace::align(cols * hidden * sizeof(float)) : 0;
  Workspace ws{c};
  LseState st;
  if (ws.reserve(lse_bytes(n) + Workspace::align(n * cols * sizeof(float)) + wide_bytes)) return -1;
  if (lse_begin(c, ws, st, targets, n, "token_logprobs")) return -1;
  float* L = ws.take<float>(n * cols);
  float* wide = widen ? ws.take<float>(cols * hidden) : nullptr;
  for (long c0 = 0; c0 < vocab; c0 += cols) {
    const long cc = vocab - c0 < cols ? vocab - c0 : cols;
    if (head_logits(c, L, h, h_bf16, w, w_bf16, wide, n, c0, cc, hidden)) return -1;
    if (lse_merge(c, st, L, cc, n, cc, c0, "token_logprobs")) return -1;
  }
  HONE_LAUNCH(lse_finish_kernel, grid_for(n, 256), 256, 0, c->stream, logp, lse, st.m, st.s, st.tl, n, 1.0f);
  return check_launch(c, "token_logprobs");
}

// token_grads_bf16 is the backward's chunk loop with a bf16 h (autocast):
// the logits' gradient G rounded to bf16, dh and dw by bf16 GEMMs.
static int token_grads_bf16(hone_ctx* c, Workspace& ws, float* dh, float* dw, const uint16_t* h, const uint16_t* w,
                            const float* lse, const int32_t* targets, const float* dlogp, long n, long hidden,
                            long vocab, long cols) {
  float* L = ws.take<float>(n * cols);
  uint16_t* G = ws.take<uint16_t>(n * cols);
  for (long c0 = 0; c0 < vocab; c0 += cols) {
    const long cc = vocab - c0 < cols ? vocab - c0 : cols;
    const uint16_t* wc = w + c0 * hidden;
    if (head_logits(c, L, h, 1, w, 1, nullptr, n, c0, cc, hidden)) return -1;
    const dim3 grid(unsigned(ceil_div(cc, 256) < 8 ? ceil_div(cc, 256) : 8), unsigned(n < 65535 ? n : 65535));
    HONE_LAUNCH(softmax_grad_bf16_kernel, grid, 256, 0, c->stream, reinterpret_cast<__nv_bfloat16*>(G), L, cc, n, cc,
                c0, targets, lse, dlogp);
    if (check_launch(c, "token_logprobs_backward")) return -1;
    // dh (+)= G[n, cc] wc[cc, H]; dw[c0:c0+cc] += G^T[cc, n] h[n, H]
    if (hone_gemm_bf16(c, 0, 0, n, hidden, cc, 1.0f, G, n * cc, wc, cc * hidden, c0 == 0 ? 0.0f : 1.0f, dh,
                       n * hidden, 1)) {
      return -1;
    }
    if (dw && hone_gemm_bf16(c, 1, 0, cc, hidden, n, 1.0f, G, n * cc, h, n * hidden, 1.0f, dw + c0 * hidden,
                             cc * hidden, 1)) {
      return -1;
    }
  }
  return 0;
}

int hone_token_logprobs_backward(hone_ctx* c, float* dh, float* dw, const void* h, int h_bf16, const void* w,
                                 int w_bf16, const float* lse, const int32_t* targets, const float* dlogp, long n,
                                 long hidden, long vocab) {
  HONE_ENTRY(c);
  if (n == 0) return 0;
  if (check_head(c, h_bf16, w_bf16, "token_logprobs_backward")) return -1;
  const int widen = w_bf16 && !h_bf16;
  const long cols = chunk_cols(c, n, hidden, vocab, widen);
  const size_t wide_bytes = widen ? Workspace::align(cols * hidden * sizeof(float)) : 0;
  const size_t g_bytes = h_bf16 ? Workspace::align(n * cols * sizeof(uint16_t)) : 0;
  Workspace ws{c};
  if (ws.reserve(Workspace::align(n * cols * sizeof(float)) + wide_bytes + g_bytes)) return -1;
  if (h_bf16) {
    return token_grads_bf16(c, ws, dh, dw, static_cast<const uint16_t*>(h), static_cast<const uint16_t*>(w), lse,
                            targets, dlogp, n, hidden, vocab, cols);
  }
  const float* hf = static_cast<const float*>(h);
  float* G = ws.take<float>(n * cols);
  float* wide = widen ? ws.take<float>(cols * hidden) : nullptr;
  for (long c0 = 0; c0 < vocab; c0 += cols) {
    const long cc = vocab - c0 < cols ? vocab - c0 : cols;
    const float* wc = w_chunk(c, w, w_bf16, wide, c0, cc, hidden);
    if (!wc) return -1;
    if (hone_gemm(c, 0, 1, n, cc, hidden, 1.0f, hf, 0, wc, 0, 0.0f, G, 0, 1)) return -1;
    HONE_LAUNCH(softmax_grad_kernel, grid_for(n * cc, 256), 256, 0, c->stream, G, G, cc, n, cc, c0, targets, lse,
                dlogp);
    if (check_launch(c, "token_logprobs_backward")) return -1;
    // dh (+)= G[n, cc] * wc[cc, H]; the first chunk overwrites dh.
    if (hone_gemm(c, 0, 0, n, hidden, cc, 1.0f, G, 0, wc, 0, c0 == 0 ? 0.0f : 1.0f, dh, 0, 1)) return -1;
    // dw[c0:c0+cc] += G^T[cc, n] * h[n, H]
    if (dw && hone_gemm(c, 1, 0, cc, hidden, n, 1.0f, G, 0, hf, 0, 1.0f, dw + c0 * hidden, 0, 1)) return -1;
  }
  return 0;
}

}  // extern "C"
