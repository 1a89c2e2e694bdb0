// selftest.cuh: kernels that check the shim itself (emu_test.go): warp
// shuffles and ballots return what CUDA documents, atomics add up, and the
// launch errors the device would hang or misbehave on (a barrier some lanes
// of a warp never reach, a shuffle naming a lane that exited) are reported.
// Also the switch of the shim's schedule. Compiled only into the emulated
// backend.
#pragma once

#include "../internal.cuh"

namespace emu_selftest {

// shuffles_kernel writes, per thread t of one 64-thread block, 5 values:
// xor 1, down 3, broadcast of lane 5, up 2, and the ballot of t % 3 == 0.
__global__ void shuffles_kernel(float* out) {
  const int t = threadIdx.x;
  const float v = float(t);
  out[5 * t + 0] = __shfl_xor_sync(0xffffffffu, v, 1);
  out[5 * t + 1] = __shfl_down_sync(0xffffffffu, v, 3);
  out[5 * t + 2] = __shfl_sync(0xffffffffu, v, 5);
  out[5 * t + 3] = __shfl_up_sync(0xffffffffu, v, 2);
  out[5 * t + 4] = float(__ballot_sync(0xffffffffu, t % 3 == 0));
}

// atomics_kernel: every thread of 4 blocks of 128 adds its index to out[0].
__global__ void atomics_kernel(float* out) { atomicAdd(out, float(blockIdx.x * blockDim.x + threadIdx.x)); }

// divergent_kernel: half the lanes of each warp wait at __syncthreads, the
// other half at __syncwarp: neither barrier can complete.
__global__ void divergent_kernel(float* out) {
  if (threadIdx.x % 32 < 16) {
    __syncthreads();
  } else {
    __syncwarp();
  }
  out[threadIdx.x] = 1;
}

// exited_lane_kernel: lanes 16..31 return, then lanes 0..15 shuffle with a
// full mask.
__global__ void exited_lane_kernel(float* out) {
  if (threadIdx.x % 32 >= 16) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, float(threadIdx.x), 1);
}

}  // namespace emu_selftest

// hone_emu_selftest runs self-test which (0 shuffles, 1 atomics, 2
// divergent, 3 exited lane) into out (at least 320 floats), returning 0 or
// -1 with the launch error in err.
extern "C" int hone_emu_selftest(int which, float* out, char* err, size_t errlen) {
  using namespace emu_selftest;
  cudaGetLastError();
  switch (which) {
    case 0: HONE_LAUNCH(shuffles_kernel, 1, 64, 0, nullptr, out); break;
    case 1: HONE_LAUNCH(atomics_kernel, 4, 128, 0, nullptr, out); break;
    case 2: HONE_LAUNCH(divergent_kernel, 1, 64, 0, nullptr, out); break;
    case 3: HONE_LAUNCH(exited_lane_kernel, 1, 32, 0, nullptr, out); break;
    default: snprintf(err, errlen, "no self-test %d", which); return -1;
  }
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    snprintf(err, errlen, "%s", cudaGetErrorString(e));
    return -1;
  }
  return 0;
}

// hone_emu_eager_warps sets the schedule of the context's launches (see
// run_block in cuda_emu.h).
extern "C" void hone_emu_eager_warps(hone_ctx* c, int on) { c->stream->eager_warps = on != 0; }
