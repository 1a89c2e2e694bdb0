// bf16.cu: bfloat16 storage: conversions to and from float32 (uploads,
// Backend.Convert, exact mode's widened weight) and the GEMM with bf16
// inputs, fp32 output and fp32 accumulation through cuBLASLt (MatMul with
// two bf16 operands: autocast's GEMMs against base weights).
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

// kLtWorkspace is the workspace cuBLASLt's algorithms may use (split-K
// reductions), per context: NVIDIA's recommendation for Hopper.
constexpr size_t kLtWorkspace = size_t(32) << 20;

// alignment is the largest power of two up to 256 dividing the address of
// every matrix of a batch (p, then stride_bytes apart): what the heuristic
// is told of each operand (it assumes 256 otherwise, and an algorithm
// chosen for that faults on a view at another offset).
inline uint32_t alignment(const void* p, long stride_bytes) {
  uint32_t a = 256;
  while (a > 1 && (uintptr_t(p) % a || stride_bytes % a)) a >>= 1;
  return a;
}

// LtCall owns one GEMM's cuBLASLt descriptors.
struct LtCall {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtCall() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

// lt_layout describes a column-major rows x cols matrix with leading
// dimension ld, batch matrices stride elements apart (0: one matrix shared
// by the batch).
inline cublasStatus_t lt_layout(cublasLtMatrixLayout_t* l, cudaDataType type, long rows, long cols, long ld, long batch,
                                long stride) {
  cublasStatus_t s = cublasLtMatrixLayoutCreate(l, type, uint64_t(rows), uint64_t(cols), int64_t(ld));
  const int32_t count = int32_t(batch);
  const int64_t offset = stride;
  if (s == CUBLAS_STATUS_SUCCESS) {
    s = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
  }
  if (s == CUBLAS_STATUS_SUCCESS) {
    s = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &offset, sizeof offset);
  }
  return s;
}

