/* hone_cuda.h: the C interface of hone's CUDA kernels, what the Go backend
 * (kernels/cuda) calls through cgo. The same functions are built by nvcc for
 * the device and by g++ against the host shim (emu/) for the tests.
 *
 * Conventions: tensors are dense row-major float32 device pointers; index
 * arrays (ids, positions, targets) are int32 device pointers too, uploaded
 * once per forward by the caller (hone_malloc + hone_upload) and range-checked
 * on the host then, and RoPE reads a device table built once per model by
 * hone_rope_table. Host pointers are named host_*. Every function
 * returns 0, or -1 with the error in hone_last_error; an error is sticky:
 * once set, calls return -1 without running until hone_clear_error. */
#ifndef HONE_CUDA_H
#define HONE_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hone_ctx hone_ctx;

/* Kernel variants: the readable kernels, or the faster ones beside them. */
enum { hone_variant_readable = 0, hone_variant_fast = 1 };

/* hone_create makes a context on device (a stream, a cuBLAS handle, a
 * workspace) and stores it in *out, or returns -1 with the reason in err. */
int hone_create(hone_ctx** out, int device, int variant, char* err, size_t errlen);
void hone_destroy(hone_ctx* c);
const char* hone_last_error(hone_ctx* c);
void hone_clear_error(hone_ctx* c);
/* hone_set_chunk sets how many logits (rows x vocabulary columns) one chunk
 * of hone_token_logprobs may hold. */
void hone_set_chunk(hone_ctx* c, long elems);

/* Tensor memory comes from the context's caching allocator (allocator.cuh):
 * hone_free returns a block to it, hone_trim gives the cached blocks back to
 * the device (before an engine wakes, say). */
int hone_malloc(hone_ctx* c, void** p, size_t bytes);
/* hone_malloc_empty is hone_malloc for memory the caller overwrites before
 * reading (the emulated build fills it with NaN bytes so a read shows). */
int hone_malloc_empty(hone_ctx* c, void** p, size_t bytes);
int hone_free(hone_ctx* c, void* p);
int hone_trim(hone_ctx* c);
typedef struct {
  size_t live_bytes, cached_bytes;
  size_t peak_live_bytes; /* live_bytes' high-water mark since hone_mem_reset_peak */
  long device_allocs, reuses;
} hone_mem;
void hone_mem_stats(hone_ctx* c, hone_mem* m);
void hone_mem_reset_peak(hone_ctx* c);
int hone_upload(hone_ctx* c, void* dst, const void* src, size_t bytes);
int hone_download(hone_ctx* c, void* dst, const void* src, size_t bytes);
int hone_copy(hone_ctx* c, void* dst, const void* src, size_t bytes);
int hone_zero(hone_ctx* c, void* p, size_t bytes);
int hone_sync(hone_ctx* c);

/* C = alpha*op(A)*op(B) + beta*C, row-major, batch >= 1 with element strides
 * (stride_b 0: B shared across the batch), through cuBLAS. */
int hone_gemm(hone_ctx* c, int trans_a, int trans_b, long m, long n, long k, float alpha, const float* a,
              long stride_a, const float* b, long stride_b, float beta, float* out, long stride_c, long batch);

/* bf16 storage (the upper half of a float32): conversions, rounding to
 * nearest even, and C = alpha*op(A)*op(B) + beta*C with bf16 A and B, fp32 C
 * and fp32 accumulation (cublasLtMatmul, CUBLAS_COMPUTE_32F), same layout
 * rules as hone_gemm (packed batch strides; stride_b 0 shares B).
 * hone_lt_algos counts the shapes whose cuBLASLt heuristic result the
 * context has cached. */
int hone_f32_to_bf16(hone_ctx* c, uint16_t* dst, const float* src, long n);
int hone_bf16_to_f32(hone_ctx* c, float* dst, const uint16_t* src, long n);
int hone_gemm_bf16(hone_ctx* c, int trans_a, int trans_b, long m, long n, long k, float alpha, const uint16_t* a,
                   long stride_a, const uint16_t* b, long stride_b, float beta, float* out, long stride_c, long batch);
long hone_lt_algos(hone_ctx* c);

int hone_fill(hone_ctx* c, float* x, long n, float v);
int hone_add(hone_ctx* c, float* dst, const float* a, const float* b, long n);
int hone_mul(hone_ctx* c, float* dst, const float* a, const float* b, long n);
int hone_scale(hone_ctx* c, float* dst, const float* a, float s, long n);
int hone_axpy(hone_ctx* c, float* dst, const float* x, float s, long n);
int hone_add_row(hone_ctx* c, float* dst, const float* v, long rows, long width);
int hone_sum_rows(hone_ctx* c, float* dst, const float* x, long rows, long width);
/* hone_sum stores the sum (squares: of squares) of x in *host_out. */
int hone_sum(hone_ctx* c, double* host_out, const float* x, long n, int squares);
/* hone_sum_into adds the sum (squares: of squares) of x, taken in double, to
 * the device float *dst with one rounding; nothing reaches the host. */
int hone_sum_into(hone_ctx* c, float* dst, const float* x, long n, int squares);

