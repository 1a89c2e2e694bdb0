// elementwise.cu: one thread per element in grid-stride loops: fill, add,
// mul, scale, axpy, bias rows, SiLU, SwiGLU and its backward, AdamW. These
// are memory-bound and already coalesced; there is no faster variant to
// keep beside them.
#include "hone_cuda.h"
#include "internal.cuh"

namespace hone {

#define HONE_FOR_EACH(i, n) \
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += long(gridDim.x) * blockDim.x)

__global__ void fill_kernel(float* x, long n, float v) {
  HONE_FOR_EACH(i, n) x[i] = v;
}

__global__ void add_kernel(float* dst, const float* a, const float* b, long n) {
  HONE_FOR_EACH(i, n) dst[i] = a[i] + b[i];
}

__global__ void mul_kernel(float* dst, const float* a, const float* b, long n) {
  HONE_FOR_EACH(i, n) dst[i] = a[i] * b[i];
}

__global__ void scale_kernel(float* dst, const float* a, float s, long n) {
  HONE_FOR_EACH(i, n) dst[i] = s * a[i];
}

__global__ void axpy_kernel(float* dst, const float* x, float s, long n) {
  HONE_FOR_EACH(i, n) dst[i] += s * x[i];
}

// add_row_kernel adds v (width) to every row of dst.
__global__ void add_row_kernel(float* dst, const float* v, long n, long width) {
  HONE_FOR_EACH(i, n) dst[i] += v[i % width];
}

__device__ inline float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void silu_kernel(float* out, const float* x, long n) {
  HONE_FOR_EACH(i, n) out[i] = x[i] * sigmoid(x[i]);
}

__global__ void swiglu_kernel(float* out, const float* gate, const float* up, long n) {
  HONE_FOR_EACH(i, n) out[i] = gate[i] * sigmoid(gate[i]) * up[i];
}

// swiglu_backward_kernel: out = silu(g)*u, so dup = dout*silu(g) and
// dgate = dout*u*silu'(g) with silu'(g) = s + g*s*(1-s), s = sigmoid(g).
__global__ void swiglu_backward_kernel(float* dgate, float* dup, const float* dout, const float* gate,
                                       const float* up, long n) {
  HONE_FOR_EACH(i, n) {
    const float g = gate[i], s = sigmoid(g), d = dout[i];
    dup[i] = d * g * s;
    dgate[i] = d * up[i] * (s + g * s * (1.0f - s));
  }
}

// adamw_kernel is one decoupled-weight-decay Adam step in PyTorch's form
// (and kernels/cpu's): p = p*decay - step_size*m / (sqrt(v)/sqrt_bc2 + eps),
// with step_size = lr/(1-beta1^t) and sqrt_bc2 = sqrt(1-beta2^t) computed on
// the host in double.
__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, long n, float b1, float b2, float eps,
                             float decay, float step_size, float sqrt_bc2) {
  HONE_FOR_EACH(i, n) {
    const float gi = g[i];
    const float mi = b1 * m[i] + (1.0f - b1) * gi;
    const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay - step_size * mi / (sqrtf(vi) / sqrt_bc2 + eps);
  }
}

}  // namespace hone

using namespace hone;

extern "C" {

int hone_fill(hone_ctx* c, float* x, long n, float v) {
  HONE_ENTRY(c);
  if (n == 0) return 0;
  HONE_LAUNCH(fill_kernel, grid_for(n, 256), 256, 0, c->stream, x, n, v);
  return check_launch(c, "fill");
}

int hone_add(hone_ctx* c, float* dst, const float* a, const float* b, long n) {
  HONE_ENTRY(c);
  if (n == 0) return 0;
  HONE_LAUNCH(add_kernel, grid_for(n, 256), 256, 0, c->stream, dst, a, b, n);
  return check_launch(c, "add");
}

int hone_mul(hone_ctx* c, float* dst, const float* a, const float* b, long n) {
  HONE_ENTRY(c);
  if (n == 0) return 0;
  HONE_LAUNCH(mul_kernel, grid_for(n, 256), 256, 0, c->stream, dst, a, b, n);
  return check_launch(c, "mul");
}

int hone_scale(hone_ctx* c, float* dst, const float* a, float s, long n) {
  HONE_ENTRY(c);
  if (n == 0) return 0;
  HONE_LAUNCH(scale_kernel, grid_for(n, 256), 256, 0, c->stream, dst, a, s, n);
  return check_launch(c, "scale");
}

int hone_axpy(hone_ctx* c, float* dst, const float* x, float s, long n) {
  HONE_ENTRY(c);
  if (n == 0) return 0;
  HONE_LAUNCH(axpy_kernel, grid_for(n, 256), 256, 0, c->stream, dst, x, s, n);
  return check_launch(c, "axpy");
}

int hone_add_row(hone_ctx* c, float* dst, const float* v, long rows, long width) {
  HONE_ENTRY(c);
  const long n = rows * width;
  if (n == 0) return 0;
  HONE_LAUNCH(add_row_kernel, grid_for(n, 256), 256, 0, c->stream, dst, v, n, width);
  return check_launch(c, "add_row");
}

int hone_silu(hone_ctx* c, float* out, const float* x, long n) {
  HONE_ENTRY(c);
  if (n == 0) return 0;
  HONE_LAUNCH(silu_kernel, grid_for(n, 256), 256, 0, c->stream, out, x, n);
  return check_launch(c, "silu");
}

int hone_swiglu(hone_ctx* c, float* out, const float* gate, const float* up, long n) {
  HONE_ENTRY(c);
  if (n == 0) return 0;
  HONE_LAUNCH(swiglu_kernel, grid_for(n, 256), 256, 0, c->stream, out, gate, up, n);
  return check_launch(c, "swiglu");
}

int hone_swiglu_backward(hone_ctx* c, float* dgate, float* dup, const float* dout, const float* gate,
                         const float* up, long n) {
  HONE_ENTRY(c);
  if (n == 0) return 0;
  HONE_LAUNCH(swiglu_backward_kernel, grid_for(n, 256), 256, 0, c->stream, dgate, dup, dout, gate, up, n);
  return check_launch(c, "swiglu_backward");
}

int hone_adamw(hone_ctx* c, float* p, const float* g, float* m, float* v, long n, float lr, float beta1,
               float beta2, float eps, float wd, int step) {
  HONE_ENTRY(c);
  if (n == 0) return 0;
  const double bc1 = 1.0 - pow(double(beta1), step), bc2 = 1.0 - pow(double(beta2), step);
  const float step_size = float(double(lr) / bc1), sqrt_bc2 = float(sqrt(bc2)), decay = 1.0f - lr * wd;
  HONE_LAUNCH(adamw_kernel, grid_for(n, 256), 256, 0, c->stream, p, g, m, v, n, beta1, beta2, eps, decay, step_size,
              sqrt_bc2);
  return check_launch(c, "adamw");
}

}  // extern "C"