// lt_describe fills call with the descriptors of cuBLASLt's column-major
// D = op(A) op(B) of the row-major C = op(a) op(b) (see hone_gemm_bf16).
inline cublasStatus_t lt_describe(LtCall* call, int trans_a, int trans_b, long m, long n, long k, long stride_b,
                                  long batch) {
  cublasStatus_t s = cublasLtMatmulDescCreate(&call->op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  const int32_t op_a = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's A is our b
  const int32_t op_b = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's B is our a
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(call->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a);
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(call->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b);
  // Our b is [k,n] row-major (column-major n x k, ld n), or [n,k] when
  // transposed (k x n, ld k); our a is [m,k] (k x m, ld k) or [k,m] (m x k,
  // ld m); C is [m,n] (n x m, ld n).
  if (s == CUBLAS_STATUS_SUCCESS) {
    s = trans_b ? lt_layout(&call->a, CUDA_R_16BF, k, n, k, batch, stride_b)
                : lt_layout(&call->a, CUDA_R_16BF, n, k, n, batch, stride_b);
  }
  if (s == CUBLAS_STATUS_SUCCESS) {
    s = trans_a ? lt_layout(&call->b, CUDA_R_16BF, m, k, m, batch, m * k)
                : lt_layout(&call->b, CUDA_R_16BF, k, m, k, batch, m * k);
  }
  if (s == CUBLAS_STATUS_SUCCESS) s = lt_layout(&call->c, CUDA_R_32F, n, m, n, batch, m * n);
  return s;
}

// lt_algo returns the heuristic's algorithm for this GEMM from the
// context's cache, asking the heuristic on a shape's first use.
inline cublasStatus_t lt_algo(hone_ctx* c, LtCall* call, const std::array<long, 10>& key,
                              const cublasLtMatmulHeuristicResult_t** out) {
  auto it = c->lt_algos.find(key);
  if (it == c->lt_algos.end()) {
    cublasStatus_t s = cublasLtMatmulPreferenceCreate(&call->pref);
    const uint64_t ws = kLtWorkspace;
    if (s == CUBLAS_STATUS_SUCCESS) {
      s = cublasLtMatmulPreferenceSetAttribute(call->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    }
    const cublasLtMatmulPreferenceAttributes_t align_attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    // The key ends with the alignments of cuBLASLt's A, B and C (= D).
    for (int i = 0; i < 4 && s == CUBLAS_STATUS_SUCCESS; i++) {
      const uint32_t a = uint32_t(key[7 + (i < 3 ? i : 2)]);
      s = cublasLtMatmulPreferenceSetAttribute(call->pref, align_attr[i], &a, sizeof a);
    }
    cublasLtMatmulHeuristicResult_t r = {};
    int found = 0;
    if (s == CUBLAS_STATUS_SUCCESS) {
      s = cublasLtMatmulAlgoGetHeuristic(c->lt, call->op, call->a, call->b, call->c, call->c, call->pref, 1, &r, &found);
    }
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    if (found == 0 || r.state != CUBLAS_STATUS_SUCCESS) return CUBLAS_STATUS_NOT_SUPPORTED;
    it = c->lt_algos.emplace(key, r).first;
  }
  *out = &it->second;
  return CUBLAS_STATUS_SUCCESS;
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

// hone_gemm_bf16 maps the row-major product onto column-major cuBLASLt as
// hone_gemm does onto cuBLAS: C = op(A) op(B) (row-major M x N) is
// C^T = op(B)^T op(A)^T (column-major N x M), so cuBLASLt's A is our B and
// its B our A, with the same transpose flags; C is read and written in
// place (one layout for C and D). The batch is in the layouts (batch
// count, strided batch offset; a stride of 0 shares B across the batch).
// k == 0 is C = beta*C without cuBLASLt (a zero inner dimension is no
// layout cuBLASLt documents).
int hone_gemm_bf16(hone_ctx* c, int trans_a, int trans_b, long m, long n, long k, float alpha, const uint16_t* a,
                   long stride_a, const uint16_t* b, long stride_b, float beta, float* out, long stride_c, long batch) {
  HONE_ENTRY(c);
  if (m == 0 || n == 0 || batch == 0) return 0;
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || batch > INT32_MAX) {
    return failed(c, "gemm bf16", "dimension over 2^31");
  }
  if (stride_a != m * k || stride_c != m * n || (stride_b != 0 && stride_b != k * n)) {
    return failed(c, "gemm bf16", "batch strides other than packed (or 0 for a shared B)");
  }
  if (k == 0) {
    if (beta == 0) return check_cuda(c, "gemm bf16", cudaMemsetAsync(out, 0, sizeof(float) * m * n * batch, c->stream));
    return hone_scale(c, out, out, beta, m * n * batch);
  }
  if (!c->lt_work && check_cuda(c, "gemm bf16 workspace", cudaMalloc(&c->lt_work, kLtWorkspace))) return -1;
  LtCall call;
  cublasStatus_t s = lt_describe(&call, trans_a, trans_b, m, n, k, stride_b, batch);
  const long many = batch > 1;  // a single matrix has no stride to align
  const std::array<long, 10> key = {trans_a, trans_b, m, n, k, many * stride_b, batch,
                                    long(alignment(b, many * 2 * stride_b)), long(alignment(a, many * 2 * stride_a)),
                                    long(alignment(out, many * 4 * stride_c))};
  const cublasLtMatmulHeuristicResult_t* algo = nullptr;
  if (s == CUBLAS_STATUS_SUCCESS) s = lt_algo(c, &call, key, &algo);
  if (s == CUBLAS_STATUS_SUCCESS) {
    s = cublasLtMatmul(c->lt, call.op, &alpha, b, call.a, a, call.b, &beta, out, call.c, out, call.c, &algo->algo,
                       c->lt_work, kLtWorkspace, c->stream);
  }
  return check_blas(c, "gemm bf16", s);
}

// hone_lt_algos is how many GEMM shapes the context's heuristic cache holds.
long hone_lt_algos(hone_ctx* c) { return long(c->lt_algos.size()); }

}  // extern "C"
