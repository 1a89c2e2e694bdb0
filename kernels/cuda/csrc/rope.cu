// rope.cu: rotary position embedding in Hugging Face's rotate_half layout,
// in place: within each head of width 2*half, the pair (j, j+half) of row t
// rotates by angle float(pos[t]) * freqs[j] (the product in float32, as
// transformers and kernels/cpu form it); inverse rotates back (the backward).
//
// The cos/sin come from a table built once per model (hone_rope_table):
// row p holds cos of the half angles of position p, then their sin, each
// taken in double and rounded to float, as kernels/cpu does.
#include "hone_cuda.h"
#include "internal.cuh"

namespace hone {

// rope_table_kernel: one thread per (position, frequency).
__global__ void rope_table_kernel(float* table, const float* freqs, long max_pos, long half) {
  for (long e = long(blockIdx.x) * blockDim.x + threadIdx.x; e < max_pos * half; e += long(gridDim.x) * blockDim.x) {
    const long p = e / half, j = e % half;
    const double angle = double(float(p) * freqs[j]);
    table[p * 2 * half + j] = float(cos(angle));
    table[p * 2 * half + half + j] = float(sin(angle));
  }
}

// rope_kernel: one thread per rotated pair.
__global__ void rope_kernel(float* x, const int32_t* pos, const float* table, long rows, long width, long half,
                            float sign) {
  const long pairs_per_row = width / 2;
  for (long p = long(blockIdx.x) * blockDim.x + threadIdx.x; p < rows * pairs_per_row;
       p += long(gridDim.x) * blockDim.x) {
    const long t = p / pairs_per_row, r = p % pairs_per_row;
    const long head = r / half, j = r % half;
    const float* row = table + long(pos[t]) * 2 * half;
    const float c = row[j], s = sign * row[half + j];
    float* h = x + t * width + head * 2 * half;
    const float a = h[j], b = h[j + half];
    h[j] = a * c - b * s;
    h[j + half] = b * c + a * s;
  }
}

}  // namespace hone

using namespace hone;

extern "C" {

int hone_rope_table(hone_ctx* c, float* table, const float* host_freqs, long max_pos, long half) {
  HONE_ENTRY(c);
  if (max_pos == 0 || half == 0) return 0;
  Workspace ws{c};
  if (ws.reserve(Workspace::align(half * sizeof(float)))) return -1;
  const float* freqs = ws.upload(host_freqs, half, "rope table frequencies");
  if (!freqs) return -1;
  HONE_LAUNCH(rope_table_kernel, grid_for(max_pos * half, 256), 256, 0, c->stream, table, freqs, max_pos, half);
  return check_launch(c, "rope_table");
}

int hone_rope(hone_ctx* c, float* x, const int32_t* pos, const float* table, long rows, long width, long half,
              int inverse) {
  HONE_ENTRY(c);
  if (rows == 0 || width == 0) return 0;
  const long pairs = rows * width / 2;
  HONE_LAUNCH(rope_kernel, grid_for(pairs, 256), 256, 0, c->stream, x, pos, table, rows, width, half,
              inverse ? -1.0f : 1.0f);
  return check_launch(c, "rope");
}

}  // extern "C"
