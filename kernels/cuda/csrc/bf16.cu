// bf16.cu: bfloat16 storage: conversions to and from float32 and the GEMM
// with bf16 inputs and fp32 accumulation that base weights will use
// (DESIGN.md, "Dtypes"). Nothing in kernels.Backend reaches this yet; the
// Go side tests it directly.
#include "hone_cuda.h"
#include "internal.cuh"

namespace hone {

__global__ void f32_to_bf16_kernel(__nv_bfloat16* dst, const float* src, long n) {
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
    dst[i] = __float2bfloat16_rn(src[i]);
  }
}

__global__ void bf16_to_f32_kernel(float* dst, const __nv_bfloat16* src, long n) {
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
    dst[i] = __bfloat162float(src[i]);
  }
}

}  // namespace hone

using namespace hone;

extern "C" {

int hone_f32_to_bf16(hone_ctx* c, uint16_t* dst, const float* src, long n) {
  HONE_ENTRY(c);
  if (n == 0) return 0;
  HONE_LAUNCH(f32_to_bf16_kernel, grid_for(n, 256), 256, 0, c->stream, reinterpret_cast<__nv_bfloat16*>(dst), src, n);
  return check_launch(c, "f32_to_bf16");
}

int hone_bf16_to_f32(hone_ctx* c, float* dst, const uint16_t* src, long n) {
  HONE_ENTRY(c);
  if (n == 0) return 0;
  HONE_LAUNCH(bf16_to_f32_kernel, grid_for(n, 256), 256, 0, c->stream, dst,
              reinterpret_cast<const __nv_bfloat16*>(src), n);
  return check_launch(c, "bf16_to_f32");
}

// hone_gemm_bf16 maps the row-major product onto column-major cuBLAS as
// hone_gemm does (see there); only the element types differ.
int hone_gemm_bf16(hone_ctx* c, int trans_a, int trans_b, long m, long n, long k, float alpha, const uint16_t* a,
                   long stride_a, const uint16_t* b, long stride_b, float beta, float* out, long stride_c, long batch) {
  HONE_ENTRY(c);
  if (m == 0 || n == 0 || batch == 0) return 0;
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || batch > INT32_MAX) {
    return failed(c, "gemm bf16", "dimension over 2^31");
  }
  const cublasOperation_t opA = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opB = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  // cuBLAS refuses a leading dimension under 1, which k == 0 would give.
  const int ldb_ours = int(trans_b ? (k > 0 ? k : 1) : n), lda_ours = int(trans_a ? m : (k > 0 ? k : 1)), ldc = int(n);
  return check_blas(c, "gemm bf16",
                    cublasGemmStridedBatchedEx(c->blas, opA, opB, int(n), int(m), int(k), &alpha, b, CUDA_R_16BF,
                                               ldb_ours, stride_b, a, CUDA_R_16BF, lda_ours, stride_a, &beta, out,
                                               CUDA_R_32F, ldc, stride_c, int(batch), CUBLAS_COMPUTE_32F,
                                               CUBLAS_GEMM_DEFAULT));
}

}  // extern "C"
