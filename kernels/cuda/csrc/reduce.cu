// reduce.cu: column sums (bias gradients) and whole-tensor sums and sums of
// squares (losses, gradient norms), to the host or into an element of a
// device tensor.
#include "hone_cuda.h"
#include "internal.cuh"

namespace hone {

// sum_rows_kernel: one thread per column walks the rows, so the sum is in
// row order and deterministic. dst[j] += sum_i x[i, j].
__global__ void sum_rows_kernel(float* dst, const float* x, long rows, long width) {
  const long j = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= width) return;
  float s = 0;
  for (long i = 0; i < rows; i++) s += x[i * width + j];
  dst[j] += s;
}

// sum_kernel1 (readable): one block; each thread sums a strided share in
// double, then a shared-memory tree halves the partials until thread 0 holds
// the total. blockDim.x must be a power of two.
__global__ void sum_kernel1(double* out, const float* x, long n, int squares) {
  HONE_DYNAMIC_SHARED(double, partial);
  double s = 0;
  for (long i = threadIdx.x; i < n; i += blockDim.x) {
    const double v = x[i];
    s += squares ? v * v : v;
  }
  partial[threadIdx.x] = s;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = partial[0];
}

// sum_kernel2 (fast): a grid of blocks in a grid-stride loop, a block_sum of
// the per-thread partials, one double atomicAdd per block into out (zeroed
// beforehand). The order of the additions varies between runs on a device.
__global__ void sum_kernel2(double* out, const float* x, long n, int squares) {
  double s = 0;
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += long(gridDim.x) * blockDim.x) {
    const double v = x[i];
    s += squares ? v * v : v;
  }
  s = block_sum(s);
  if (threadIdx.x == 0) atomicAdd(out, s);
}

// add_double_kernel: *dst = float(*dst + *d), one rounding (a single thread).
__global__ void add_double_kernel(float* dst, const double* d) {
  if (threadIdx.x == 0) *dst = float(double(*dst) + *d);
}

// sum_to stores the sum (squares: of squares) of x in the device double *d.
int sum_to(hone_ctx* c, double* d, const float* x, long n, int squares) {
  if (check_cuda(c, "sum", cudaMemsetAsync(d, 0, sizeof(double), c->stream))) return -1;
  if (n == 0) return 0;
  if (c->variant == hone_variant_readable) {
    HONE_LAUNCH(sum_kernel1, 1, 256, 256 * sizeof(double), c->stream, d, x, n, squares);
  } else {
    unsigned grid = grid_for(n, 256);
    if (grid > 1024) grid = 1024;
    HONE_LAUNCH(sum_kernel2, grid, 256, 0, c->stream, d, x, n, squares);
  }
  return check_launch(c, "sum");
}

}  // namespace hone

using namespace hone;

extern "C" {

int hone_sum_rows(hone_ctx* c, float* dst, const float* x, long rows, long width) {
  HONE_ENTRY(c);
  if (width == 0) return 0;
  HONE_LAUNCH(sum_rows_kernel, unsigned(ceil_div(width, 128)), 128, 0, c->stream, dst, x, rows, width);
  return check_launch(c, "sum_rows");
}

int hone_sum(hone_ctx* c, double* host_out, const float* x, long n, int squares) {
  HONE_ENTRY(c);
  Workspace ws{c};
  if (ws.reserve(256)) return -1;
  double* d = ws.take<double>(1);
  if (sum_to(c, d, x, n, squares)) return -1;
  return hone_download(c, host_out, d, sizeof(double));
}

int hone_sum_into(hone_ctx* c, float* dst, const float* x, long n, int squares) {
  HONE_ENTRY(c);
  Workspace ws{c};
  if (ws.reserve(256)) return -1;
  double* d = ws.take<double>(1);
  if (sum_to(c, d, x, n, squares)) return -1;
  HONE_LAUNCH(add_double_kernel, 1, 1, 0, c->stream, dst, d);
  return check_launch(c, "sum_into");
}

}  // extern "C"
