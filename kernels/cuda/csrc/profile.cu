// profile.cu: CUDA events on the context's stream (profile.h), what
// kernels/profile times operations with on a GPU. No kernels; nvcc only
// (emu.cc does not include it).
#include "internal.cuh"
#include "profile.h"

namespace {

int event_failed(const char* op, cudaError_t e, char* err, size_t errlen) {
  snprintf(err, errlen, "%s: %s", op, cudaGetErrorString(e));
  return -1;
}

}  // namespace

extern "C" int hone_event_record(hone_ctx* c, void** ev, char* err, size_t errlen) {
  if (*ev == nullptr) {
    cudaEvent_t e;
    cudaError_t s = cudaEventCreate(&e);
    if (s != cudaSuccess) return event_failed("cudaEventCreate", s, err, errlen);
    *ev = e;
  }
  cudaError_t s = cudaEventRecord(static_cast<cudaEvent_t>(*ev), c->stream);
  return s == cudaSuccess ? 0 : event_failed("cudaEventRecord", s, err, errlen);
}

extern "C" int hone_event_ms(void* start, void* end, float* ms, char* err, size_t errlen) {
  cudaError_t s = cudaEventSynchronize(static_cast<cudaEvent_t>(end));
  if (s != cudaSuccess) return event_failed("cudaEventSynchronize", s, err, errlen);
  s = cudaEventElapsedTime(ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end));
  return s == cudaSuccess ? 0 : event_failed("cudaEventElapsedTime", s, err, errlen);
}

extern "C" void hone_event_destroy(void* ev) {
  if (ev != nullptr) cudaEventDestroy(static_cast<cudaEvent_t>(ev));
}
