// internal.cuh: the context behind hone_ctx and the helpers the host side
// of every kernel file uses (error recording, the workspace).
#pragma once

#include <stdio.h>
#include <string.h>

#include <array>
#include <map>

#include "allocator.cuh"
#include "common.cuh"
#include "hone_cuda.h"

struct hone_ctx {
  int device = 0;
  int variant = hone_variant_readable;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  // cuBLASLt (the bf16 GEMM, bf16.cu): the handle, its workspace (kLtWorkspace
  // bytes, allocated at the first bf16 GEMM) and the heuristic's algorithm
  // per GEMM shape and operand alignment (hone::LtKey).
  cublasLtHandle_t lt = nullptr;
  void* lt_work = nullptr;
  std::map<std::array<long, 10>, cublasLtMatmulHeuristicResult_t> lt_algos;
  // The workspace: one device buffer carved per call (RoPE frequencies,
  // sampling parameters, vocabulary chunks, reduction partials), grown on
  // demand.
  unsigned char* work = nullptr;
  size_t work_bytes = 0;
  // Tensors' memory.
  hone::Allocator alloc;
  // Logits per hone_token_logprobs chunk.
  long chunk_elems = 1L << 24;
  // The device's multiprocessors (kernels that size their grid by it).
  int sm_count = 1;
  char err[512] = {0};
};

namespace hone {

// failed records the first error (later ones would only repeat its cause)
// and returns -1.
inline int failed(hone_ctx* c, const char* op, const char* what) {
  if (!c->err[0]) snprintf(c->err, sizeof c->err, "%s: %s", op, what);
  return -1;
}

// check_cuda turns a runtime API status into 0 or a recorded error.
inline int check_cuda(hone_ctx* c, const char* op, cudaError_t e) {
  return e == cudaSuccess ? 0 : failed(c, op, cudaGetErrorString(e));
}

// check_launch reports a launch that the runtime refused or (in the shim,
// which runs it at once) that failed.
inline int check_launch(hone_ctx* c, const char* op) { return check_cuda(c, op, cudaGetLastError()); }

inline int check_blas(hone_ctx* c, const char* op, cublasStatus_t s) {
  return s == CUBLAS_STATUS_SUCCESS ? 0 : failed(c, op, cublasGetStatusString(s));
}

// Workspace carves aligned pieces of the context's workspace for one call.
// reserve must be called with the call's total before any piece is taken,
// because growing the buffer moves it.
struct Workspace {
  hone_ctx* c;
  size_t used = 0;

  static size_t align(size_t n) { return (n + 255) / 256 * 256; }

  int reserve(size_t bytes) {
    if (bytes <= c->work_bytes) return 0;
    if (c->work) {
      // Work queued on the stream may still read the old buffer.
      if (check_cuda(c, "workspace", cudaStreamSynchronize(c->stream))) return -1;
      cudaFree(c->work);
      c->work = nullptr;
      c->work_bytes = 0;
    }
    void* p = nullptr;
    if (check_cuda(c, "workspace", cudaMalloc(&p, bytes))) return -1;
    c->work = static_cast<unsigned char*>(p);
    c->work_bytes = bytes;
    return 0;
  }

  template <class T>
  T* take(size_t count) {
    T* p = reinterpret_cast<T*>(c->work + used);
    used += align(count * sizeof(T));
    return p;
  }

  // upload copies host data into a piece of the workspace.
  template <class T>
  T* upload(const T* host, size_t count, const char* op) {
    T* p = take<T>(count);
    if (count && check_cuda(c, op, cudaMemcpyAsync(p, host, count * sizeof(T), cudaMemcpyHostToDevice, c->stream))) {
      return nullptr;
    }
    return p;
  }
};

}  // namespace hone

// HONE_ENTRY starts every exported function: a sticky error makes it a no-op.
#define HONE_ENTRY(c) \
  do {                \
    if ((c)->err[0]) return -1; \
  } while (0)