int hone_rmsnorm(hone_ctx* c, float* out, const float* x, const float* w, long rows, long width, float eps);
/* dw may be NULL. */
int hone_rmsnorm_backward(hone_ctx* c, float* dx, float* dw, const float* dy, const float* x, const float* w,
                          long rows, long width, float eps);

/* hone_rope_table fills table [max_pos, 2*half] (device memory): row p holds
 * cos of float(p)*freqs[j] for j < half, then the sin (taken in double,
 * rounded to float). */
int hone_rope_table(hone_ctx* c, float* table, const float* host_freqs, long max_pos, long half);
/* Every pos[t] lies in [0, max_pos) of table. */
int hone_rope(hone_ctx* c, float* x, const int32_t* pos, const float* table, long rows, long width, long half,
              int inverse);

int hone_attention(hone_ctx* c, float* out, const float* q, const float* k, const float* v, long n, int heads,
                   int kv_heads, int head_dim, long past, float scale);
int hone_attention_backward(hone_ctx* c, float* dq, float* dk, float* dv, const float* dout, const float* q,
                            const float* k, const float* v, long n, int heads, int kv_heads, int head_dim, long past,
                            float scale);

/* The bf16 attention (kernels.Attn.BF16, attention_flash.cu): q, k, v (and
 * dout) rounded to bf16, float32 accumulation, tensor cores. lse (nullable,
 * [n*heads]) receives each (query, head)'s log-sum-exp; the backward takes the
 * forward's out and lse (both nullable: recomputed) and, like
 * hone_attention_backward, sets dq and accumulates dk and dv. */
int hone_attention_bf16(hone_ctx* c, float* out, float* lse, const float* q, const float* k, const float* v, long n,
                        int heads, int kv_heads, int head_dim, long past, float scale);
int hone_attention_bf16_backward(hone_ctx* c, float* dq, float* dk, float* dv, const float* dout, const float* q,
                                 const float* k, const float* v, const float* out, const float* lse, long n,
                                 int heads, int kv_heads, int head_dim, long past, float scale);

int hone_silu(hone_ctx* c, float* out, const float* x, long n);
int hone_swiglu(hone_ctx* c, float* out, const float* gate, const float* up, long n);
int hone_swiglu_backward(hone_ctx* c, float* dgate, float* dup, const float* dout, const float* gate,
                         const float* up, long n);

int hone_embedding(hone_ctx* c, float* out, const float* table, const int32_t* ids, long n, long width);
/* hone_embedding_bf16 gathers from a bf16 table, widening to float32. */
int hone_embedding_bf16(hone_ctx* c, float* out, const uint16_t* table, const int32_t* ids, long n, long width);
int hone_embedding_backward(hone_ctx* c, float* dtable, const float* dout, const int32_t* ids, long n, long width);

/* negate: store -logp (cross-entropy). */
int hone_logprobs(hone_ctx* c, float* logp, const float* logits, const int32_t* targets, long n, long vocab,
                  int negate);
int hone_logprobs_backward(hone_ctx* c, float* dlogits, const float* logits, const int32_t* targets,
                           const float* dlogp, long n, long vocab);
/* w is float32, or bf16 (uint16_t) when w_bf16; h is float32, or bf16 when
 * h_bf16 (autocast; w must be bf16 too). h float32 and w bf16: each
 * vocabulary chunk of w is widened into the workspace before its float32
 * GEMM (exact mode). Both bf16: the logits come from the bf16 GEMM, and the
 * backward rounds the logits' gradient to bf16 for its bf16 GEMMs. */
int hone_token_logprobs(hone_ctx* c, float* logp, float* lse, const void* h, int h_bf16, const void* w, int w_bf16,
                        const int32_t* targets, long n, long hidden, long vocab);
/* dw (float32) may be NULL. */
int hone_token_logprobs_backward(hone_ctx* c, float* dh, float* dw, const void* h, int h_bf16, const void* w,
                                 int w_bf16, const float* lse, const int32_t* targets, const float* dlogp, long n,
                                 long hidden, long vocab);

/* Sampling parameters of one row: temperature <= 0 is greedy; top_k <= 0
 * and top_p >= 1 are off; seed picks the draw (counter-based: the same seed
 * and row give the same token). */
typedef struct {
  float temperature, top_p;
  int32_t top_k, reserved;
  uint64_t seed;
} hone_sampling;
/* hone_sample draws one token per row of logits [rows, vocab] (sample.cu)
 * into host_tokens, its log-probability under the raw logits into
 * host_logp, and the top_n (<= 256) raw log-probabilities with their ids,
 * best first, into host_top_ids and host_top_logp ([rows, top_n]). */
int hone_sample(hone_ctx* c, const float* logits, long rows, long vocab, const hone_sampling* host_params, int top_n,
                int32_t* host_tokens, float* host_logp, int32_t* host_top_ids, float* host_top_logp);

int hone_adamw(hone_ctx* c, float* p, const float* g, float* m, float* v, long n, float lr, float beta1, float beta2,
               float eps, float wd, int step);

#ifdef __cplusplus
}
#endif

#endif /* HONE_CUDA_H */
