// cublaslt_emu.h: the cuBLASLt calls hone makes, on host memory, with the
// semantics cublasLt.h documents: D = alpha*op(A)*op(B) + beta*C on
// column-major matrices described by layout descriptors (type, rows, cols,
// leading dimension, batch count, strided batch offset), transposes in the
// matmul descriptor (CUBLASLT_MATMUL_DESC_TRANSA/B), alpha and beta host
// pointers (the default CUBLASLT_POINTER_MODE_HOST), and with beta == 0 C
// is not read. Descriptors are checked as the library checks them:
// attribute sizes, leading dimensions under the row count, dimensions that
// do not chain, batch counts that differ, an in-place product (C == D) with
// two layouts, too little workspace for the algorithm, pointers less
// aligned than the heuristic was told: CUBLAS_STATUS_INVALID_VALUE. Types
// other than hone's one combination (bf16 A and B, fp32 C and D,
// CUBLAS_COMPUTE_32F with fp32 scale), other memory orders and a transposed
// C are CUBLAS_STATUS_NOT_SUPPORTED: the real library supports more, the
// shim models only what hone uses. Attributes hone does not set are refused
// likewise, so a new one has to be modelled here first.
#pragma once

#include <string.h>

#include "cublas_emu.h"
#include "cuda_emu.h"

// cublasLt.h's values.
typedef enum {
  CUBLASLT_MATRIX_LAYOUT_TYPE = 0,
  CUBLASLT_MATRIX_LAYOUT_ORDER = 1,
  CUBLASLT_MATRIX_LAYOUT_ROWS = 2,
  CUBLASLT_MATRIX_LAYOUT_COLS = 3,
  CUBLASLT_MATRIX_LAYOUT_LD = 4,
  CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,
  CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6,
} cublasLtMatrixLayoutAttribute_t;

typedef enum {
  CUBLASLT_MATMUL_DESC_COMPUTE_TYPE = 0,
  CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1,
  CUBLASLT_MATMUL_DESC_POINTER_MODE = 2,
  CUBLASLT_MATMUL_DESC_TRANSA = 3,
  CUBLASLT_MATMUL_DESC_TRANSB = 4,
  CUBLASLT_MATMUL_DESC_TRANSC = 5,
} cublasLtMatmulDescAttributes_t;

typedef enum {
  CUBLASLT_MATMUL_PREF_SEARCH_MODE = 0,
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
} cublasLtMatmulPreferenceAttributes_t;

typedef enum { CUBLASLT_ORDER_COL = 0, CUBLASLT_ORDER_ROW = 1 } cublasLtOrder_t;
typedef enum { CUBLASLT_POINTER_MODE_HOST = 0, CUBLASLT_POINTER_MODE_DEVICE = 1 } cublasLtPointerMode_t;

struct cublasLtContext {
  // Heuristic queries answered (the tests read it: hone caches them).
  long heuristics = 0;
};
typedef cublasLtContext* cublasLtHandle_t;

struct cublasLtMatrixLayoutOpaque_t {
  cudaDataType type;
  int32_t order;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch;
  int64_t stride;
};
typedef cublasLtMatrixLayoutOpaque_t* cublasLtMatrixLayout_t;

struct cublasLtMatmulDescOpaque_t {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  int32_t pointer_mode, transa, transb, transc;
};
typedef cublasLtMatmulDescOpaque_t* cublasLtMatmulDesc_t;

struct cublasLtMatmulPreferenceOpaque_t {
  uint32_t search_mode;
  uint64_t max_workspace;
  uint32_t align[4];  // A, B, C, D
};
typedef cublasLtMatmulPreferenceOpaque_t* cublasLtMatmulPreference_t;

typedef struct {
  uint64_t data[8];
} cublasLtMatmulAlgo_t;

typedef struct {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
} cublasLtMatmulHeuristicResult_t;

