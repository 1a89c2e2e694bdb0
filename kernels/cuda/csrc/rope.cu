// rope.cu: rotary position embedding in Hugging Face's rotate_half layout,
// in place: within each head of width 2*half, the pair (j, j+half) of row t
// rotates by angle float(pos[t]) * freqs[j] (the product in float32, as
// transformers and kernels/cpu form it); inverse rotates back (the backward).
#include "hone_cuda.h"
#include "internal.cuh"

namespace hone {

// rope_kernel: one thread per rotated pair.
__global__ void rope_kernel(float* x, const int32_t* pos, const float* freqs, long rows, long width, long half,
                            float sign) {
  const long pairs_per_row = width / 2;
  for (long p = long(blockIdx.x) * blockDim.x + threadIdx.x; p < rows * pairs_per_row;
       p += long(gridDim.x) * blockDim.x) {
    const long t = p / pairs_per_row, r = p % pairs_per_row;
    const long head = r / half, j = r % half;
    const float angle = float(pos[t]) * freqs[j];
    float s, c;
    sincosf(angle, &s, &c);
    s *= sign;
    float* h = x + t * width + head * 2 * half;
    const float a = h[j], b = h[j + half];
    h[j] = a * c - b * s;
    h[j + half] = b * c + a * s;
  }
}

}  // namespace hone

using namespace hone;

extern "C" {

int hone_rope(hone_ctx* c, float* x, const int32_t* host_pos, const float* host_freqs, long rows, long width,
              long half, int inverse) {
  HONE_ENTRY(c);
  if (rows == 0 || width == 0) return 0;
  Workspace ws{c};
  if (ws.reserve(Workspace::align(rows * sizeof(int32_t)) + Workspace::align(half * sizeof(float)))) return -1;
  const int32_t* pos = ws.upload(host_pos, rows, "rope positions");
  const float* freqs = ws.upload(host_freqs, half, "rope frequencies");
  if (!pos || !freqs) return -1;
  const long pairs = rows * width / 2;
  HONE_LAUNCH(rope_kernel, grid_for(pairs, 256), 256, 0, c->stream, x, pos, freqs, rows, width, half,
              inverse ? -1.0f : 1.0f);
  return check_launch(c, "rope");
}

}  // extern "C"
