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

// bf16_bits packs two small integers (exact in bf16) into an mma register,
// the lower-indexed element in the low half.
inline uint32_t bf16_pair(float lo, float hi) {
  return uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(lo))) |
         (uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(hi))) << 16);
}

// mma_kernel: one warp runs D = A B + C (m16n8k16) with A[m][k] = m - k,
// B[k][n] = (k + 2n) % 7 - 3, C[m][n] = 8m + n, every fragment element
// placed as the PTX ISA's table lists it per element index i (A: row
// groupID for a0, a1, a4, a5, else + 8; col 2 tig + (i & 1), + 8 for i >= 4;
// B: row 2 tig + (i & 1), + 8 for i >= 2, col groupID; C/D: row groupID,
// + 8 for i >= 2, col 2 tig + (i & 1)), and writes D row-major to out[0..128).
__global__ void mma_kernel(float* out) {
  const int lane = threadIdx.x, g = lane >> 2, tig = lane & 3;
  float ae[8], be[4], c[4];
  for (int i = 0; i < 8; i++) {
    const int row = g + ((i >> 1) & 1) * 8, col = 2 * tig + (i & 1) + (i >= 4 ? 8 : 0);
    ae[i] = float(row - col);
  }
  for (int i = 0; i < 4; i++) {
    const int row = 2 * tig + (i & 1) + (i >= 2 ? 8 : 0), col = g;
    be[i] = float((row + 2 * col) % 7 - 3);
  }
  for (int i = 0; i < 4; i++) c[i] = float(8 * (g + (i >= 2 ? 8 : 0)) + 2 * tig + (i & 1));
  const uint32_t a[4] = {bf16_pair(ae[0], ae[1]), bf16_pair(ae[2], ae[3]), bf16_pair(ae[4], ae[5]),
                         bf16_pair(ae[6], ae[7])};
  const uint32_t b[2] = {bf16_pair(be[0], be[1]), bf16_pair(be[2], be[3])};
  float d[4];
  hone_mma_bf16_m16n8k16(d, a, b, c);
  for (int i = 0; i < 4; i++) out[8 * (g + (i >= 2 ? 8 : 0)) + 2 * tig + (i & 1)] = d[i];
}

// mma_divergent_kernel: only lanes 0..15 reach the mma.
__global__ void mma_divergent_kernel(float* out) {
  if (threadIdx.x >= 16) return;
  const uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
  float d[4] = {0, 0, 0, 0};
  hone_mma_bf16_m16n8k16(d, a, b, d);
  out[threadIdx.x] = d[0];
}

// big_smem_kernel touches 64 KiB of dynamic shared memory.
__global__ void big_smem_kernel(float* out) {
  HONE_DYNAMIC_SHARED(float, smem);
  smem[threadIdx.x] = 1;
  out[threadIdx.x] = smem[threadIdx.x];
}

// exited_lane_kernel: lanes 16..31 return, then lanes 0..15 shuffle with a
// full mask.
__global__ void exited_lane_kernel(float* out) {
  if (threadIdx.x % 32 >= 16) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, float(threadIdx.x), 1);
}

// partial_ballot_kernel: in each warp of 64 threads, lanes 0..15 take a
// ballot over their half (mask 0x0000ffff) and lanes 16..31 over theirs,
// of t % 5 == 0; each thread writes the low and the high 16 bits (a float
// holds 16 bits exactly).
__global__ void partial_ballot_kernel(float* out) {
  const unsigned t = threadIdx.x, lane = t % 32;
  const unsigned b = __ballot_sync(lane < 16 ? 0x0000ffffu : 0xffff0000u, t % 5 == 0);
  out[2 * t] = float(b & 0xffffu);
  out[2 * t + 1] = float(b >> 16);
}

// ---- racecheck self-tests: kernels with one deliberate hazard each (and
// the race-free counterparts that must not be reported), 64 threads.

// raw_kernel: thread 0 writes buf[0], every thread reads it, no barrier
// (RAW: thread 1 reads what thread 0 wrote).
__global__ void raw_kernel(float* out) {
  HONE_SHARED(float, buf, 64);
  if (threadIdx.x == 0) buf[0] = 1;
  out[threadIdx.x] = buf[0];
}

// war_kernel: each thread reads its right neighbour's word and then
// overwrites its own, with no barrier between (the classic reuse without
// __syncthreads; WAR: thread 0 read word 1, thread 1 writes it).
__global__ void war_kernel(float* out) {
  HONE_SHARED(float, buf, 64);
  const int t = threadIdx.x;
  buf[t] = float(t);
  __syncthreads();
  out[t] = buf[(t + 1) % 64];
  buf[t] = 0;
}

