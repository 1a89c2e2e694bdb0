// cuda_emu.h: the CUDA semantics hone's kernels rely on, for the host, so
// the same .cu sources compile with g++ and run without a GPU.
//
// What is emulated, and how:
//   - a launch runs its blocks one after another, last to first, on the
//     calling OS thread;
//   - each thread of a block is a fiber with its own stack (a hand-written
//     context switch on x86-64, told to AddressSanitizer through its fiber
//     interface; ucontext elsewhere and under ThreadSanitizer); threadIdx is
//     switched with it;
//   - __syncthreads is a barrier: a fiber stops there until every live
//     thread of the block has arrived (threads that returned count as
//     arrived, as on Volta and later);
//   - warp shuffles, ballots and __syncwarp stop a fiber until every live
//     lane of its warp (32 consecutive linear thread ids) has arrived, then
//     every lane reads the value its source lane deposited;
//   - shared memory (HONE_SHARED) is static thread_local: one copy per
//     launching OS thread, shared by the fibers of the running block;
//     dynamic shared memory (HONE_DYNAMIC_SHARED) is a per-launch buffer
//     filled with NaN bytes before every block so that reading what was not
//     written shows;
//   - atomics are host atomics.
//
// Racecheck (a stream's racecheck flag, set from Go with SetRacecheck), in
// the spirit of compute-sanitizer --tool racecheck: shared memory declared
// with HONE_SHARED / HONE_DYNAMIC_SHARED is reached through shared_array /
// sptr / sref below, which record every access of a 4-byte word (the
// thread, the block's barrier phase, the thread's warp epoch). Two accesses
// of one word by different threads in the same phase (no __syncthreads
// between them), at least one a write, not both atomics and not ordered by
// a __syncwarp or shuffle of their own warp, are a hazard (RAW, WAR, WAW)
// and fail the launch with the kernel, block, threads and word. Without the
// flag an access costs one test of a thread_local flag. Global memory:
// write-write conflicts only, in a build with every store instrumented
// (store_hooks.h, global_write).
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

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
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
// Shared memory is declared with HONE_SHARED / HONE_DYNAMIC_SHARED (below),
// which racecheck instruments; a bare __shared__ would escape it.
#define __shared__ static_assert(false, "declare shared memory with HONE_SHARED(type, name, n) (csrc/common.cuh)");

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
inline unsigned __float_as_uint(float x) {
  unsigned u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

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
// It also carries the racecheck switch and, for tests only, a barrier
// to drop (a __syncthreads call site that returns at once, as if the line
// were deleted: the mutation tests remove barriers without recompiling).
struct CUstream_st {
  bool eager_warps = false;
  bool racecheck = false;
  char drop_file[64] = {0};  // base name of the file, e.g. "common.cuh"
  int drop_line = 0;         // 0: none
};
typedef CUstream_st* cudaStream_t;

// ---- contexts: a suspended execution and the switch between two ----------
// Under AddressSanitizer (go test -asan) the hand-written switch tells the
// runtime each stack switch (__sanitizer_start_switch_fiber /
// __sanitizer_finish_switch_fiber, HONE_EMU_ASAN_FIBERS): swapcontext cost
// a system call (the signal mask) and, in ASan's interceptor, clearing the
// shadow of the whole target stack at every switch. The store hooks
// (HONE_EMU_STORE_HOOKS, see store_hooks.h) compile with GCC's
// kernel-address instrumentation, which defines __SANITIZE_ADDRESS__ but
// has no ASan runtime that would need to know about stack switches.
#if defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define HONE_EMU_FAST_SWITCH 1
#if defined(__SANITIZE_ADDRESS__) && !defined(HONE_EMU_STORE_HOOKS)
#define HONE_EMU_ASAN_FIBERS 1
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
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
#ifdef HONE_EMU_ASAN_FIBERS
  // For AddressSanitizer: the context's stack (a fiber's from start; the
  // scheduler's, the OS thread's, as the first fiber learns it in
  // fiber_started) and its fake stack while it is switched out.
  const void* bottom = nullptr;
  size_t size = 0;
  void* fake = nullptr;
#endif
};

// switch_to suspends the running context into from and resumes to; exiting
// says from never runs again (a fiber that has finished).
inline void switch_to(Context* from, Context* to, bool exiting = false) {
#ifdef HONE_EMU_ASAN_FIBERS
  __sanitizer_start_switch_fiber(exiting ? nullptr : &from->fake, to->bottom, to->size);
#else
  (void)exiting;
#endif
#ifdef HONE_EMU_FAST_SWITCH
  hone_emu_switch(&from->sp, to->sp);
#else
  swapcontext(&from->uc, &to->uc);
#endif
#ifdef HONE_EMU_ASAN_FIBERS
  __sanitizer_finish_switch_fiber(from->fake, nullptr, nullptr);
#endif
}

// fiber_started is the first thing a fiber's entry does: under
// AddressSanitizer, completing the switch that started it and learning the
// stack it came from (the scheduler's).
inline void fiber_started([[maybe_unused]] Context* sched) {
#ifdef HONE_EMU_ASAN_FIBERS
  __sanitizer_finish_switch_fiber(nullptr, &sched->bottom, &sched->size);
#endif
}

// start prepares c to run entry() on stack when first switched to; entry
// must never return (it switches away for good).
inline void start(Context* c, char* stack, size_t size, void (*entry)()) {
#ifdef HONE_EMU_ASAN_FIBERS
  // The stack is reused from fiber to fiber, and a fiber that finished (or
  // was abandoned) left its frames' redzones poisoned.
  ASAN_UNPOISON_MEMORY_REGION(stack, size);
#endif
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
#ifdef HONE_EMU_ASAN_FIBERS
  c->bottom = stack;
  c->size = size;
  c->fake = nullptr;
#endif
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
enum class WarpOp { shfl, ballot, sync, mma, ldmatrix };

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
  // cp.async: the copies this thread started, in committed groups (oldest
  // first) and the open one; a group is done by the wait that retires it.
  struct AsyncCopy {
    unsigned char* dst;
    const struct Region* region;
    unsigned char data[16];
  };
  std::vector<std::vector<AsyncCopy>> async_groups;
  std::vector<AsyncCopy> async_open;
};

