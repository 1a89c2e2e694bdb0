// common.cuh: what every kernel file includes: the CUDA runtime (or, with
// HONE_CUDA_EMU, the host shim of emu/), the launch macro, and the warp and
// block reductions the kernels share.
#pragma once

#include <stdint.h>

#ifdef HONE_CUDA_EMU
#include "emu/cublas_emu.h"
#include "emu/cublaslt_emu.h"
#include "emu/cuda_emu.h"
#else
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
// HONE_LAUNCH(kernel, grid, block, shared bytes, stream, args...): a kernel
// launch written so the host shim can run it too.
#define HONE_LAUNCH(kernel, grid, block, smem, stream, ...) kernel<<<(grid), (block), (smem), (stream)>>>(__VA_ARGS__)
// HONE_DYNAMIC_SHARED(type, name): the launch's dynamic shared memory as
// type name[] (one untyped extern array, so kernels of one translation unit
// may view it with different types).
#define HONE_DYNAMIC_SHARED(type, name)                     \
  extern __shared__ __align__(16) unsigned char hone_smem[]; \
  type* name = reinterpret_cast<type*>(hone_smem)
// HONE_SHARED(type, name, n): __shared__ type name[n], written so the host
// shim can instrument it (racecheck, see emu/cuda_emu.h).
#define HONE_SHARED(type, name, n) __shared__ type name[n]
#endif

namespace hone {

constexpr unsigned kFullMask = 0xffffffffu;

// ceil_div is the number of blocks of size b that cover n.
__host__ __device__ inline long ceil_div(long n, long b) { return (n + b - 1) / b; }

// grid_for returns a grid for a grid-stride loop over n elements: enough
// blocks to cover n, capped (the loop does the rest).
inline unsigned grid_for(long n, int block) {
  long g = ceil_div(n, block);
  if (g < 1) g = 1;
  if (g > 65535) g = 65535;
  return unsigned(g);
}

// warp_sum returns the sum of v over the 32 lanes of the warp, in every lane
// (butterfly reduction).
template <class T>
__device__ inline T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

// warp_max returns the maximum of v over the warp, in every lane.
__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, o));
  return v;
}

// block_sum returns the sum of v over a 1-D block whose size is a multiple
// of 32, in every thread: warps reduce, lane 0 of each warp writes its
// partial to shared memory, and after the barrier every warp reduces the
// partials itself (no broadcast needed). The trailing barrier lets a second
// call reuse the shared array.
template <class T>
__device__ inline T block_sum(T v) {
  HONE_SHARED(T, partial, 32);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < warps ? partial[lane] : T(0);
  v = warp_sum(v);
  __syncthreads();
  return v;
}

// block_max is block_sum's maximum.
__device__ inline float block_max(float v) {
  HONE_SHARED(float, partial, 32);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_max(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < warps ? partial[lane] : -INFINITY;
  v = warp_max(v);
  __syncthreads();
  return v;
}

}  // namespace hone
