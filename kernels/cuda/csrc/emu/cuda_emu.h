// cuda_emu.h: the CUDA semantics hone's kernels rely on, for the host, so
// the same .cu sources compile with g++ and run without a GPU.
//
// What is emulated, and how:
//   - a launch runs its blocks one after another, last to first, on the
//     calling OS thread;
//   - each thread of a block is a fiber with its own stack (a hand-written
//     context switch on x86-64, ucontext elsewhere and under the sanitizers,
//     which know ucontext); threadIdx is switched with it;
//   - __syncthreads is a barrier: a fiber stops there until every live
//     thread of the block has arrived (threads that returned count as
//     arrived, as on Volta and later);
//   - warp shuffles, ballots and __syncwarp stop a fiber until every live
//     lane of its warp (32 consecutive linear thread ids) has arrived, then
//     every lane reads the value its source lane deposited;
//   - __shared__ variables are static thread_local: one copy per launching
//     OS thread, shared by the fibers of the running block; dynamic shared
//     memory (HONE_DYNAMIC_SHARED) is a per-launch buffer filled with NaN
//     bytes before every block so that reading what was not written shows;
//   - atomics are host atomics.
//
// The schedules are adversarial on purpose (run_block): by default each
// fiber runs until it blocks, in thread order, so a reduction that reads
// shared memory without a __syncthreads after the writes reads what the
// later threads have not written yet, every time; with eager warps a warp
// runs ahead to the next __syncthreads, so a missing barrier before shared
// memory is reused lets it overwrite what slower warps have not read.
// A barrier some threads never reach (divergent __syncthreads), a shuffle
// whose mask names a lane that exited or does not exist, or a block shape
// the device would refuse are launch errors, reported through
// cudaGetLastError as on the device.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>
#include <ucontext.h>

// ---- language keywords ------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define __shared__ static thread_local

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
  unsigned x, y, z;
};

// The built-in index variables of the running fiber.
inline thread_local uint3 threadIdx;
inline thread_local uint3 blockIdx;
inline thread_local dim3 blockDim;
inline thread_local dim3 gridDim;
constexpr int warpSize = 32;

// ---- math intrinsics the kernels use -------------------------------------
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }

// ---- runtime API types ----------------------------------------------------
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorLaunchFailure = 719,
};
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
// A stream of the shim carries the schedule its launches run under (see
// run_block): false, passes over the block in thread order; true, each warp
// runs ahead as far as it can before the next warp moves.
struct CUstream_st {
  bool eager_warps = false;
};
typedef CUstream_st* cudaStream_t;

// ---- contexts: a suspended execution and the switch between two ----------
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define HONE_EMU_FAST_SWITCH 1
// hone_emu_switch saves the callee-saved registers, MXCSR and the x87
// control word on the current stack, stores the stack pointer in *save and
// resumes the context whose stack pointer is to (System V x86-64: the
// caller-saved registers are the caller's business). No system call, unlike
// swapcontext, which also saves the signal mask.
extern "C" void hone_emu_switch(void** save, void* to);
asm(R"(
  .text
  .p2align 4
  .globl hone_emu_switch
  .type hone_emu_switch, @function
hone_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size hone_emu_switch, .-hone_emu_switch
)");
#endif

namespace emu {

struct Context {
#ifdef HONE_EMU_FAST_SWITCH
  void* sp = nullptr;
#else
  ucontext_t uc;
#endif
};

inline void switch_to(Context* from, Context* to) {
#ifdef HONE_EMU_FAST_SWITCH
  hone_emu_switch(&from->sp, to->sp);
#else
  swapcontext(&from->uc, &to->uc);
#endif
}

// start prepares c to run entry() on stack when first switched to; entry
// must never return (it switches away for good).
inline void start(Context* c, char* stack, size_t size, void (*entry)()) {
#ifdef HONE_EMU_FAST_SWITCH
  // The frame hone_emu_switch pops: MXCSR and control word, six registers,
  // then entry as the return address, placed so that entry starts with the
  // stack aligned as after a call (rsp = 8 mod 16).
  uint64_t* sp = reinterpret_cast<uint64_t*>((reinterpret_cast<uintptr_t>(stack) + size) & ~uintptr_t(15));
  *--sp = 0;
  *--sp = reinterpret_cast<uint64_t>(entry);
  for (int r = 0; r < 6; r++) *--sp = 0;
  uint32_t mxcsr;
  uint16_t fcw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fcw));
  *--sp = uint64_t(mxcsr) | uint64_t(fcw) << 32;
  c->sp = sp;