constexpr size_t kStack = 64 << 10;

struct Shadow;

// Region is one shared-memory array as racecheck sees it: where it is, its
// name for reports, and one Shadow per 4-byte word.
struct Region {
  const char* name;
  unsigned char* base;
  size_t bytes;
  Shadow* shadow;
};

// Shadow is racecheck's record of one shared-memory word within the
// current barrier phase of a block: the last writer and up to two readers
// (linear thread ids, -1 none) with the warp epoch each access happened in.
// A record from an earlier phase (a barrier or another block since) is
// stale and treated as empty: everything before a barrier is ordered.
// writer2 is the last writer before writer that was another thread, so a
// thread that writes after its own atomic is still checked against the
// other threads' atomics.
struct Shadow {
  uint64_t phase = 0;
  int32_t writer = -1;
  uint32_t wepoch = 0;
  bool watomic = false;
  int32_t writer2 = -1;
  uint32_t wepoch2 = 0;
  bool watomic2 = false;
  int32_t reader[2] = {-1, -1};
  uint32_t repoch[2] = {0, 0};
};

// GWrite is global-memory racecheck's record of the last plain or atomic
// write of one 2-byte halfword of device memory in the current launch.
struct GWrite {
  uint64_t phase;  // the writer's block phase (unique per block and barrier interval)
  uint3 block, thread;
  int32_t linear;  // the writer's linear thread id in its block
  uint32_t wepoch;
  bool atomic;
  bool valid;
};

// GWrites is a halfword's last write and the last one before it by another
// thread (as Shadow's writer2).
struct GWrites {
  GWrite last, other;
};

struct Runner {
  std::vector<Fiber> fibers;
  std::vector<char*> stacks;  // kept across launches
  Context sched;
  int cur = -1;
  const std::function<void()>* body = nullptr;
  std::vector<unsigned char> dyn;  // dynamic shared memory
  std::string error;               // first error of the current launch
  cudaError_t last = cudaSuccess;  // what cudaGetLastError returns
  const char* kernel = "";         // the running kernel's name, for reports
  // Racecheck state. phase counts blocks and barrier releases (never reset,
  // so records of earlier launches and blocks are stale); warp_epoch counts
  // each warp's completed rendezvous (__syncwarp, shuffles, votes) within
  // the block.
  uint64_t phase = 1;
  std::vector<uint32_t> warp_epoch;
  std::vector<Shadow> dyn_shadow;
  Region dyn_region{"dynamic shared memory", nullptr, 0, nullptr};
  // Global-memory racecheck (only with HONE_EMU_STORE_HOOKS): the device
  // allocations as [base, end) sorted, taken at launch; the launch's writes
  // by halfword address.
  std::vector<std::pair<uintptr_t, uintptr_t>> dev;
  std::unordered_map<uintptr_t, GWrites> gwrites;
};

// Racecheck's switches, constant-initialised thread_locals (read without
// the TLS wrapper call Runner needs): racecheck_on, read on every
// shared-memory access, is the running launch's stream flag; in_hook is
// set while global-memory racecheck's own bookkeeping runs.
inline constinit thread_local bool racecheck_on = false;
inline constinit thread_local bool in_hook = false;

// The scheduler's state read on every warp operation and barrier, also
// constant-initialised thread_locals (runner's members each cost a call of
// its TLS wrapper): the running fiber (runner.fibers[runner.cur]; null
// outside a kernel thread, when runner.cur is -1), the scheduler's context,
// and the barrier dropped by a test (CUstream_st::drop_file, drop_line).
inline constinit thread_local Fiber* running = nullptr;
inline constinit thread_local Context* sched_ctx = nullptr;
inline constinit thread_local const char* drop_file = "";
inline constinit thread_local int drop_line = 0;

// HONE_EMU_UNHOOKED marks the shim's code that must not call the store
// hooks: the hooks themselves and the atomics, which record themselves;
// also shared-memory racecheck's bookkeeping (record, check_word, ordered),
// which runs on every shared-memory access and stores only to its shadow
// words, host memory the hooks would look up and ignore.
// The compiler treats its instrumentation calls as leaf functions that
// read no program state, so a flag set around instrumented code could be
// reordered past them; uninstrumented code needs no flag. (Only in the
// store-hook build: under AddressSanitizer the atomics stay checked.)
#ifdef HONE_EMU_STORE_HOOKS
#define HONE_EMU_UNHOOKED __attribute__((no_sanitize_address))
#else
#define HONE_EMU_UNHOOKED
#endif

// The device allocations of the process (cudaMalloc), for global-memory
// racecheck: base -> bytes.
inline std::mutex dev_mu;
inline std::map<uintptr_t, size_t> dev_allocs;

inline thread_local Runner runner;

inline void fail(const std::string& msg) {
  if (runner.error.empty()) runner.error = msg;
}

inline Fiber& self() { return *running; }

// park stops the running fiber until the scheduler releases it.
inline void park(Wait w) {
  Fiber& f = self();
  f.wait = w;
  switch_to(&f.ctx, sched_ctx);
}

// fiber_main is every fiber's entry: run the kernel body as thread
// runner.cur, then hand control back to the scheduler for good.
inline void fiber_main() {
  fiber_started(sched_ctx);
  (*runner.body)();
  Fiber& f = self();
  f.wait = Wait::done;
  switch_to(&f.ctx, sched_ctx, true);
  __builtin_unreachable();
}

