// embedding.cu: row gather out[i,:] = table[ids[i],:] and its backward, the
// scatter-add dtable[ids[i],:] += dout[i,:]. Token ids are device pointers,
// range-checked on the host when they were uploaded.
#include "hone_cuda.h"
#include "internal.cuh"

namespace hone {

// embedding_kernel: one thread per output element (coalesced along the row).
__global__ void embedding_kernel(float* out, const float* table, const int32_t* ids, long n, long width) {
  for (long e = long(blockIdx.x) * blockDim.x + threadIdx.x; e < n * width; e += long(gridDim.x) * blockDim.x) {
    const long i = e / width, j = e % width;
    out[e] = table[long(ids[i]) * width + j];
  }
}

// embedding_bf16_kernel: embedding_kernel from a bf16 table.
__global__ void embedding_bf16_kernel(float* out, const __nv_bfloat16* table, const int32_t* ids, long n,
                                      long width) {
  for (long e = long(blockIdx.x) * blockDim.x + threadIdx.x; e < n * width; e += long(gridDim.x) * blockDim.x) {
    const long i = e / width, j = e % width;
    out[e] = __bfloat162float(table[long(ids[i]) * width + j]);
  }
}

// embedding_backward_kernel1 (readable, deterministic): one thread per
// column walks the tokens in order, so repeated ids add up in token order.
__global__ void embedding_backward_kernel1(float* dtable, const float* dout, const int32_t* ids, long n, long width) {
  const long j = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= width) return;
  for (long i = 0; i < n; i++) dtable[long(ids[i]) * width + j] += dout[i * width + j];
}

// embedding_backward_kernel2 (fast): one thread per element, atomicAdd for
// repeated ids (order of additions varies between runs on a device).
__global__ void embedding_backward_kernel2(float* dtable, const float* dout, const int32_t* ids, long n, long width) {
  for (long e = long(blockIdx.x) * blockDim.x + threadIdx.x; e < n * width; e += long(gridDim.x) * blockDim.x) {
    const long i = e / width, j = e % width;
    atomicAdd(&dtable[long(ids[i]) * width + j], dout[e]);
  }
}

}  // namespace hone

using namespace hone;

extern "C" {

int hone_embedding(hone_ctx* c, float* out, const float* table, const int32_t* ids, long n, long width) {
  HONE_ENTRY(c);
  if (n == 0 || width == 0) return 0;
  HONE_LAUNCH(embedding_kernel, grid_for(n * width, 256), 256, 0, c->stream, out, table, ids, n, width);
  return check_launch(c, "embedding");
}

int hone_embedding_bf16(hone_ctx* c, float* out, const uint16_t* table, const int32_t* ids, long n, long width) {
  HONE_ENTRY(c);
  if (n == 0 || width == 0) return 0;
  HONE_LAUNCH(embedding_bf16_kernel, grid_for(n * width, 256), 256, 0, c->stream, out,
              reinterpret_cast<const __nv_bfloat16*>(table), ids, n, width);
  return check_launch(c, "embedding_bf16");
}

int hone_embedding_backward(hone_ctx* c, float* dtable, const float* dout, const int32_t* ids, long n, long width) {
  HONE_ENTRY(c);
  if (n == 0 || width == 0) return 0;
  if (c->variant == hone_variant_readable) {
    HONE_LAUNCH(embedding_backward_kernel1, unsigned(ceil_div(width, 128)), 128, 0, c->stream, dtable, dout, ids, n,
                width);
  } else {
    HONE_LAUNCH(embedding_backward_kernel2, grid_for(n * width, 256), 256, 0, c->stream, dtable, dout, ids, n, width);
  }
  return check_launch(c, "embedding_backward");
}

}  // extern "C"