#else
  getcontext(&c->uc);
  c->uc.uc_stack.ss_sp = stack;
  c->uc.uc_stack.ss_size = size;
  c->uc.uc_link = nullptr;
  makecontext(&c->uc, entry, 0);
#endif
}

}  // namespace emu

namespace emu {

// What a fiber is waiting for.
enum class Wait { none, block, warp, done };
// What a fiber does at a warp rendezvous.
enum class WarpOp { shfl, ballot, sync };

struct Fiber {
  Context ctx;
  char* stack = nullptr;
  uint3 tid{};
  unsigned lane = 0, warp = 0;
  Wait wait = Wait::none;
  WarpOp op = WarpOp::sync;
  unsigned mask = 0;
  int src = 0;           // shuffle: the lane read from
  uint64_t slot = 0;     // the value this lane deposits
  uint64_t result = 0;   // what it reads back
};

constexpr size_t kStack = 64 << 10;

struct Runner {
  std::vector<Fiber> fibers;
  std::vector<char*> stacks;  // kept across launches
  Context sched;
  int cur = -1;
  const std::function<void()>* body = nullptr;
  std::vector<unsigned char> dyn;  // dynamic shared memory
  std::string error;               // first error of the current launch
  cudaError_t last = cudaSuccess;  // what cudaGetLastError returns
};

inline thread_local Runner runner;

inline void fail(const std::string& msg) {
  if (runner.error.empty()) runner.error = msg;
}

inline Fiber& self() { return runner.fibers[runner.cur]; }

// park stops the running fiber until the scheduler releases it.
inline void park(Wait w) {
  Fiber& f = self();
  f.wait = w;
  switch_to(&f.ctx, &runner.sched);
}

// fiber_main is every fiber's entry: run the kernel body as thread
// runner.cur, then hand control back to the scheduler for good.
inline void fiber_main() {
  (*runner.body)();
  Fiber& f = self();
  f.wait = Wait::done;
  switch_to(&f.ctx, &runner.sched);
  __builtin_unreachable();
}

// release_warp resolves a warp rendezvous once every live lane is there:
// each lane's result is its source lane's deposit (shuffles) or the ballot.
inline bool release_warp(unsigned w, size_t n) {
  size_t lo = size_t(w) * 32, hi = lo + 32 < n ? lo + 32 : n;
  bool any = false;
  for (size_t i = lo; i < hi; i++) {
    Wait s = runner.fibers[i].wait;
    if (s == Wait::done) continue;
    if (s != Wait::warp) return false;
    any = true;
  }
  if (!any) return false;
  for (size_t i = lo; i < hi; i++) {
    Fiber& f = runner.fibers[i];
    if (f.wait != Wait::warp) continue;
    for (unsigned l = 0; l < 32; l++) {
      if (!(f.mask >> l & 1)) continue;
      size_t j = lo + l;
      if (j >= hi || runner.fibers[j].wait != Wait::warp) {
        fail("warp operation: mask names lane " + std::to_string(l) + " of warp " + std::to_string(w) +
             ", which does not exist or has exited");
      }
    }
    switch (f.op) {
      case WarpOp::shfl: {
        size_t j = lo + size_t(f.src);
        f.result = (f.src >= 0 && j < hi && runner.fibers[j].wait == Wait::warp) ? runner.fibers[j].slot : f.slot;
        break;
      }
      case WarpOp::ballot: {
        uint64_t b = 0;
        for (size_t j = lo; j < hi; j++) {
          const Fiber& g = runner.fibers[j];
          if (g.wait == Wait::warp && (f.mask >> (j - lo) & 1) && g.slot) b |= uint64_t(1) << (j - lo);
        }
        f.result = b;
        break;
      }
      case WarpOp::sync:
        break;
    }
  }
  for (size_t i = lo; i < hi; i++) {
    if (runner.fibers[i].wait == Wait::warp) runner.fibers[i].wait = Wait::none;
  }
  return true;
}

// run_block runs every thread of one block to completion. Two schedules,
// both adversarial, for different mistakes:
//   - passes (default): each pass runs every ready thread, in thread order,
//     until it blocks; barriers and warp rendezvous are released between
//     passes. A missing barrier between a write to shared memory and a read
//     of what another thread wrote reads the old value.
//   - eager warps: a warp whose rendezvous completes goes on at once, so a
//     warp runs ahead of the others up to the next __syncthreads. A missing
//     barrier after reading shared memory that the next step overwrites
//     (reuse of a reduction's scratch) lets the fast warp overwrite it
//     before the slow ones read it.
inline void run_block(bool eager_warps) {
  const size_t n = size_t(blockDim.x) * blockDim.y * blockDim.z;
  runner.fibers.assign(n, Fiber{});
  while (runner.stacks.size() < n) runner.stacks.push_back(static_cast<char*>(std::malloc(kStack)));
  for (size_t i = 0; i < n; i++) {
    Fiber& f = runner.fibers[i];
    f.tid = uint3{unsigned(i % blockDim.x), unsigned(i / blockDim.x % blockDim.y),
                  unsigned(i / (size_t(blockDim.x) * blockDim.y))};
    f.lane = unsigned(i % 32);
    f.warp = unsigned(i / 32);
    f.stack = runner.stacks[i];
    start(&f.ctx, f.stack, kStack, fiber_main);
  }
  size_t live = n;
  for (;;) {
    for (size_t i = 0; i < n; i++) {
      Fiber& f = runner.fibers[i];
      if (f.wait != Wait::none) continue;
      runner.cur = int(i);
      threadIdx = f.tid;
      switch_to(&runner.sched, &f.ctx);
      if (f.wait == Wait::done) live--;
      if (eager_warps && (f.wait == Wait::warp || f.wait == Wait::done) && release_warp(f.warp, n)) {
        i = size_t(f.warp) * 32 - 1;  // run this warp again from its first lane
      }
    }
    runner.cur = -1;
    if (live == 0) return;
    bool released = false;
    size_t at_barrier = 0;
    for (const Fiber& f : runner.fibers) at_barrier += f.wait == Wait::block;
    if (at_barrier == live) {
      for (Fiber& f : runner.fibers) {
        if (f.wait == Wait::block) f.wait = Wait::none;
      }
      released = true;
    } else {
      for (unsigned w = 0; w * 32 < n; w++) released |= release_warp(w, n);
    }
    if (!released) {
      fail("deadlock in block (" + std::to_string(blockIdx.x) + "," + std::to_string(blockIdx.y) + "," +
           std::to_string(blockIdx.z) + "): threads wait at different barriers (divergent __syncthreads or warp operation)");
      return;  // the stuck fibers are abandoned; their stacks are reused
    }
  }
}

// launch runs body for every thread of every block of the grid.
inline cudaError_t launch(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, std::function<void()> body) {
  const size_t threads = size_t(block.x) * block.y * block.z;
  if (threads == 0 || threads > 1024 || block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
      grid.y > 65535 || grid.z > 65535 || smem > 227 * 1024) {
    runner.last = cudaErrorInvalidConfiguration;
    return runner.last;
  }
  runner.error.clear();
  runner.body = &body;
  gridDim = grid;
  blockDim = block;
  runner.dyn.resize(smem + 16);
  // Blocks run last to first: the device promises no order, and a kernel
  // that counts on block 0 running before the others fails here.
  for (unsigned z = grid.z; z-- > 0 && runner.error.empty();) {
    for (unsigned y = grid.y; y-- > 0 && runner.error.empty();) {
      for (unsigned x = grid.x; x-- > 0 && runner.error.empty();) {
        blockIdx = uint3{x, y, z};
        std::memset(runner.dyn.data(), 0xff, runner.dyn.size());
        run_block(stream && stream->eager_warps);
      }
    }
  }
  runner.body = nullptr;
  if (!runner.error.empty()) runner.last = cudaErrorLaunchFailure;
  return runner.last;
}

inline void* dynamic_shared() {
  // 16-byte alignment, as extern __shared__ arrays have.
  uintptr_t p = reinterpret_cast<uintptr_t>(runner.dyn.data());
  return reinterpret_cast<void*>((p + 15) & ~uintptr_t(15));
}

template <class T>
inline T warp_exchange(WarpOp op, unsigned mask, T v, int src) {
  static_assert(sizeof(T) <= 8, "warp operations move at most 8 bytes");
  if (runner.cur < 0) {
    fail("warp operation outside a kernel");
    return v;
  }
  Fiber& f = self();
  f.op = op;
  f.mask = mask;
  f.src = src;
  f.slot = 0;
  std::memcpy(&f.slot, &v, sizeof(T));
  park(Wait::warp);
  T r;
  std::memcpy(&r, &self().result, sizeof(T));
  return r;
}

}  // namespace emu

