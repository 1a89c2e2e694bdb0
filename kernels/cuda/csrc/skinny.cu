// skinny.cu: float32 GEMMs with one dimension of at most 32, the shapes of
// LoRA's products (its rank is that dimension), which cuBLAS runs as SIMT
// SGEMMs tiled for square problems at a third of the memory bandwidth
// these need (H100, Qwen3-0.6B's LoRA step: 21.8 us for a 2048 x 1024
// rank-16 update that moves 16 MB). Both kernels are bound by the one
// large operand they stream, read (and for C, written) once:
//
//   smallk: C[m,n] = alpha A[m,k] op(B) + beta C with k <= 32 (out += t B^T,
//           din += dt A): a thread owns a column, keeps op(B)'s k values of
//           it in registers, and walks a tile of rows whose A values sit in
//           shared memory; C is read and written once, coalesced.
//   smalln: C[m,n] = alpha A[m,k] op(B) + beta C with n <= 32 and any k
//           (t = x A^T, dt = dy B): a warp owns a row and its lanes split
//           k; op(B) is staged in shared memory a chunk of k at a time;
//           each lane sums its share for all n outputs, then the warp adds
//           the lanes' sums.
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

constexpr int kSkinny = 32;   // the small dimension's bound
constexpr int kRowsK = 64;    // rows per block (smallk)
constexpr int kChunkN = 256;  // k values of op(B) staged at a time (smalln)
constexpr int kRowsN = 16;    // rows per block (smalln): 8 warps, 2 rows each

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
  float b[kSkinny];
  HONE_UNROLL_LOOP
  for (int p = 0; p < kSkinny; p++) b[p] = p < k ? opb(B, p, j, n, k, trans_b) : 0.f;
  for (int r = 0; r < rows; r++) {
    float acc = 0;
    HONE_UNROLL_LOOP
    for (int p = 0; p < kSkinny; p++) {
      if (p < k) acc += as[r * k + p] * b[p];
    }
    float* c = C + (i0 + r) * n + j;
    *c = beta == 0.f ? alpha * acc : alpha * acc + beta * *c;
  }
}

// gemm_smalln_kernel: grid (rows / kRowsN), 256 threads; op(B) staged as
// [kChunkN][n + 1] (the padding keeps the lanes' reads of one column, k
// apart, in different banks).
__global__ void gemm_smalln_kernel(float* C, const float* A, const float* B, long m, int n, long k, int trans_b,
                                   float alpha, float beta) {
  HONE_SHARED(float, bs, kChunkN * (kSkinny + 1));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, w = n + 1;
  const long i0 = long(blockIdx.x) * kRowsN + warp * 2;
  float acc[2][kSkinny];
  HONE_UNROLL_LOOP
  for (int j = 0; j < kSkinny; j++) acc[0][j] = acc[1][j] = 0.f;
  for (long p0 = 0; p0 < k; p0 += kChunkN) {
    const int pc = k - p0 < kChunkN ? int(k - p0) : kChunkN;
    __syncthreads();  // the last chunk is consumed
    for (int e = threadIdx.x; e < pc * n; e += blockDim.x) {
      // Coalesced reads of B: along p when B is [n, k], along j when [k, n].
      const int p = trans_b ? e % pc : e / n, j = trans_b ? e / pc : e % n;
      bs[p * w + j] = opb(B, p0 + p, j, n, k, trans_b);
    }
    __syncthreads();
    for (int r = 0; r < 2; r++) {
      const long i = i0 + r;
      if (i >= m) break;  // warp-uniform
      for (int p = lane; p < pc; p += 32) {
        const float a = A[i * k + p0 + p];
        HONE_UNROLL_LOOP
        for (int j = 0; j < kSkinny; j++) {
          if (j < n) acc[r][j] += a * bs[p * w + j];
        }
      }
    }
  }
  for (int r = 0; r < 2; r++) {
    const long i = i0 + r;
    if (i >= m) break;
    HONE_UNROLL_LOOP
    for (int j = 0; j < kSkinny; j++) {
      if (j >= n) break;
      const float s = warp_sum(acc[r][j]);
      if (lane == 0) {
        float* c = C + i * n + j;
        *c = beta == 0.f ? alpha * s : alpha * s + beta * *c;
      }
    }
  }
}

// skinny_gemm runs C = alpha A op(B) + beta C (row-major, A untransposed,
// one matrix) here when one of k and n is at most kSkinny; it returns 1
// when the shape is not one of those, else hone_gemm's result.
int skinny_gemm(hone_ctx* c, int trans_b, long m, long n, long k, float alpha, const float* a, const float* b,
                float beta, float* out) {
  if (k >= 1 && k <= kSkinny) {
    const dim3 grid(unsigned(ceil_div(n, 256)), unsigned(ceil_div(m, kRowsK)));
    HONE_LAUNCH(gemm_smallk_kernel, grid, 256, 0, c->stream, out, a, b, m, n, int(k), trans_b, alpha, beta);
    return check_launch(c, "gemm (small k)");
  }
  if (k > kSkinny && n <= kSkinny) {
    HONE_LAUNCH(gemm_smalln_kernel, unsigned(ceil_div(m, kRowsN)), 256, 0, c->stream, out, a, b, m, int(n), k, trans_b,
                alpha, beta);
    return check_launch(c, "gemm (small n)");
  }
  return 1;
}

}  // namespace hone