// waw_kernel: every thread writes word 0 (WAW).
__global__ void waw_kernel(float* out) {
  HONE_SHARED(float, buf, 64);
  buf[0] = float(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = buf[0];
}

// atomics_ok_kernel: every thread adds to word 0 atomically between two
// barriers; race-free. out[t] = 64 * 63 / 2.
__global__ void atomics_ok_kernel(float* out) {
  HONE_SHARED(float, buf, 1);
  if (threadIdx.x == 0) buf[0] = 0;
  __syncthreads();
  atomicAdd(&buf[0], float(threadIdx.x));
  __syncthreads();
  out[threadIdx.x] = buf[0];
}

// atomic_read_kernel: the same, without the second barrier: the plain read
// races with the other threads' atomics (RAW).
__global__ void atomic_read_kernel(float* out) {
  HONE_SHARED(float, buf, 1);
  if (threadIdx.x == 0) buf[0] = 0;
  __syncthreads();
  atomicAdd(&buf[0], float(threadIdx.x));
  out[threadIdx.x] = buf[0];
}

// warp_sync_kernel: lanes exchange words through shared memory within
// their warp, ordered by __syncwarp (warp-synchronous, race-free).
__global__ void warp_sync_kernel(float* out) {
  HONE_SHARED(float, buf, 64);
  const int t = threadIdx.x;
  buf[t] = float(t);
  __syncwarp();
  out[t] = buf[t ^ 1];
}

// cross_warp_kernel: the same exchange across warps (t ^ 32): __syncwarp
// does not order two warps (RAW or WAR between warp 0 and warp 1).
__global__ void cross_warp_kernel(float* out) {
  HONE_SHARED(float, buf, 64);
  const int t = threadIdx.x;
  buf[t] = float(t);
  __syncwarp();
  out[t] = buf[t ^ 32];
}

// block_max_twice_kernel: two block maxima in a row, which reuse
// block_max's shared partials: race-free with its trailing barrier, a WAR
// hazard without it (no kernel of csrc/ calls block_max twice, so only
// this shows the trailing barrier is needed). out[t] = 63 + 1000.
__global__ void block_max_twice_kernel(float* out) {
  const float a = hone::block_max(float(threadIdx.x));
  const float b = hone::block_max(float(1000 - int(threadIdx.x)));
  out[threadIdx.x] = a + b;
}

// dynamic_oob_kernel: thread 63 writes one float past the launch's 256
// bytes of dynamic shared memory.
__global__ void dynamic_oob_kernel(float* out) {
  HONE_DYNAMIC_SHARED(float, dyn);
  dyn[threadIdx.x + 1] = 1;
  out[threadIdx.x] = 0;
}

// ---- global-memory racecheck self-tests (builds with the store hooks).

// global_waw_kernel: threads 0 and 1 write out[0] (WAW).
__global__ void global_waw_kernel(float* out) {
  if (threadIdx.x < 2) out[0] = float(threadIdx.x);
}

// global_atomics_ok_kernel: every thread of 2 blocks adds 1 to out[0]
// atomically (race-free).
__global__ void global_atomics_ok_kernel(float* out) { atomicAdd(out, 1.0f); }

// global_ordered_kernel: thread 0 writes out[0], then after a barrier
// thread 1 does (ordered, race-free).
__global__ void global_ordered_kernel(float* out) {
  if (threadIdx.x == 0) out[0] = 1;
  __syncthreads();
  if (threadIdx.x == 1) out[0] = 2;
}

// global_cross_block_kernel: thread 0 of each of 2 blocks writes out[0]
// (WAW across blocks, which no barrier orders).
__global__ void global_cross_block_kernel(float* out) {
  if (threadIdx.x == 0) out[0] = float(blockIdx.x);
}

// global_atomic_plain_kernel: atomics on out[0], then a plain write of it
// by thread 5 (WAW: atomic and plain).
__global__ void global_atomic_plain_kernel(float* out) {
  atomicAdd(out, 1.0f);
  if (threadIdx.x == 5) out[0] = 0;
}

}  // namespace emu_selftest

