// store_hooks.h: global-memory racecheck's view of every store. Compiled in
// only with HONE_EMU_STORE_HOOKS, together with GCC's kernel-address
// instrumentation in outline mode (TestRacecheckGlobal sets the flags):
//   -fsanitize=kernel-address --param=asan-instrumentation-with-call-threshold=0
//   --param=asan-stack=0 --param=asan-globals=0 --param=asan-instrument-reads=0
// which makes the compiler call __asan_storeN_noabort(address) before every
// store of the translation unit (loads are not instrumented), with no
// runtime library: the functions below are the whole runtime. Stores go to
// emu::global_write, which keeps those that land in device allocations
// during a launch under racecheck; the load hooks are there for a build
// that instruments loads too, and ignore them. The kernels' .cu
// sources are untouched: the instrumentation is the hook.
#pragma once

#include "cuda_emu.h"

#define HONE_STORE_HOOK(n)                                                                       \
  extern "C" __attribute__((no_sanitize_address)) void __asan_store##n##_noabort(uintptr_t a) { \
    emu::global_write(a, n, false);                                                              \
  }                                                                                              \
  extern "C" __attribute__((no_sanitize_address)) void __asan_load##n##_noabort(uintptr_t) {}
HONE_STORE_HOOK(1)
HONE_STORE_HOOK(2)
HONE_STORE_HOOK(4)
HONE_STORE_HOOK(8)
HONE_STORE_HOOK(16)
#undef HONE_STORE_HOOK

extern "C" __attribute__((no_sanitize_address)) void __asan_storeN_noabort(uintptr_t a, size_t n) {
  if (n) emu::global_write(a, n, false);
}
extern "C" __attribute__((no_sanitize_address)) void __asan_loadN_noabort(uintptr_t, size_t) {}
extern "C" void __asan_handle_no_return() {}
// The rest of the interface the instrumented code (and allocator.cuh, which
// poisons cached blocks when __SANITIZE_ADDRESS__ is defined) calls: no-ops.
extern "C" void __asan_poison_memory_region(void const volatile*, size_t) {}
extern "C" void __asan_unpoison_memory_region(void const volatile*, size_t) {}
extern "C" void __asan_before_dynamic_init(const void*) {}
extern "C" void __asan_after_dynamic_init() {}
