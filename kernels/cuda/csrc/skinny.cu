// skinny.cu: float32 GEMMs C[m,n] = alpha A[m,k] op(B) + beta C with k of
// at most 32: LoRA's rank-r updates (out += t B^T, din += dt A), which
// cuBLAS runs as SIMT SGEMMs tiled for square problems (H100, Qwen3-0.6B's
// LoRA step: 21.8 us for a 2048 x 1024 rank-16 update that moves 16 MB, a
// third of the memory bandwidth). The product is bound by C, read and
// written once: a thread owns one column of a tile of kRowsK rows, keeps
// op(B)'s k values of that column in registers, and issues the tile's C
// loads together; the tile's rows of A sit in shared memory.
//
// (A kernel for small n and large k, t = x A^T, staged op(B) through
// shared memory one chunk of k at a time with a warp per row; on the H100
// it took 98 us where cuBLAS takes 8 to 13, so those shapes stay cuBLAS's.)
//
// hone_gemm dispatches here on the fast variant for unbatched products with
// an untransposed A (the readable variant keeps cuBLAS as the reference).
// beta == 0 never reads C (it may be uninitialised: kernels.Backend.Empty).
#include "hone_cuda.h"
#include "internal.cuh"

// The loops over a thread's accumulators must unroll for them to stay in
// registers (an array indexed at run time goes to local memory).
#ifdef HONE_CUDA_EMU
#define HONE_UNROLL_LOOP
#else
#define HONE_UNROLL_LOOP _Pragma("unroll")
#endif

namespace hone {

constexpr int kSkinny = 32;  // the largest k
constexpr int kRowsK = 8;    // rows per block: a thread's independent C loads

// opb is op(B)[p][j]: B[j][p] (B is [n, k]) when trans_b, else B[p][j].
__device__ inline float opb(const float* B, long p, long j, long n, long k, int trans_b) {
  return trans_b ? B[j * k + p] : B[p * n + j];
}

// gemm_smallk_kernel: grid (columns / 256, rows / kRowsK), 256 threads.
__global__ void gemm_smallk_kernel(float* C, const float* A, const float* B, long m, long n, int k, int trans_b,
                                   float alpha, float beta) {
  HONE_SHARED(float, as, kRowsK * kSkinny);
  const long j = long(blockIdx.x) * blockDim.x + threadIdx.x;
  const long i0 = long(blockIdx.y) * kRowsK;
  const int rows = m - i0 < kRowsK ? int(m - i0) : kRowsK;
  // The tile's rows of A are contiguous: rows * k values from A + i0 * k.
  for (int e = threadIdx.x; e < rows * k; e += blockDim.x) as[e] = A[i0 * k + e];
  __syncthreads();
  if (j >= n) return;
  float b[kSkinny], c[kRowsK];
  HONE_UNROLL_LOOP
  for (int p = 0; p < kSkinny; p++) b[p] = p < k ? opb(B, p, j, n, k, trans_b) : 0.f;
  HONE_UNROLL_LOOP
  for (int r = 0; r < kRowsK; r++) c[r] = beta != 0.f && r < rows ? C[(i0 + r) * n + j] : 0.f;
  HONE_UNROLL_LOOP
  for (int r = 0; r < kRowsK; r++) {
    if (r >= rows) break;
    float acc = 0;
    HONE_UNROLL_LOOP
    for (int p = 0; p < kSkinny; p++) {
      if (p < k) acc += as[r * k + p] * b[p];
    }
    C[(i0 + r) * n + j] = beta == 0.f ? alpha * acc : alpha * acc + beta * c[r];
  }
}

// skinny_gemm runs C = alpha A op(B) + beta C (row-major, A untransposed,
// one matrix) here when 1 <= k <= kSkinny; it returns 1 when the shape is
// not one of those (or c->skinny is off), else hone_gemm's result.
int skinny_gemm(hone_ctx* c, int trans_b, long m, long n, long k, float alpha, const float* a, const float* b,
                float beta, float* out) {
  if (!c->skinny || k < 1 || k > kSkinny) return 1;
  const dim3 grid(unsigned(ceil_div(n, 256)), unsigned(ceil_div(m, kRowsK)));
  HONE_LAUNCH(gemm_smallk_kernel, grid, 256, 0, c->stream, out, a, b, m, n, int(k), trans_b, alpha, beta);
  return check_launch(c, "gemm (small k)");
}

}  // namespace hone