// ---- kernel-side primitives ------------------------------------------------
inline void __syncthreads() {
  if (emu::runner.cur < 0) {
    emu::fail("__syncthreads outside a kernel");
    return;
  }
  emu::park(emu::Wait::block);
}

inline void __syncwarp(unsigned mask = 0xffffffffu) { emu::warp_exchange(emu::WarpOp::sync, mask, 0, 0); }

template <class T>
inline T __shfl_sync(unsigned mask, T v, int src, int width = warpSize) {
  int lane = int(emu::self().lane);
  return emu::warp_exchange(emu::WarpOp::shfl, mask, v, (lane & ~(width - 1)) + (src & (width - 1)));
}

template <class T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = warpSize) {
  int lane = int(emu::self().lane);
  int src = lane ^ lane_mask;
  if ((src & ~(width - 1)) != (lane & ~(width - 1))) src = lane;
  return emu::warp_exchange(emu::WarpOp::shfl, mask, v, src);
}

template <class T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
  int lane = int(emu::self().lane);
  int src = (lane & (width - 1)) + int(delta) < width ? lane + int(delta) : lane;
  return emu::warp_exchange(emu::WarpOp::shfl, mask, v, src);
}

template <class T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = warpSize) {
  int lane = int(emu::self().lane);
  int src = (lane & (width - 1)) >= int(delta) ? lane - int(delta) : lane;
  return emu::warp_exchange(emu::WarpOp::shfl, mask, v, src);
}

