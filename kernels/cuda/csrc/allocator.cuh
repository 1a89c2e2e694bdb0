// allocator.cuh: the context's caching allocator. cudaMalloc and cudaFree
// are slow and cudaFree synchronises the device, while a training step
// allocates and frees the same activation shapes every time: freed blocks
// are kept in per-size free lists and handed out again. Sizes round up to
// 512 bytes (up to 1 MiB) or to 2 MiB pages beyond. Reuse is safe without
// events because the context has one stream: a kernel that uses a reused
// block is queued after every kernel that used it before. On out of memory
// the cache is released and the allocation retried once.
#pragma once

#include "common.cuh"

#include <map>
#include <unordered_map>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
// Under AddressSanitizer (the emulated backend's asan runs) the rounding
// slack past the requested bytes is poisoned, so an overrun into it is
// still caught.
#define HONE_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define HONE_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define HONE_POISON(p, n) ((void)0)
#define HONE_UNPOISON(p, n) ((void)0)
#endif

namespace hone {

struct Allocator {
  std::map<size_t, std::vector<void*>> free_lists;  // rounded size -> cached blocks
  std::unordered_map<void*, size_t> live;             // block -> rounded size
  size_t live_bytes = 0, cached_bytes = 0;
  size_t peak_live = 0;  // live_bytes' high-water mark (since reset_peak)
  long device_allocs = 0, reuses = 0;

  static size_t round(size_t bytes) {
    if (bytes == 0) bytes = 1;
    const size_t small = 512, page = 2u << 20;
    return bytes <= (1u << 20) ? (bytes + small - 1) / small * small : (bytes + page - 1) / page * page;
  }

  // release frees every cached block.
  void release() {
    for (auto& kv : free_lists) {
      for (void* p : kv.second) {
        HONE_UNPOISON(p, kv.first);
        cudaFree(p);
      }
    }
    free_lists.clear();
    cached_bytes = 0;
  }

  cudaError_t alloc(void** out, size_t bytes) {
    const size_t size = round(bytes);
    auto it = free_lists.find(size);
    if (it != free_lists.end() && !it->second.empty()) {
      *out = it->second.back();
      it->second.pop_back();
      cached_bytes -= size;
      reuses++;
    } else {
      cudaError_t e = cudaMalloc(out, size);
      if (e != cudaSuccess) {
        cudaGetLastError();  // clear the out-of-memory error and retry with the cache released
        release();
        e = cudaMalloc(out, size);
        if (e != cudaSuccess) return e;
      }
      device_allocs++;
    }
    live[*out] = size;
    live_bytes += size;
    if (live_bytes > peak_live) peak_live = live_bytes;
    HONE_UNPOISON(*out, size);
    HONE_POISON(static_cast<char*>(*out) + bytes, size - bytes);
    return cudaSuccess;
  }

  // free returns a block to its free list; false if p was not allocated here.
  bool free(void* p) {
    auto it = live.find(p);
    if (it == live.end()) return false;
    const size_t size = it->second;
    live.erase(it);
    live_bytes -= size;
    HONE_POISON(p, size);
    free_lists[size].push_back(p);
    cached_bytes += size;
    return true;
  }

  // destroy frees everything, live blocks included.
  void destroy() {
    release();
    for (auto& kv : live) {
      HONE_UNPOISON(kv.first, kv.second);
      cudaFree(kv.first);
    }
    live.clear();
    live_bytes = 0;
  }
};

}  // namespace hone
