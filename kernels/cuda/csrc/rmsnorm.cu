// rmsnorm.cu: out[i,:] = x[i,:] / sqrt(mean(x[i,:]^2) + eps) * w, and its
// backward. Readable kernels use one thread per row; fast ones one block per
// row with a block reduction (coalesced loads, width/blockDim work per
// thread), or for rows of at most kWarpRow values (q/k norm's heads) one
// warp per row, eight rows per block (a block per 128-value row left half
// its threads idle and paid a block reduction per row).
#include "hone_cuda.h"
#include "internal.cuh"

namespace hone {

// rmsnorm_kernel1 (readable): one thread per row.
__global__ void rmsnorm_kernel1(float* out, const float* x, const float* w, long rows, long width, float eps) {
  const long row = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const float* xr = x + row * width;
  double ss = 0;
  for (long j = 0; j < width; j++) ss += double(xr[j]) * xr[j];
  const float r = float(1.0 / sqrt(ss / double(width) + double(eps)));
  for (long j = 0; j < width; j++) out[row * width + j] = xr[j] * r * w[j];
}

// rmsnorm_kernel2 (fast): one block per row.
__global__ void rmsnorm_kernel2(float* out, const float* x, const float* w, long rows, long width, float eps) {
  const long row = blockIdx.x;
  if (row >= rows) return;
  const float* xr = x + row * width;
  double ss = 0;
  for (long j = threadIdx.x; j < width; j += blockDim.x) ss += double(xr[j]) * xr[j];
  ss = block_sum(ss);
  const float r = float(1.0 / sqrt(ss / double(width) + double(eps)));
  for (long j = threadIdx.x; j < width; j += blockDim.x) out[row * width + j] = xr[j] * r * w[j];
}

constexpr long kWarpRow = 512;

// rmsnorm_kernel3 (fast, short rows): one warp per row.
__global__ void rmsnorm_kernel3(float* out, const float* x, const float* w, long rows, long width, float eps) {
  const long row = long(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // a whole warp: the shuffles below stay converged
  const float* xr = x + row * width;
  double ss = 0;
  for (long j = lane; j < width; j += 32) ss += double(xr[j]) * xr[j];
  ss = warp_sum(ss);
  const float r = float(1.0 / sqrt(ss / double(width) + double(eps)));
  for (long j = lane; j < width; j += 32) out[row * width + j] = xr[j] * r * w[j];
}

// With r = 1/sqrt(mean(x^2)+eps) and y_j = x_j r w_j:
//   dx_k = r w_k dy_k - x_k r^3 / width * sum_j dy_j w_j x_j
//   dw_j += sum_rows dy_j x_j r
// The dx kernels store r per row (rstd) for the dw kernel.

// rmsnorm_backward_kernel1 (readable): one thread per row.
__global__ void rmsnorm_backward_kernel1(float* dx, float* rstd, const float* dy, const float* x, const float* w,
                                         long rows, long width, float eps) {
  const long row = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const float *xr = x + row * width, *dyr = dy + row * width;
  double ss = 0, dot = 0;
  for (long j = 0; j < width; j++) {
    ss += double(xr[j]) * xr[j];
    dot += double(dyr[j] * w[j]) * xr[j];
  }
  const float r = float(1.0 / sqrt(ss / double(width) + double(eps)));
  const float k = float(dot / double(width)) * r * r * r;
  for (long j = 0; j < width; j++) dx[row * width + j] = r * w[j] * dyr[j] - xr[j] * k;
  rstd[row] = r;
}

// rmsnorm_backward_kernel2 (fast): one block per row, two block reductions.
__global__ void rmsnorm_backward_kernel2(float* dx, float* rstd, const float* dy, const float* x, const float* w,
                                         long rows, long width, float eps) {
  const long row = blockIdx.x;
  if (row >= rows) return;
  const float *xr = x + row * width, *dyr = dy + row * width;
  double ss = 0, dot = 0;
  for (long j = threadIdx.x; j < width; j += blockDim.x) {
    ss += double(xr[j]) * xr[j];
    dot += double(dyr[j] * w[j]) * xr[j];
  }
  ss = block_sum(ss);
  dot = block_sum(dot);
  const float r = float(1.0 / sqrt(ss / double(width) + double(eps)));
  const float k = float(dot / double(width)) * r * r * r;
  for (long j = threadIdx.x; j < width; j += blockDim.x) dx[row * width + j] = r * w[j] * dyr[j] - xr[j] * k;
  if (threadIdx.x == 0) rstd[row] = r;
}

// rmsnorm_backward_kernel3 (fast, short rows): one warp per row.
__global__ void rmsnorm_backward_kernel3(float* dx, float* rstd, const float* dy, const float* x, const float* w,
                                         long rows, long width, float eps) {
  const long row = long(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float *xr = x + row * width, *dyr = dy + row * width;
  double ss = 0, dot = 0;
  for (long j = lane; j < width; j += 32) {
    ss += double(xr[j]) * xr[j];
    dot += double(dyr[j] * w[j]) * xr[j];
  }
  ss = warp_sum(ss);
  dot = warp_sum(dot);
  const float r = float(1.0 / sqrt(ss / double(width) + double(eps)));
  const float k = float(dot / double(width)) * r * r * r;
  for (long j = lane; j < width; j += 32) dx[row * width + j] = r * w[j] * dyr[j] - xr[j] * k;
  if (lane == 0) rstd[row] = r;
}

// rmsnorm_dw_kernel: one thread per column sums over the rows in order.
__global__ void rmsnorm_dw_kernel(float* dw, const float* rstd, const float* dy, const float* x, long rows,
                                  long width) {
  const long j = long(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= width) return;
  float s = 0;
  for (long i = 0; i < rows; i++) s += dy[i * width + j] * x[i * width + j] * rstd[i];
  dw[j] += s;
}

}  // namespace hone

using namespace hone;

extern "C" {

int hone_rmsnorm(hone_ctx* c, float* out, const float* x, const float* w, long rows, long width, float eps) {
  HONE_ENTRY(c);
  if (rows == 0) return 0;
  if (c->variant == hone_variant_readable) {
    HONE_LAUNCH(rmsnorm_kernel1, unsigned(ceil_div(rows, 64)), 64, 0, c->stream, out, x, w, rows, width, eps);
  } else if (width <= kWarpRow) {
    HONE_LAUNCH(rmsnorm_kernel3, unsigned(ceil_div(rows, 8)), 256, 0, c->stream, out, x, w, rows, width, eps);
  } else {
    HONE_LAUNCH(rmsnorm_kernel2, unsigned(rows), 256, 0, c->stream, out, x, w, rows, width, eps);
  }
  return check_launch(c, "rmsnorm");
}

int hone_rmsnorm_backward(hone_ctx* c, float* dx, float* dw, const float* dy, const float* x, const float* w,
                          long rows, long width, float eps) {
  HONE_ENTRY(c);
  if (rows == 0) return 0;
  Workspace ws{c};
  if (ws.reserve(Workspace::align(rows * sizeof(float)))) return -1;
  float* rstd = ws.take<float>(rows);
  if (c->variant == hone_variant_readable) {
    HONE_LAUNCH(rmsnorm_backward_kernel1, unsigned(ceil_div(rows, 64)), 64, 0, c->stream, dx, rstd, dy, x, w, rows,
                width, eps);
  } else if (width <= kWarpRow) {
    HONE_LAUNCH(rmsnorm_backward_kernel3, unsigned(ceil_div(rows, 8)), 256, 0, c->stream, dx, rstd, dy, x, w, rows,
                width, eps);
  } else {
    HONE_LAUNCH(rmsnorm_backward_kernel2, unsigned(rows), 256, 0, c->stream, dx, rstd, dy, x, w, rows, width, eps);
  }
  if (check_launch(c, "rmsnorm_backward")) return -1;
  if (!dw) return 0;
  HONE_LAUNCH(rmsnorm_dw_kernel, unsigned(ceil_div(width, 128)), 128, 0, c->stream, dw, rstd, dy, x, rows, width);
  return check_launch(c, "rmsnorm_backward dw");
}

}  // extern "C"