namespace emu {

// The shim's one algorithm: it asks for kLtAlgoWorkspace bytes of
// workspace when the preference allows that much (as split-K algorithms
// do), and for the pointer alignment the preference promised, up to 16
// bytes (vector loads); cublasLtMatmul writes the whole workspace, so a
// workspace smaller than claimed is a heap overflow under AddressSanitizer.
constexpr uint64_t kLtAlgoMagic = 0x686f6e654c74ull;  // "honeLt"
constexpr size_t kLtAlgoWorkspace = 1 << 20;

template <class T>
inline cublasStatus_t lt_set(T* dst, const void* buf, size_t size) {
  if (!buf || size != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  memcpy(dst, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

inline bool lt_op(int32_t op) { return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C; }

// LtShape is a checked product: op(A) is m x k, op(B) k x n, C and D m x n,
// batch matrices of each.
struct LtShape {
  uint64_t m, n, k;
  int32_t batch;
};

// lt_check validates a product as cublasLtMatmul and the heuristic do.
inline cublasStatus_t lt_check(cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                               cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                               LtShape* s) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!op || !a || !b || !c || !d) return CUBLAS_STATUS_INVALID_VALUE;
  if (op->compute != CUBLAS_COMPUTE_32F || op->scale != CUDA_R_32F || a->type != CUDA_R_16BF ||
      b->type != CUDA_R_16BF || c->type != CUDA_R_32F || d->type != CUDA_R_32F) {
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (op->pointer_mode != CUBLASLT_POINTER_MODE_HOST || op->transc != CUBLAS_OP_N) return CUBLAS_STATUS_NOT_SUPPORTED;
  for (auto* l : {a, b, c, d}) {
    if (l->order != CUBLASLT_ORDER_COL) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (l->ld < int64_t(l->rows > 1 ? l->rows : 1) || l->batch < 1 || l->stride < 0) {
      return CUBLAS_STATUS_INVALID_VALUE;
    }
  }
  if (!lt_op(op->transa) || !lt_op(op->transb)) return CUBLAS_STATUS_INVALID_VALUE;
  const bool ta = op->transa != CUBLAS_OP_N, tb = op->transb != CUBLAS_OP_N;
  s->m = d->rows;
  s->n = d->cols;
  s->k = ta ? a->rows : a->cols;
  s->batch = d->batch;
  if ((ta ? a->cols : a->rows) != s->m || (tb ? b->rows : b->cols) != s->n || (tb ? b->cols : b->rows) != s->k ||
      c->rows != s->m || c->cols != s->n) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (a->batch != s->batch || b->batch != s->batch || c->batch != s->batch) return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

// lt_aligned reports whether p is aligned to the algorithm's demand.
inline bool lt_aligned(const void* p, uint64_t align) { return align <= 1 || uintptr_t(p) % align == 0; }

}  // namespace emu

inline cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) {
  if (!h) return CUBLAS_STATUS_INVALID_VALUE;
  *h = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
  if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete h;
  return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType type, uint64_t rows,
                                                 uint64_t cols, int64_t ld) {
  if (!l) return CUBLAS_STATUS_INVALID_VALUE;
  *l = new cublasLtMatrixLayoutOpaque_t{type, CUBLASLT_ORDER_COL, rows, cols, ld, 1, 0};
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  delete l;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t attr,
                                                       const void* buf, size_t size) {
  if (!l) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_TYPE: {
      uint32_t t;
      cublasStatus_t st = emu::lt_set(&t, buf, size);
      if (st == CUBLAS_STATUS_SUCCESS) l->type = cudaDataType(t);
      return st;
    }
    case CUBLASLT_MATRIX_LAYOUT_ORDER: return emu::lt_set(&l->order, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_ROWS: return emu::lt_set(&l->rows, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_COLS: return emu::lt_set(&l->cols, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_LD: return emu::lt_set(&l->ld, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return emu::lt_set(&l->batch, buf, size);
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return emu::lt_set(&l->stride, buf, size);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

inline cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t compute,
                                               cudaDataType_t scale) {
  if (!d) return CUBLAS_STATUS_INVALID_VALUE;
  *d = new cublasLtMatmulDescOpaque_t{compute, scale, CUBLASLT_POINTER_MODE_HOST, CUBLAS_OP_N, CUBLAS_OP_N,
                                      CUBLAS_OP_N};
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  delete d;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                                     const void* buf, size_t size) {
  if (!d) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return emu::lt_set(reinterpret_cast<int32_t*>(&d->compute), buf, size);
    case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return emu::lt_set(reinterpret_cast<int32_t*>(&d->scale), buf, size);
    case CUBLASLT_MATMUL_DESC_POINTER_MODE: return emu::lt_set(&d->pointer_mode, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSA: return emu::lt_set(&d->transa, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSB: return emu::lt_set(&d->transb, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSC: return emu::lt_set(&d->transc, buf, size);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

inline cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) {
  if (!p) return CUBLAS_STATUS_INVALID_VALUE;
  *p = new cublasLtMatmulPreferenceOpaque_t{0, 0, {256, 256, 256, 256}};
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                           cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                           size_t size) {
  if (!p) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_SEARCH_MODE: return emu::lt_set(&p->search_mode, buf, size);
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return emu::lt_set(&p->max_workspace, buf, size);
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      return emu::lt_set(&p->align[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], buf, size);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

// cublasLtMatmulAlgoGetHeuristic answers with the shim's one algorithm
// (see kLtAlgoWorkspace) for a product cublasLtMatmul would accept.
inline cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t op,
                                                     cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                                     cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                                     cublasLtMatmulPreference_t pref, int requested,
                                                     cublasLtMatmulHeuristicResult_t results[], int* returned) {
  if (requested <= 0 || !pref || !results || !returned) return CUBLAS_STATUS_INVALID_VALUE;
  emu::LtShape s;
  cublasStatus_t st = emu::lt_check(h, op, a, b, c, d, &s);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  h->heuristics++;
  cublasLtMatmulHeuristicResult_t r = {};
  r.algo.data[0] = emu::kLtAlgoMagic;
  r.workspaceSize = pref->max_workspace >= emu::kLtAlgoWorkspace ? emu::kLtAlgoWorkspace : 0;
  r.algo.data[1] = r.workspaceSize;
  for (int i = 0; i < 4; i++) r.algo.data[2 + i] = pref->align[i] < 16 ? pref->align[i] : 16;
  r.state = CUBLAS_STATUS_SUCCESS;
  r.wavesCount = 1;
  results[0] = r;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void* alpha, const void* A,
                                     cublasLtMatrixLayout_t adesc, const void* B, cublasLtMatrixLayout_t bdesc,
                                     const void* beta, const void* C, cublasLtMatrixLayout_t cdesc, void* D,
                                     cublasLtMatrixLayout_t ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                                     size_t workspace_bytes, cudaStream_t) {
  emu::LtShape s;
  cublasStatus_t st = emu::lt_check(h, op, adesc, bdesc, cdesc, ddesc, &s);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  if (!alpha || !beta) return CUBLAS_STATUS_INVALID_VALUE;
  // In place (C == D) needs one layout for both.
  if (C == D && (cdesc->ld != ddesc->ld || cdesc->stride != ddesc->stride)) return CUBLAS_STATUS_INVALID_VALUE;
  if (algo) {
    if (algo->data[0] != emu::kLtAlgoMagic) return CUBLAS_STATUS_INVALID_VALUE;
    if (workspace_bytes < algo->data[1] || (algo->data[1] && !workspace)) return CUBLAS_STATUS_INVALID_VALUE;
    // Every matrix of the batch, not just the first.
    const char* ptrs[4] = {static_cast<const char*>(A), static_cast<const char*>(B), static_cast<const char*>(C),
                           static_cast<const char*>(D)};
    const int64_t strides[4] = {2 * adesc->stride, 2 * bdesc->stride, 4 * cdesc->stride, 4 * ddesc->stride};
    for (int i = 0; i < 4; i++) {
      for (int32_t bi = 0; bi < s.batch; bi++) {
        if (!emu::lt_aligned(ptrs[i] + bi * strides[i], algo->data[2 + i])) return CUBLAS_STATUS_INVALID_VALUE;
      }
    }
    if (algo->data[1]) memset(workspace, 0, algo->data[1]);
  }
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  const bool ta = op->transa != CUBLAS_OP_N, tb = op->transb != CUBLAS_OP_N;
  const int64_t lda = adesc->ld, ldb = bdesc->ld, ldc = cdesc->ld, ldd = ddesc->ld;
  for (int32_t bi = 0; bi < s.batch; bi++) {
    const __nv_bfloat16* a = static_cast<const __nv_bfloat16*>(A) + bi * adesc->stride;
    const __nv_bfloat16* b = static_cast<const __nv_bfloat16*>(B) + bi * bdesc->stride;
    const float* c = static_cast<const float*>(C) + bi * cdesc->stride;
    float* d = static_cast<float*>(D) + bi * ddesc->stride;
    for (uint64_t j = 0; j < s.n; j++) {
      for (uint64_t i = 0; i < s.m; i++) {
        float acc = 0;
        for (uint64_t p = 0; p < s.k; p++) {
          const float x = __bfloat162float(ta ? a[p + i * lda] : a[i + p * lda]);
          const float y = __bfloat162float(tb ? b[j + p * ldb] : b[p + j * ldb]);
          acc += x * y;
        }
        const float out = be == 0 ? al * acc : al * acc + be * c[i + j * ldc];
        d[i + j * ldd] = out;
      }
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}