// MmaOperands is one lane's part of an mma.sync.aligned.m16n8k16.row.col
// .f32.bf16.bf16.f32 (D = A B + C, A 16x16, B 16x8, C and D 16x8): its
// registers as the PTX ISA lays them out over the warp (a lane's slot holds
// a pointer to its MmaOperands).
struct MmaOperands {
  float* d;
  const uint32_t* a;  // 4 registers, 2 bf16 each (the lower column in the low half)
  const uint32_t* b;  // 2 registers, 2 bf16 each (the lower row in the low half)
  const float* c;     // 4
};

inline float bf16_bits_to_float(uint32_t h) {
  const uint32_t u = (h & 0xffffu) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// mma_bf16_m16n8k16 runs one warp's mma.sync once all 32 lanes are parked
// at it (their registers are on their stacks, which stay put meanwhile).
// The fragment layout is the PTX ISA's ("Matrix Fragments for mma.m16n8k16
// with floating point type"), with groupID = lane >> 2, tig = lane % 4:
//   A: a[0] = (row g, cols 2tig, 2tig+1), a[1] = (row g+8, same cols),
//      a[2] = (row g, cols 2tig+8, +9), a[3] = (row g+8, cols 2tig+8, +9);
//   B: b[0] = (rows 2tig, 2tig+1, col g), b[1] = (rows 2tig+8, +9, col g);
//   C, D: c[0], c[1] = (row g, cols 2tig, 2tig+1), c[2], c[3] = (row g+8, same cols).
// The products of two bf16 values are exact in float32; they are summed in
// float32 in k order onto C (the hardware's order and intermediate rounding
// of the sum are not documented: the difference is within float32's
// accumulation error, which the tolerances allow).
inline void mma_bf16_m16n8k16(Fiber* lanes) {
  float A[16][16], B[16][8], C[16][8];
  for (int l = 0; l < 32; l++) {
    const MmaOperands* o = reinterpret_cast<const MmaOperands*>(uintptr_t(lanes[l].slot));
    const int g = l >> 2, t = l & 3;
    for (int r = 0; r < 4; r++) {
      const int row = g + (r & 1) * 8, col = 2 * t + (r >> 1) * 8;
      A[row][col] = bf16_bits_to_float(o->a[r]);
      A[row][col + 1] = bf16_bits_to_float(o->a[r] >> 16);
    }
    for (int r = 0; r < 2; r++) {
      B[2 * t + r * 8][g] = bf16_bits_to_float(o->b[r]);
      B[2 * t + r * 8 + 1][g] = bf16_bits_to_float(o->b[r] >> 16);
    }
    for (int e = 0; e < 4; e++) C[g + (e >> 1) * 8][2 * t + (e & 1)] = o->c[e];
  }
  for (int m = 0; m < 16; m++) {
    for (int n = 0; n < 8; n++) {
      float s = C[m][n];
      for (int k = 0; k < 16; k++) s += A[m][k] * B[k][n];
      C[m][n] = s;
    }
  }
  for (int l = 0; l < 32; l++) {
    const MmaOperands* o = reinterpret_cast<const MmaOperands*>(uintptr_t(lanes[l].slot));
    const int g = l >> 2, t = l & 3;
    for (int e = 0; e < 4; e++) o->d[e] = C[g + (e >> 1) * 8][2 * t + (e & 1)];
  }
}

// LdmatrixOperands is one lane's part of an ldmatrix.sync.aligned.m8n8
// .x{1,2,4}[.trans].shared.b16: the 16-byte row it addresses (lanes
// 8i..8i+7 address rows 0..7 of matrix i; the others' are unused) and its
// destination registers, one per matrix.
struct LdmatrixOperands {
  const unsigned char* row;
  uint32_t* d;
  int num;
  bool trans;
};

// ldmatrix_m8n8 runs one warp's ldmatrix once all 32 lanes are parked at
// it: lane l (g = l / 4, t = l % 4) receives of matrix i the elements
// (row g, cols 2t and 2t+1), or with .trans (rows 2t and 2t+1, col g), the
// first in the low half, as the PTX ISA lays them out. The lanes' reads of
// shared memory were recorded by each lane before it parked.
inline bool ldmatrix_m8n8(Fiber* lanes) {
  const auto* o0 = reinterpret_cast<const LdmatrixOperands*>(uintptr_t(lanes[0].slot));
  uint16_t m[4][8][8];
  for (int l = 0; l < 32; l++) {
    const auto* o = reinterpret_cast<const LdmatrixOperands*>(uintptr_t(lanes[l].slot));
    if (o->num != o0->num || o->trans != o0->trans) return false;
    if (l < 8 * o->num) std::memcpy(m[l / 8][l % 8], o->row, 16);
  }
  for (int l = 0; l < 32; l++) {
    const auto* o = reinterpret_cast<const LdmatrixOperands*>(uintptr_t(lanes[l].slot));
    const int g = l >> 2, t = l & 3;
    for (int i = 0; i < o->num; i++) {
      const uint32_t lo = o->trans ? m[i][2 * t][g] : m[i][g][2 * t];
      const uint32_t hi = o->trans ? m[i][2 * t + 1][g] : m[i][g][2 * t + 1];
      o->d[i] = lo | (hi << 16);
    }
  }
  return true;
}

// release_warp resolves a warp rendezvous once every live lane is there:
// each lane's result is its source lane's deposit (shuffles) or the ballot.
// (runner is a thread_local with a constructor: each access of it by name
// calls its TLS wrapper, so the scheduler's loops, which run once per warp
// operation of every lane, take it once; the lanes' states are bit masks.)
inline bool release_warp(unsigned w, size_t n) {
  Runner& r = runner;
  Fiber* const fs = r.fibers.data();
  const size_t lo = size_t(w) * 32, hi = lo + 32 < n ? lo + 32 : n;
  // live: the lanes waiting at the rendezvous; slots: those of them whose
  // deposit is non-zero (a ballot's predicate). From the last lane down: under
  // eager warps this runs each time a lane parks, and the lanes above it have
  // not run yet.
  unsigned live = 0;
  uint64_t slots = 0;
  for (size_t i = hi; i-- > lo;) {
    const Wait s = fs[i].wait;
    if (s == Wait::done) continue;
    if (s != Wait::warp) return false;
    live |= 1u << (i - lo);
    if (fs[i].slot) slots |= uint64_t(1) << (i - lo);
  }
  if (!live) return false;
  // The rendezvous orders the accesses of the lanes before it against those
  // after it (racecheck's warp epoch) when every waiting lane named all of
  // them; a partial mask orders nothing, conservatively.
  bool full = true;
  for (size_t i = lo; i < hi; i++) {
    const Fiber& f = fs[i];
    if (f.wait == Wait::warp && (f.mask & live) != live) full = false;
  }
  // A warp-wide matrix multiply (mma.sync): every lane of the warp must be
  // at one (.aligned: all 32 threads, converged, none exited), and it
  // orders no memory (it reads and writes registers only).
  // So is ldmatrix (it reads shared memory, which each lane recorded).
  WarpOp aligned = WarpOp::sync;
  for (size_t i = lo; i < hi; i++) {
    if (fs[i].wait == Wait::warp && (fs[i].op == WarpOp::mma || fs[i].op == WarpOp::ldmatrix)) aligned = fs[i].op;
  }
  if (aligned != WarpOp::sync) {
    const char* name = aligned == WarpOp::mma ? "mma.sync" : "ldmatrix";
    bool all = hi - lo == 32 && live == 0xffffffffu;
    for (size_t i = lo; i < hi && all; i++) all = fs[i].op == aligned && fs[i].mask == 0xffffffffu;
    if (!all) {
      fail(std::string(name) + ": warp " + std::to_string(w) +
           " is not converged (every one of its 32 lanes must execute it together)");
    } else if (aligned == WarpOp::mma) {
      mma_bf16_m16n8k16(fs + lo);
    } else if (!ldmatrix_m8n8(fs + lo)) {
      fail("ldmatrix: the lanes of warp " + std::to_string(w) + " disagree on the matrix count or .trans");
    }
    for (size_t i = lo; i < hi; i++) {
      if (fs[i].wait == Wait::warp) fs[i].wait = Wait::none;
    }
    return true;
  }
  if (full) r.warp_epoch[w]++;
  for (size_t i = lo; i < hi; i++) {
    Fiber& f = fs[i];
    if (f.wait != Wait::warp) continue;
    // A lane named in the mask that does not exist or has exited (only the
    // first one reaches the report: fail keeps the first error).
    if (const unsigned gone = f.mask & ~live) {
      fail("warp operation: mask names lane " + std::to_string(__builtin_ctz(gone)) + " of warp " + std::to_string(w) +
           ", which does not exist or has exited");
    }
    switch (f.op) {
      case WarpOp::shfl: {
        size_t j = lo + size_t(f.src);
        f.result = (f.src >= 0 && j < hi && fs[j].wait == Wait::warp) ? fs[j].slot : f.slot;
        break;
      }
      case WarpOp::ballot:
        f.result = slots & f.mask;
        break;
      case WarpOp::sync:
      case WarpOp::mma:  // resolved above
      case WarpOp::ldmatrix:
        break;
    }
  }
  for (size_t i = lo; i < hi; i++) {
    if (fs[i].wait == Wait::warp) fs[i].wait = Wait::none;
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
  Runner& r = runner;  // once: see release_warp
  r.fibers.assign(n, Fiber{});
  r.warp_epoch.assign((n + 31) / 32, 0);
  r.phase++;  // a new block: every shared-memory record is stale
  while (r.stacks.size() < n) r.stacks.push_back(static_cast<char*>(std::malloc(kStack)));
  for (size_t i = 0; i < n; i++) {
    Fiber& f = r.fibers[i];
    f.tid = uint3{unsigned(i % blockDim.x), unsigned(i / blockDim.x % blockDim.y),
                  unsigned(i / (size_t(blockDim.x) * blockDim.y))};
    f.lane = unsigned(i % 32);
    f.warp = unsigned(i / 32);
    f.stack = r.stacks[i];
    start(&f.ctx, f.stack, kStack, fiber_main);
  }
  size_t live = n;
  sched_ctx = &r.sched;
  for (;;) {
    for (size_t i = 0; i < n; i++) {
      Fiber& f = r.fibers[i];
      if (f.wait != Wait::none) continue;
      r.cur = int(i);
      running = &f;
      threadIdx = f.tid;
      switch_to(&r.sched, &f.ctx);
      if (f.wait == Wait::done) live--;
      if (eager_warps && (f.wait == Wait::warp || f.wait == Wait::done) && release_warp(f.warp, n)) {
        i = size_t(f.warp) * 32 - 1;  // run this warp again from its first lane
      }
    }
    r.cur = -1;
    running = nullptr;
    if (live == 0) return;
    bool released = false;
    size_t at_barrier = 0;
    for (const Fiber& f : r.fibers) at_barrier += f.wait == Wait::block;
    if (at_barrier == live) {
      for (Fiber& f : r.fibers) {
        if (f.wait == Wait::block) f.wait = Wait::none;
      }
      r.phase++;  // the barrier orders everything before it
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

// The dynamic shared memory a kernel may launch with beyond the default
// 48 KiB, as cudaFuncSetAttribute(kernel,
// cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) sets it (per process,
// as on the device).
inline std::mutex func_attr_mu;
inline std::map<const void*, int> max_dynamic_smem;

// launch runs body for every thread of every block of the grid. fn is the
// kernel's address (for the attributes cudaFuncSetAttribute set).
inline cudaError_t launch(const char* name, const void* fn, dim3 grid, dim3 block, size_t smem,
                          cudaStream_t stream, std::function<void()> body) {
  const size_t threads = size_t(block.x) * block.y * block.z;
  if (threads == 0 || threads > 1024 || block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
      grid.y > 65535 || grid.z > 65535 || smem > 227 * 1024) {
    runner.last = cudaErrorInvalidConfiguration;
    return runner.last;
  }
  if (smem > 48 * 1024) {
    // Over 48 KiB only as far as the kernel's attribute allows.
    std::lock_guard<std::mutex> l(func_attr_mu);
    auto it = max_dynamic_smem.find(fn);
    if (it == max_dynamic_smem.end() || size_t(it->second) < smem) {
      runner.last = cudaErrorInvalidValue;
      return runner.last;
    }
  }
  runner.error.clear();
  runner.body = &body;
  runner.kernel = name;
  gridDim = grid;
  blockDim = block;
  // 16 bytes for the alignment, 16 of slack: a racecheck out-of-bounds
  // report (record) still lets the access through.
  runner.dyn.resize(smem + 32);
  racecheck_on = stream && stream->racecheck;
  drop_file = stream ? stream->drop_file : "";
  drop_line = stream ? stream->drop_line : 0;
  uintptr_t dyn = (reinterpret_cast<uintptr_t>(runner.dyn.data()) + 15) & ~uintptr_t(15);
  if (racecheck_on) runner.dyn_shadow.resize(smem / 4 + 1);
  runner.dyn_region = Region{"dynamic shared memory", reinterpret_cast<unsigned char*>(dyn), smem,
                             racecheck_on ? runner.dyn_shadow.data() : nullptr};
#ifdef HONE_EMU_STORE_HOOKS
  // (No kernel thread runs here: the hooks ignore these stores.)
  if (racecheck_on) {
    runner.gwrites.clear();
    runner.dev.clear();
    std::lock_guard<std::mutex> l(dev_mu);
    for (const auto& [base, bytes] : dev_allocs) runner.dev.emplace_back(base, base + bytes);
  }
#endif
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
  racecheck_on = false;
  drop_line = 0;
  if (!runner.error.empty()) runner.last = cudaErrorLaunchFailure;
  return runner.last;
}

// ---- racecheck ----------------------------------------------------------------
// What an access does to a word: atomics (read-modify-write) are recorded
// as writes that do not conflict with other atomics.
enum class Access { read, write, atomic };

// same_file reports whether path names the file base (compared by base
// name: the compiler spells include paths in several ways).
inline bool same_file(const char* path, const char* base) {
  const char* slash = std::strrchr(path, '/');
  return std::strcmp(slash ? slash + 1 : path, base) == 0;
}

inline std::string thread_name(int32_t t) {
  const uint3 id = runner.fibers[size_t(t)].tid;
  return "(" + std::to_string(id.x) + "," + std::to_string(id.y) + "," + std::to_string(id.z) + ")";
}

// ordered reports whether thread a's access at warp epoch ea happens before
// the running thread b's access in the current phase: program order within
// a thread, or a completed rendezvous of their warp since a's access.
HONE_EMU_UNHOOKED inline bool ordered(int32_t a, uint32_t ea, int32_t b) {
  if (a == b) return true;
  Runner& runner = emu::runner;  // once (see release_warp)
  const size_t w = size_t(a) / 32;
  return w == size_t(b) / 32 && runner.warp_epoch[w] != ea;
}

inline const char* verb(Access a) { return a == Access::read ? "read" : a == Access::write ? "wrote" : "atomically updated"; }

// hazard fails the launch with the first hazard's context (out of line, as
// out_of_region below, to keep check_word's frame small).
__attribute__((noinline)) inline void hazard(const char* kind, const Region* r, size_t word, int32_t first, Access fa, Access second) {
  fail(std::string("racecheck: ") + kind + " hazard on shared memory in " + runner.kernel + ", block (" +
       std::to_string(blockIdx.x) + "," + std::to_string(blockIdx.y) + "," + std::to_string(blockIdx.z) +
       "): thread " + thread_name(first) + " " + verb(fa) + " and thread " + thread_name(runner.cur) + " " +
       verb(second) + " " + r->name + " word " + std::to_string(word) + " (byte " + std::to_string(4 * word) +
       ") with no __syncthreads between");
}

// check_word applies one access of the running thread to one word.
HONE_EMU_UNHOOKED inline void check_word(const Region* r, size_t word, Access acc) {
  Runner& runner = emu::runner;  // once (see release_warp): this runs for every access
  Shadow& s = r->shadow[word];
  const int32_t t = runner.cur;
  const uint32_t e = runner.warp_epoch[size_t(t) / 32];
  if (s.phase != runner.phase) s = Shadow{runner.phase};
  if (s.writer >= 0 && !ordered(s.writer, s.wepoch, t) && !(acc == Access::atomic && s.watomic)) {
    hazard(acc == Access::read ? "RAW" : "WAW", r, word, s.writer, s.watomic ? Access::atomic : Access::write, acc);
    return;
  }
  if (s.writer2 >= 0 && !ordered(s.writer2, s.wepoch2, t) && !(acc == Access::atomic && s.watomic2)) {
    hazard(acc == Access::read ? "RAW" : "WAW", r, word, s.writer2, s.watomic2 ? Access::atomic : Access::write, acc);
    return;
  }
  if (acc != Access::read) {
    for (int k = 0; k < 2; k++) {
      if (s.reader[k] >= 0 && !ordered(s.reader[k], s.repoch[k], t)) {
        hazard("WAR", r, word, s.reader[k], Access::read, acc);
        return;
      }
    }
    if (s.writer >= 0 && s.writer != t) {
      s.writer2 = s.writer;
      s.wepoch2 = s.wepoch;
      s.watomic2 = s.watomic;
    }
    s.writer = t;
    s.wepoch = e;
    s.watomic = acc == Access::atomic;
    return;
  }
  // Two reader slots, kept so that a later conflicting write still finds
  // one: a thread already there moves to its latest epoch; a new reader
  // takes a free slot, or replaces slot 1 when that brings a second warp
  // in, or replaces the reader of its own warp it is later than (the
  // earlier one is ordered before whatever the later one is ordered
  // before). A reader dropped otherwise can hide a hazard only in a mix of
  // three or more readers; DESIGN.md says so.
  for (int k = 0; k < 2; k++) {
    if (s.reader[k] < 0 || s.reader[k] == t) {
      s.reader[k] = t;
      s.repoch[k] = e;
      return;
    }
  }
  const size_t w0 = size_t(s.reader[0]) / 32, w1 = size_t(s.reader[1]) / 32, wt = size_t(t) / 32;
  int k = -1;
  if (w1 == w0 && wt != w0) k = 1;
  else if (wt == w1 && s.repoch[1] != e) k = 1;
  else if (wt == w0 && s.repoch[0] != e) k = 0;
  if (k >= 0) {
    s.reader[k] = t;
    s.repoch[k] = e;
  }
}

// out_of_region fails the launch for an access of bytes bytes at byte off
// of region r that does not lie inside it (out of line: the message's
// temporaries would give record a large frame, which AddressSanitizer
// poisons and unpoisons on every call).
__attribute__((noinline)) inline void out_of_region(const Region* r, size_t off, size_t bytes) {
  fail(std::string("racecheck: ") + runner.kernel + ", thread " + thread_name(runner.cur) + ": access of " +
       std::to_string(bytes) + " bytes at byte " + std::to_string(ptrdiff_t(off)) + " of " + r->name + " (" +
       std::to_string(r->bytes) + " bytes)");
}

// record checks an access of bytes bytes at p in region r (when racecheck
// is on): every 4-byte word it touches, and the bounds of the region.
HONE_EMU_UNHOOKED inline void record(const Region* r, const void* p, size_t bytes, Access acc) {
  if (!racecheck_on || !running) return;
  Runner& runner = emu::runner;  // once (see release_warp): this runs for every access
  if (!runner.error.empty()) return;
  const size_t off = size_t(static_cast<const unsigned char*>(p) - r->base);
  if (off >= r->bytes || r->bytes - off < bytes) {
    out_of_region(r, off, bytes);
    return;
  }
  for (size_t w = off / 4; w <= (off + bytes - 1) / 4 && runner.error.empty(); w++) check_word(r, w, acc);
}

// global_write records a write of bytes bytes at address a by the running
// thread (store_hooks.h calls it for every store the instrumented code
// makes; the shim's atomics call it with atomic set). Only words of device
// allocations count. Two writes of one halfword in a launch by different
// threads are a WAW hazard unless both are atomics, or both threads are of
// the same block and a __syncthreads (or their warp's rendezvous) orders
// them.
HONE_EMU_UNHOOKED inline void global_write(uintptr_t a, size_t bytes, bool atomic) {
  if (in_hook || !racecheck_on || !running) return;
  const Fiber& f = *running;
  if (a - reinterpret_cast<uintptr_t>(f.stack) < kStack) return;  // the thread's own stack
  Runner& runner = emu::runner;  // once (see release_warp): this runs for every store
  if (!runner.error.empty()) return;
  // The allocation holding a: the last one that starts at or below it, by a
  // binary search written out (std::upper_bound is instrumented, so this
  // function could not inline it: a call per store).
  const std::pair<uintptr_t, uintptr_t>* dev = runner.dev.data();
  size_t lo = 0, hi = runner.dev.size();
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (dev[mid].first <= a) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0 || a >= dev[lo - 1].second) return;  // not device memory
  const std::pair<uintptr_t, uintptr_t>* it = &dev[lo - 1];
  in_hook = true;  // the map's code (instrumented, not inlined here) stores too
  const GWrite mine{runner.phase, blockIdx, f.tid, runner.cur, runner.warp_epoch[size_t(runner.cur) / 32], atomic, true};
  auto same_block = [](const GWrite& x, const GWrite& y) {
    return x.block.x == y.block.x && x.block.y == y.block.y && x.block.z == y.block.z;
  };
  // Per 2-byte halfword, the smallest element the kernels store (bf16):
  // two threads writing the two halves of a word do not race.
  for (uintptr_t w = a / 2; w <= (a + bytes - 1) / 2 && runner.error.empty(); w++) {
    auto [g, fresh] = runner.gwrites.try_emplace(w, GWrites{mine, GWrite{}});
    if (fresh) continue;
    GWrites& ws = g->second;
    for (const GWrite* op : {&ws.last, &ws.other}) {
      const GWrite& o = *op;
      if (!o.valid) continue;
      const bool self = same_block(o, mine) && o.linear == mine.linear;
      const bool ord = self || (same_block(o, mine) && (o.phase != mine.phase || ordered(o.linear, o.wepoch, mine.linear)));
      if (ord || (o.atomic && atomic)) continue;
      auto name = [](uint3 b, uint3 t) {
        return "block (" + std::to_string(b.x) + "," + std::to_string(b.y) + "," + std::to_string(b.z) + ") thread (" +
               std::to_string(t.x) + "," + std::to_string(t.y) + "," + std::to_string(t.z) + ")";
      };
      fail(std::string("racecheck: WAW hazard on global memory in ") + runner.kernel + ": " + name(o.block, o.thread) +
           (o.atomic ? " atomically updated" : " wrote") + " and " + name(mine.block, mine.thread) +
           (atomic ? " atomically updated" : " wrote") + " byte " + std::to_string(2 * w - it->first) + " of a " +
           std::to_string(it->second - it->first) +
           "-byte device allocation");
      break;
    }
    if (!(same_block(ws.last, mine) && ws.last.linear == mine.linear)) ws.other = ws.last;
    ws.last = mine;
  }
  in_hook = false;
}

template <class T>
struct sptr;

// sref is an element of shared memory: reading it (conversion to T) and
// assigning it are recorded, then done on the host memory.
template <class T>
struct sref {
  T* p;
  const Region* r;
  operator T() const {
    record(r, p, sizeof(T), Access::read);
    return *p;
  }
  const sref& operator=(const T& v) const {
    record(r, p, sizeof(T), Access::write);
    *p = v;
    return *this;
  }
  const sref& operator=(const sref& o) const { return *this = T(o); }
  // Compound assignment: a read, then a write, of the same thread.
  template <class U>
  const sref& operator+=(const U& v) const {
    T x = T(*this);
    x += v;
    return *this = x;
  }
  template <class U>
  const sref& operator-=(const U& v) const {
    T x = T(*this);
    x -= v;
    return *this = x;
  }
  template <class U>
  const sref& operator*=(const U& v) const {
    T x = T(*this);
    x *= v;
    return *this = x;
  }
  template <class U>
  const sref& operator/=(const U& v) const {
    T x = T(*this);
    x /= v;
    return *this = x;
  }
  sptr<T> operator&() const { return sptr<T>{p, r}; }
};

// sptr is a pointer into shared memory: arithmetic as on T*, element access
// through sref. There is no conversion to T*: every access goes through
// here, so none escapes racecheck.
template <class T>
struct sptr {
  T* p;
  const Region* r;
  sref<T> operator[](ptrdiff_t i) const { return sref<T>{p + i, r}; }
  sref<T> operator*() const { return sref<T>{p, r}; }
  sptr operator+(ptrdiff_t i) const { return sptr{p + i, r}; }
  sptr operator-(ptrdiff_t i) const { return sptr{p - i, r}; }
  friend sptr operator+(ptrdiff_t i, sptr q) { return q + i; }
  ptrdiff_t operator-(sptr q) const { return p - q.p; }
  sptr& operator+=(ptrdiff_t i) {
    p += i;
    return *this;
  }
  sptr& operator++() {
    ++p;
    return *this;
  }
};

// shared_array is HONE_SHARED's __shared__ T name[N]: the elements, their
// shadow words, and the region racecheck reports them as.
template <class T, size_t N>
struct shared_array {
  T data[N];
  Shadow shadow[(N * sizeof(T) + 3) / 4];
  Region region;
  explicit shared_array(const char* name)
      : data{}, region{name, reinterpret_cast<unsigned char*>(data), sizeof(data), shadow} {}
  shared_array(const shared_array&) = delete;
  shared_array& operator=(const shared_array&) = delete;
  sref<T> operator[](ptrdiff_t i) { return sref<T>{data + i, &region}; }
  operator sptr<T>() { return sptr<T>{data, &region}; }
  sptr<T> operator+(ptrdiff_t i) { return sptr<T>{data + i, &region}; }
};

// dynamic_shared_ptr is the launch's dynamic shared memory (16-byte
// aligned, as extern __shared__ arrays are).
template <class T>
inline sptr<T> dynamic_shared_ptr() {
  return sptr<T>{reinterpret_cast<T*>(runner.dyn_region.base), &runner.dyn_region};
}

// cp.async.cg.shared.global (16 bytes), commit_group and wait_group: the
// source is read at once, but the shared-memory write happens, and is
// recorded by racecheck as this thread's, only when the wait_group that
// retires its group runs, as late as the device may land it. So a reader
// that no __syncthreads after the wait orders against it shows as a hazard.
inline void cp_async16(sptr<uint32_t> dst, const void* src) {
  Fiber::AsyncCopy c{reinterpret_cast<unsigned char*>(dst.p), dst.r, {}};
  std::memcpy(c.data, src, 16);
  self().async_open.push_back(c);
}
inline void cp_async_commit() {
  Fiber& f = self();
  f.async_groups.push_back(std::move(f.async_open));
  f.async_open.clear();
}
// cp_async_wait leaves at most n committed groups in flight.
inline void cp_async_wait(size_t n) {
  Fiber& f = self();
  while (f.async_groups.size() > n) {
    for (const Fiber::AsyncCopy& c : f.async_groups.front()) {
      record(c.region, c.dst, 16, Access::write);
      std::memcpy(c.dst, c.data, 16);
    }
    f.async_groups.erase(f.async_groups.begin());
  }
}

template <class T>
inline T warp_exchange(WarpOp op, unsigned mask, T v, int src) {
  static_assert(sizeof(T) <= 8, "warp operations move at most 8 bytes");
  if (!running) {
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
// The call site (file, line) comes in through default arguments so that a
// test can drop one barrier (CUstream_st::drop_line) as if it were deleted.
inline void __syncthreads(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  if (!emu::running) {
    emu::fail("__syncthreads outside a kernel");
    return;
  }
  if (line == emu::drop_line && emu::same_file(file, emu::drop_file)) return;
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

// hone_mma_bf16_m16n8k16(d, a, b, c) is the shim's
// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {d}, {a}, {b}, {c}
// (csrc/attention_flash.cu writes the inline PTX under nvcc): a warp-wide
// rendezvous, then emu::mma_bf16_m16n8k16. d may alias c.
inline void hone_mma_bf16_m16n8k16(float* d, const uint32_t* a, const uint32_t* b, const float* c) {
  emu::MmaOperands o{d, a, b, c};
  emu::warp_exchange<uint64_t>(emu::WarpOp::mma, 0xffffffffu, uint64_t(reinterpret_cast<uintptr_t>(&o)), 0);
}

// hone_ldmatrix(d, num, trans, row) is the shim's ldmatrix.sync.aligned
// .m8n8.x{num}[.trans].shared.b16 {d}, [row] (csrc/attention_flash.cu
// writes the inline PTX under nvcc): this lane's 16-byte read of row is
// recorded, then a warp-wide rendezvous and emu::ldmatrix_m8n8.
inline void hone_ldmatrix(uint32_t* d, int num, bool trans, emu::sptr<uint32_t> row) {
  const emu::Region* r = row.r;
  if ((reinterpret_cast<uintptr_t>(row.p) & 15) != 0) emu::fail("ldmatrix: a row address not 16-byte aligned");
  if (int(emu::self().lane) < 8 * num) emu::record(r, row.p, 16, emu::Access::read);
  emu::LdmatrixOperands o{reinterpret_cast<const unsigned char*>(row.p), d, num, trans};
  emu::warp_exchange<uint64_t>(emu::WarpOp::ldmatrix, 0xffffffffu, uint64_t(reinterpret_cast<uintptr_t>(&o)), 0);
}

inline unsigned __ballot_sync(unsigned mask, int pred) {
  return unsigned(emu::warp_exchange<uint64_t>(emu::WarpOp::ballot, mask, pred ? 1 : 0, 0));
}
inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
inline int __all_sync(unsigned mask, int pred) { return __ballot_sync(mask, !pred) == 0; }

// Atomics: read-modify-write with the old value returned, as on the device.
// atomic_write records a shim atomic for global-memory racecheck (the
// atomics themselves are HONE_EMU_UNHOOKED).
HONE_EMU_UNHOOKED inline void atomic_write(const void* p, size_t bytes) {
#ifdef HONE_EMU_STORE_HOOKS
  emu::global_write(reinterpret_cast<uintptr_t>(p), bytes, true);
#else
  (void)p;
  (void)bytes;
#endif
}

template <class T>
HONE_EMU_UNHOOKED inline T atomic_add_fp(T* p, T v) {
  atomic_write(p, sizeof(T));
  T old, want;
  __atomic_load(p, &old, __ATOMIC_RELAXED);
  do {
    want = old + v;
  } while (!__atomic_compare_exchange(p, &old, &want, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return old;
}
HONE_EMU_UNHOOKED inline float atomicAdd(float* p, float v) { return atomic_add_fp(p, v); }
HONE_EMU_UNHOOKED inline double atomicAdd(double* p, double v) { return atomic_add_fp(p, v); }
HONE_EMU_UNHOOKED inline int atomicAdd(int* p, int v) {
  atomic_write(p, sizeof(int));
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
HONE_EMU_UNHOOKED inline int atomicMax(int* p, int v) {
  atomic_write(p, sizeof(int));
  int old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
}

// Atomics on shared memory (&array[i] is an emu::sptr): recorded as atomic
// accesses, which conflict with plain accesses but not with each other.
template <class T, class V>
inline T atomicAdd(emu::sptr<T> p, V v) {
  emu::record(p.r, p.p, sizeof(T), emu::Access::atomic);
  return atomicAdd(p.p, T(v));
}
template <class T, class V>
inline T atomicMax(emu::sptr<T> p, V v) {
  emu::record(p.r, p.p, sizeof(T), emu::Access::atomic);
  return atomicMax(p.p, T(v));
}

// ---- launches ----------------------------------------------------------------
// HONE_LAUNCH(kernel, grid, block, shared bytes, stream, args...) is
// kernel<<<grid, block, shared bytes, stream>>>(args...) on the device.
#define HONE_LAUNCH(kernel, grid, block, smem, stream, ...) \
  ::emu::launch(#kernel, reinterpret_cast<const void*>(&kernel), dim3(grid), dim3(block), (smem), (stream), \
                [=]() { kernel(__VA_ARGS__); })

enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
// cudaFuncSetAttribute: only the dynamic shared memory limit (at most the
// 227 KiB of an H100's block; an A100 allows 163 KiB).
template <class F>
inline cudaError_t cudaFuncSetAttribute(F* fn, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 || value > 227 * 1024) {
    return cudaErrorInvalidValue;
  }
  std::lock_guard<std::mutex> l(emu::func_attr_mu);
  emu::max_dynamic_smem[reinterpret_cast<const void*>(fn)] = value;
  return cudaSuccess;
}

// HONE_DYNAMIC_SHARED(type, name) declares the block's dynamic shared memory
// (the launch's shared bytes) as type name[]: here an instrumented pointer
// (emu::sptr), so views of it are declared auto in the kernels.
#define HONE_DYNAMIC_SHARED(type, name) ::emu::sptr<type> name = ::emu::dynamic_shared_ptr<type>()

// HONE_SHARED(type, name, n) declares __shared__ type name[n]: here one
// instrumented array per launching OS thread (see racecheck above).
#define HONE_SHARED(type, name, n) static thread_local ::emu::shared_array<type, (n)> name(#name)

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
// cudaDeviceGetAttribute: the multiprocessor count only, 1 here (so that
// kernels sized by it split their work on the tests' small shapes, and
// still run several tiles per block).
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16 };
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr attr, int device) {
  if (attr != cudaDevAttrMultiProcessorCount || device != 0) return cudaErrorInvalidValue;
  *v = 1;
  return cudaSuccess;
}
// cudaMalloc allocates exactly bytes (256-byte aligned, as the device
// aligns), so under AddressSanitizer a kernel that reads or writes past the
// end of its buffer is caught at the first byte.
inline cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = nullptr;
  if (posix_memalign(p, 256, bytes ? bytes : 1) != 0) return cudaErrorMemoryAllocation;
#ifdef HONE_EMU_STORE_HOOKS
  std::lock_guard<std::mutex> l(emu::dev_mu);
  emu::dev_allocs[reinterpret_cast<uintptr_t>(*p)] = bytes ? bytes : 1;
#endif
  return cudaSuccess;
}
inline cudaError_t cudaFree(void* p) {
#ifdef HONE_EMU_STORE_HOOKS
  {
    std::lock_guard<std::mutex> l(emu::dev_mu);
    emu::dev_allocs.erase(reinterpret_cast<uintptr_t>(p));
  }
#endif
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
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.x; }
inline float __bfloat162float(__nv_bfloat16 h) {
  uint32_t u = uint32_t(h.x) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