// hone_emu_selftest runs self-test which (0 shuffles, 1 atomics, 2
// divergent, 3 exited lane; racecheck: 4 RAW, 5 WAR, 6 WAW, 7 atomics, 8
// plain read after atomics, 9 warp-synchronous, 10 across warps, 11
// block_max twice, 12 dynamic shared memory out of bounds; global memory,
// with the store hooks: 13 WAW, 14 atomics, 15 ordered by a barrier, 16
// WAW across blocks, 17 atomic and plain; 18 ballots over half a warp)
// into host (320 floats), returning 0 or -1 with the launch error in err.
// racecheck turns racecheck on; drop_line > 0 drops the __syncthreads at
// drop_file:drop_line (see CUstream_st).
extern "C" int hone_emu_selftest(int which, int racecheck, const char* drop_file, int drop_line, float* host,
                                 char* err, size_t errlen) {
  using namespace emu_selftest;
  // The kernels write device memory (global-memory racecheck watches
  // device allocations only): host's 320 floats are copied in and back.
  float* out = nullptr;
  if (cudaMalloc(reinterpret_cast<void**>(&out), 320 * sizeof(float)) != cudaSuccess) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  cudaMemcpy(out, host, 320 * sizeof(float), cudaMemcpyHostToDevice);
  struct Free {
    float* out;
    float* host;
    ~Free() {
      cudaMemcpy(host, out, 320 * sizeof(float), cudaMemcpyDeviceToHost);
      cudaFree(out);
    }
  } release{out, host};
  CUstream_st s;
  s.racecheck = racecheck != 0;
  snprintf(s.drop_file, sizeof s.drop_file, "%s", drop_file ? drop_file : "");
  s.drop_line = drop_line;
  cudaGetLastError();
  switch (which) {
    case 0: HONE_LAUNCH(shuffles_kernel, 1, 64, 0, &s, out); break;
    case 1: HONE_LAUNCH(atomics_kernel, 4, 128, 0, &s, out); break;
    case 2: HONE_LAUNCH(divergent_kernel, 1, 64, 0, &s, out); break;
    case 3: HONE_LAUNCH(exited_lane_kernel, 1, 32, 0, &s, out); break;
    case 4: HONE_LAUNCH(raw_kernel, 1, 64, 0, &s, out); break;
    case 5: HONE_LAUNCH(war_kernel, 1, 64, 0, &s, out); break;
    case 6: HONE_LAUNCH(waw_kernel, 1, 64, 0, &s, out); break;
    case 7: HONE_LAUNCH(atomics_ok_kernel, 1, 64, 0, &s, out); break;
    case 8: HONE_LAUNCH(atomic_read_kernel, 1, 64, 0, &s, out); break;
    case 9: HONE_LAUNCH(warp_sync_kernel, 1, 64, 0, &s, out); break;
    case 10: HONE_LAUNCH(cross_warp_kernel, 1, 64, 0, &s, out); break;
    case 11: HONE_LAUNCH(block_max_twice_kernel, 1, 64, 0, &s, out); break;
    case 12: HONE_LAUNCH(dynamic_oob_kernel, 1, 64, 64 * sizeof(float), &s, out); break;
    case 13: HONE_LAUNCH(global_waw_kernel, 1, 64, 0, &s, out); break;
    case 14: HONE_LAUNCH(global_atomics_ok_kernel, 2, 64, 0, &s, out); break;
    case 15: HONE_LAUNCH(global_ordered_kernel, 1, 64, 0, &s, out); break;
    case 16: HONE_LAUNCH(global_cross_block_kernel, 2, 64, 0, &s, out); break;
    case 17: HONE_LAUNCH(global_atomic_plain_kernel, 1, 64, 0, &s, out); break;
    case 18: HONE_LAUNCH(partial_ballot_kernel, 1, 64, 0, &s, out); break;
    case 19: HONE_LAUNCH(mma_kernel, 1, 32, 0, &s, out); break;
    case 20: HONE_LAUNCH(mma_divergent_kernel, 1, 32, 0, &s, out); break;
    // 64 KiB of dynamic shared memory: refused until the kernel's attribute
    // allows it (22 sets it first).
    case 21: HONE_LAUNCH(big_smem_kernel, 1, 32, 64 << 10, &s, out); break;
    case 22:
      if (cudaFuncSetAttribute(big_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 << 10) != cudaSuccess) {
        snprintf(err, errlen, "cudaFuncSetAttribute refused");
        return -1;
      }
      HONE_LAUNCH(big_smem_kernel, 1, 32, 64 << 10, &s, out);
      break;
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

// hone_emu_racecheck turns racecheck on or off for the context's launches.
extern "C" void hone_emu_racecheck(hone_ctx* c, int on) { c->stream->racecheck = on != 0; }

// hone_emu_drop_barrier makes the __syncthreads at file:line (file a base
// name) return at once in the context's launches, as if deleted; line 0
// restores every barrier. For the mutation tests only.
extern "C" void hone_emu_drop_barrier(hone_ctx* c, const char* file, int line) {
  snprintf(c->stream->drop_file, sizeof c->stream->drop_file, "%s", file);
  c->stream->drop_line = line;
}

// hone_emu_store_hooks reports whether this build has global-memory
// racecheck (store_hooks.h).
extern "C" int hone_emu_store_hooks(void) {
#ifdef HONE_EMU_STORE_HOOKS
  return 1;
#else
  return 0;
#endif
}

// hone_emu_lt_check runs cublasLtMatmul (through the heuristic, as hone
// does) on a valid 4x3x5 product with one thing broken, case which (0:
// nothing; see the table in emu_test.go), and returns the first status
// that is not CUBLAS_STATUS_SUCCESS, or 0: the shim's argument checks
// against cublasLt.h's documented errors.
extern "C" int hone_emu_lt_check(int which) {
  const long m = 4, n = 3, k = 5;
  static __nv_bfloat16 a[64], b[64];
  static float c[64];
  cublasLtHandle_t h = nullptr;
  cublasLtCreate(&h);
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  struct Release {
    cublasLtHandle_t* h;
    cublasLtMatmulDesc_t* op;
    cublasLtMatrixLayout_t *la, *lb, *lc, *ld;
    cublasLtMatmulPreference_t* pref;
    ~Release() {
      cublasLtMatmulPreferenceDestroy(*pref);
      for (auto* l : {la, lb, lc, ld}) cublasLtMatrixLayoutDestroy(*l);
      cublasLtMatmulDescDestroy(*op);
      cublasLtDestroy(*h);
    }
  } release{&h, &op, &la, &lb, &lc, &ld, &pref};
  cublasStatus_t s = cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  const int32_t opT = CUBLAS_OP_T, bad_op = 7;
  const int32_t batch2 = 2;
  const int64_t ld_short = m - 1;
  const uint32_t align4 = 4;
  const uint64_t ws = 32u << 20;
  auto next = [&](cublasStatus_t r) {
    if (s == CUBLAS_STATUS_SUCCESS) s = r;
  };
  next(cublasLtMatrixLayoutCreate(&la, which == 6 ? CUDA_R_32F : CUDA_R_16BF, m, k, which == 1 ? m - 1 : m));
  next(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, n, k));
  next(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, m));
  next(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, which == 11 ? m + 1 : m));
  switch (which) {
    case 2: next(cublasLtMatrixLayoutSetAttribute(ld, CUBLASLT_MATRIX_LAYOUT_LD, &ld_short, sizeof ld_short)); break;
    case 3: next(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &bad_op, sizeof bad_op)); break;
    case 4: next(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof opT)); break;
    case 5: next(cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch2, sizeof batch2)); break;
    case 7: next(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &ws, sizeof ws)); break;
    case 10: next(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSC, &opT, sizeof opT)); break;
  }
  next(cublasLtMatmulPreferenceCreate(&pref));
  next(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  if (which == 13) next(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align4, sizeof align4));
  cublasLtMatmulHeuristicResult_t r = {};
  int found = 0;
  next(cublasLtMatmulAlgoGetHeuristic(which == 12 ? nullptr : h, op, la, lb, lc, ld, pref, 1, &r, &found));
  if (s == CUBLAS_STATUS_SUCCESS && found != 1) return -1;
  static unsigned char work[2 << 20];
  const float alpha = 1, beta = 0;
  // Cases 9 and 13: D one float past an aligned address (the heuristic was
  // told 256 bytes, 13 then told it 4: accepted).
  float* dst = which == 9 || which == 13 ? c + 1 : c;
  const void* cin = which == 11 ? static_cast<const void*>(dst) : c;
  next(cublasLtMatmul(h, op, &alpha, a, la, b, lb, &beta, cin, lc, dst, ld, &r.algo, work,
                      which == 8 ? r.workspaceSize - 1 : sizeof work, nullptr));
  return int(s);
}

// hone_emu_lt_heuristics is how many heuristic queries the context's
// cuBLASLt handle has answered.
extern "C" long hone_emu_lt_heuristics(hone_ctx* c) { return c->lt->heuristics; }
