// context.cu: the context (device, stream, cuBLAS and cuBLASLt handles,
// workspace), memory, and the float32 GEMM through cuBLAS.
#include "hone_cuda.h"
#include "internal.cuh"

using namespace hone;

extern "C" {

int hone_create(hone_ctx** out, int device, int variant, char* err, size_t errlen) {
  *out = nullptr;
  hone_ctx* c = new hone_ctx;
  c->device = device;
  c->variant = variant;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e == cudaSuccess && device >= count) e = cudaErrorInvalidValue;
  if (e == cudaSuccess) e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaStreamCreate(&c->stream);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&c->sm_count, cudaDevAttrMultiProcessorCount, device);
  if (e != cudaSuccess) {
    snprintf(err, errlen, "device %d of %d: %s", device, count, cudaGetErrorString(e));
    delete c;
    return -1;
  }
  cublasStatus_t s = cublasCreate(&c->blas);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetStream(c->blas, c->stream);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtCreate(&c->lt);
  if (s != CUBLAS_STATUS_SUCCESS) {
    snprintf(err, errlen, "cublas: %s", cublasGetStatusString(s));
    if (c->blas) cublasDestroy(c->blas);
    cudaStreamDestroy(c->stream);
    delete c;
    return -1;
  }
  *out = c;
  return 0;
}

void hone_destroy(hone_ctx* c) {
  if (!c) return;
  cudaStreamSynchronize(c->stream);
  if (c->work) cudaFree(c->work);
  if (c->lt_work) cudaFree(c->lt_work);
  c->alloc.destroy();
  cublasLtDestroy(c->lt);
  cublasDestroy(c->blas);
  cudaStreamDestroy(c->stream);
  delete c;
}

const char* hone_last_error(hone_ctx* c) { return c->err; }
void hone_clear_error(hone_ctx* c) { c->err[0] = 0; }
void hone_set_chunk(hone_ctx* c, long elems) { c->chunk_elems = elems > 0 ? elems : 1; }

int hone_malloc(hone_ctx* c, void** p, size_t bytes) {
  HONE_ENTRY(c);
  *p = nullptr;
  return check_cuda(c, "malloc", c->alloc.alloc(p, bytes));
}

int hone_malloc_empty(hone_ctx* c, void** p, size_t bytes) {
  if (hone_malloc(c, p, bytes)) return -1;
#ifdef HONE_CUDA_EMU
  // Undefined contents made visible: 0xff bytes are NaN in float32 and bf16,
  // so an operation that reads an element no one wrote shows in the tests.
  if (bytes) return check_cuda(c, "empty", cudaMemsetAsync(*p, 0xff, bytes, c->stream));
#endif
  return 0;
}

int hone_free(hone_ctx* c, void* p) {
  if (!c->alloc.free(p)) return failed(c, "free", "pointer not allocated by this context");
  return 0;
}

int hone_trim(hone_ctx* c) {
  HONE_ENTRY(c);
  if (check_cuda(c, "trim", cudaStreamSynchronize(c->stream))) return -1;
  c->alloc.release();
  return 0;
}

void hone_mem_stats(hone_ctx* c, hone_mem* m) {
  m->live_bytes = c->alloc.live_bytes;
  m->cached_bytes = c->alloc.cached_bytes;
  m->peak_live_bytes = c->alloc.peak_live;
  m->device_allocs = c->alloc.device_allocs;
  m->reuses = c->alloc.reuses;
}

void hone_mem_reset_peak(hone_ctx* c) { c->alloc.peak_live = c->alloc.live_bytes; }

int hone_upload(hone_ctx* c, void* dst, const void* src, size_t bytes) {
  HONE_ENTRY(c);
  if (!bytes) return 0;
  // From pageable memory the copy is staged before returning, so src may be
  // reused at once.
  return check_cuda(c, "upload", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream));
}

int hone_download(hone_ctx* c, void* dst, const void* src, size_t bytes) {
  HONE_ENTRY(c);
  if (!bytes) return 0;
  if (check_cuda(c, "download", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream))) return -1;
  return check_cuda(c, "download", cudaStreamSynchronize(c->stream));
}

int hone_copy(hone_ctx* c, void* dst, const void* src, size_t bytes) {
  HONE_ENTRY(c);
  if (!bytes) return 0;
  return check_cuda(c, "copy", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream));
}

int hone_zero(hone_ctx* c, void* p, size_t bytes) {
  HONE_ENTRY(c);
  if (!bytes) return 0;
  return check_cuda(c, "zero", cudaMemsetAsync(p, 0, bytes, c->stream));
}

int hone_sync(hone_ctx* c) {
  HONE_ENTRY(c);
  return check_cuda(c, "sync", cudaStreamSynchronize(c->stream));
}

// hone_gemm maps a row-major product onto column-major cuBLAS: a row-major
// [r, s] matrix is the column-major [s, r] one with leading dimension s, so
// C = op(A) op(B) (row-major, M x N) is computed as C^T = op(B)^T op(A)^T
// (column-major N x M): cuBLAS's "A" is our B and its "B" is our A, with the
// same transpose flags. Leading dimensions are the row lengths as stored:
// A is [M,K] (lda K), or [K,M] when transposed (lda M); B is [K,N] (ldb N),
// or [N,K] when transposed (ldb K); C is [M,N] (ldc N).
int hone_gemm(hone_ctx* c, int trans_a, int trans_b, long m, long n, long k, float alpha, const float* a,
              long stride_a, const float* b, long stride_b, float beta, float* out, long stride_c, long batch) {
  HONE_ENTRY(c);
  if (m == 0 || n == 0 || batch == 0) return 0;
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || batch > INT32_MAX) return failed(c, "gemm", "dimension over 2^31");
  const cublasOperation_t opA = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLAS's A is our B
  const cublasOperation_t opB = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLAS's B is our A
  // cuBLAS refuses a leading dimension under 1, which k == 0 would give.
  const int ldb_ours = int(trans_b ? (k > 0 ? k : 1) : n), lda_ours = int(trans_a ? m : (k > 0 ? k : 1)), ldc = int(n);
  // k == 0 needs no special case: cuBLAS then sets C = beta*C (C = 0 with
  // beta == 0), as the shim does.
  if (batch == 1) {
    return check_blas(c, "gemm",
                      cublasSgemm(c->blas, opA, opB, int(n), int(m), int(k), &alpha, b, ldb_ours, a, lda_ours, &beta,
                                  out, ldc));
  }
  return check_blas(c, "gemm batched",
                    cublasSgemmStridedBatched(c->blas, opA, opB, int(n), int(m), int(k), &alpha, b, ldb_ours, stride_b,
                                              a, lda_ours, stride_a, &beta, out, ldc, stride_c, int(batch)));
}

}  // extern "C"