inline unsigned __ballot_sync(unsigned mask, int pred) {
  return unsigned(emu::warp_exchange<uint64_t>(emu::WarpOp::ballot, mask, pred ? 1 : 0, 0));
}
inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
inline int __all_sync(unsigned mask, int pred) { return __ballot_sync(mask, !pred) == 0; }

// Atomics: read-modify-write with the old value returned, as on the device.
template <class T>
inline T atomic_add_fp(T* p, T v) {
  T old, want;
  __atomic_load(p, &old, __ATOMIC_RELAXED);
  do {
    want = old + v;
  } while (!__atomic_compare_exchange(p, &old, &want, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return old;
}
inline float atomicAdd(float* p, float v) { return atomic_add_fp(p, v); }
inline double atomicAdd(double* p, double v) { return atomic_add_fp(p, v); }
inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
inline int atomicMax(int* p, int v) {
  int old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
}

// ---- launches ----------------------------------------------------------------
// HONE_LAUNCH(kernel, grid, block, shared bytes, stream, args...) is
// kernel<<<grid, block, shared bytes, stream>>>(args...) on the device.
#define HONE_LAUNCH(kernel, grid, block, smem, stream, ...) \
  ::emu::launch(dim3(grid), dim3(block), (smem), (stream), [=]() { kernel(__VA_ARGS__); })

// HONE_DYNAMIC_SHARED(type, name) declares the block's dynamic shared memory
// (the launch's shared bytes) as type name[].
#define HONE_DYNAMIC_SHARED(type, name) type* name = static_cast<type*>(::emu::dynamic_shared())

// ---- runtime API on host memory -------------------------------------------
inline cudaError_t cudaGetLastError() {
  cudaError_t e = emu::runner.last;
  emu::runner.last = cudaSuccess;
  return e;
}
inline cudaError_t cudaPeekAtLastError() { return emu::runner.last; }
inline const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorLaunchFailure: return emu::runner.error.empty() ? "unspecified launch failure" : emu::runner.error.c_str();
  }
  return "unknown error";
}
inline cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorInvalidValue; }
inline cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}
// cudaMalloc allocates exactly bytes (256-byte aligned, as the device
// aligns), so under AddressSanitizer a kernel that reads or writes past the
// end of its buffer is caught at the first byte.
inline cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = nullptr;
  if (posix_memalign(p, 256, bytes ? bytes : 1) != 0) return cudaErrorMemoryAllocation;
  return cudaSuccess;
}
inline cudaError_t cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind, cudaStream_t = nullptr) {
  if (bytes) std::memmove(dst, src, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind k) {
  return cudaMemcpyAsync(dst, src, bytes, k);
}
inline cudaError_t cudaMemsetAsync(void* p, int v, size_t bytes, cudaStream_t = nullptr) {
  std::memset(p, v, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaStreamCreate(cudaStream_t* s) {
  *s = new CUstream_st;
  return cudaSuccess;
}
inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
  delete s;
  return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return emu::runner.last; }
inline cudaError_t cudaDeviceSynchronize() { return emu::runner.last; }

// ---- bfloat16 (cuda_bf16.h) -------------------------------------------------
// Storage is the upper half of a float32; conversion from float rounds to
// nearest, ties to even, and keeps NaN a (quiet) NaN, as __float2bfloat16_rn.
struct __nv_bfloat16 {
  uint16_t x;
};
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return __nv_bfloat16{uint16_t((u >> 16) | 0x0040u)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return __nv_bfloat16{uint16_t(u >> 16)};
}
inline float __bfloat162float(__nv_bfloat16 h) {
  uint32_t u = uint32_t(h.x) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
