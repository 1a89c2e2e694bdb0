// cublas_emu.h: the cuBLAS calls hone makes, on host memory, with cuBLAS's
// documented semantics: column-major operands, op(A) is m x k, op(B) is
// k x n, C is m x n, leading dimensions checked as cuBLAS checks them
// (CUBLAS_STATUS_INVALID_VALUE), and with beta == 0 C is not read (NaN in C
// does not propagate). Alpha and beta are host pointers (the default
// CUBLAS_POINTER_MODE_HOST). So hone's row-major-to-column-major mapping,
// its transposes, leading dimensions and batch strides are exercised exactly
// as the device would see them.
#pragma once

#include "cuda_emu.h"

typedef enum {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
} cublasStatus_t;

// library_types.h and cublas_api.h values (cuBLASLt's types and compute
// type, cublaslt_emu.h).
typedef enum { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType_t;
typedef cudaDataType_t cudaDataType;
typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;

typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;

struct cublasContext {
  cudaStream_t stream = nullptr;
};
typedef cublasContext* cublasHandle_t;

inline cublasStatus_t cublasCreate(cublasHandle_t* h) {
  *h = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasDestroy(cublasHandle_t h) {
  delete h;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  h->stream = s;
  return CUBLAS_STATUS_SUCCESS;
}
inline const char* cublasGetStatusString(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

namespace emu {

// gemm_col is one column-major C = alpha*op(A)*op(B) + beta*C, accumulating
// in float in k order.
inline void gemm_col(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                     const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  for (int j = 0; j < n; j++) {
    for (int i = 0; i < m; i++) {
      float s = 0;
      for (int p = 0; p < k; p++) {
        float a = ta == CUBLAS_OP_N ? A[i + size_t(p) * lda] : A[p + size_t(i) * lda];
        float b = tb == CUBLAS_OP_N ? B[p + size_t(j) * ldb] : B[j + size_t(p) * ldb];
        s += a * b;
      }
      float& c = C[i + size_t(j) * ldc];
      c = beta == 0 ? alpha * s : alpha * s + beta * c;
    }
  }
}

// gemm_check validates arguments as cuBLAS documents for ?gemm.
inline cublasStatus_t gemm_check(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                 int lda, int ldb, int ldc) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  auto op = [](cublasOperation_t o) { return o == CUBLAS_OP_N || o == CUBLAS_OP_T || o == CUBLAS_OP_C; };
  auto mx = [](int a) { return a > 1 ? a : 1; };
  if (!op(ta) || !op(tb) || m < 0 || n < 0 || k < 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (lda < mx(ta == CUBLAS_OP_N ? m : k)) return CUBLAS_STATUS_INVALID_VALUE;
  if (ldb < mx(tb == CUBLAS_OP_N ? k : n)) return CUBLAS_STATUS_INVALID_VALUE;
  if (ldc < mx(m)) return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace emu

inline cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                                  const float* alpha, const float* A, int lda, const float* B, int ldb,
                                  const float* beta, float* C, int ldc) {
  cublasStatus_t st = emu::gemm_check(h, ta, tb, m, n, k, lda, ldb, ldc);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  emu::gemm_col(ta, tb, m, n, k, *alpha, A, lda, B, ldb, *beta, C, ldc);
  return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                                                int n, int k, const float* alpha, const float* A, int lda,
                                                long long strideA, const float* B, int ldb, long long strideB,
                                                const float* beta, float* C, int ldc, long long strideC,
                                                int batch) {
  cublasStatus_t st = emu::gemm_check(h, ta, tb, m, n, k, lda, ldb, ldc);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  if (batch < 0) return CUBLAS_STATUS_INVALID_VALUE;
  for (int b = 0; b < batch; b++) {
    emu::gemm_col(ta, tb, m, n, k, *alpha, A + b * strideA, lda, B + b * strideB, ldb, *beta, C + b * strideC, ldc);
  }
  return CUBLAS_STATUS_SUCCESS;
}
