// LayerNorm (Ba et al. 2016) over the last dimension, forward and
// backward, as declared in ops.h. Per row: mean and variance in two passes
// (no E[x^2] - E[x]^2 cancellation), summed in kLanes float lanes (for
// h = 320 each lane adds 20 values); eps 1e-5 as GPT-2 and PyTorch.
//
// Backward, with xhat = (x - mean) rstd and dxhat = dy .* g:
// dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat .* xhat)),
// dg += dy .* xhat, db += dy.
#include <cmath>
#include <cstdint>

#include "train/ops.h"
#include "train/vec_math.h"

namespace strata::train {
namespace {

constexpr float kLayerNormEps = 1e-5f;  // GPT-2 / PyTorch default

STRATA_INLINE float Sum(const float* x, int n) {
  float lanes[kLanes] = {};
  int j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += x[j + l];
  }
  float s = 0;
  for (; j < n; ++j) s += x[j];
  for (int l = 0; l < kLanes; ++l) s += lanes[l];
  return s;
}

STRATA_INLINE float SumSqDev(const float* x, int n, float m) {
  float lanes[kLanes] = {};
  int j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const float e = x[j + l] - m;
      lanes[l] += e * e;
    }
  }
  float s = 0;
  for (; j < n; ++j) s += (x[j] - m) * (x[j] - m);
  for (int l = 0; l < kLanes; ++l) s += lanes[l];
  return s;
}

}  // namespace

STRATA_KERNEL
void LayerNorm(const float* x, const float* g, const float* b, int t, int h,
               float* y, float* mean, float* rstd) {
  for (int i = 0; i < t; ++i) {
    const float* xi = x + static_cast<int64_t>(i) * h;
    float* yi = y + static_cast<int64_t>(i) * h;
    const float m = Sum(xi, h) / static_cast<float>(h);
    const float v = SumSqDev(xi, h, m) / static_cast<float>(h);
    const float r = 1.0f / std::sqrt(v + kLayerNormEps);
    for (int j = 0; j < h; ++j) yi[j] = (xi[j] - m) * r * g[j] + b[j];
    mean[i] = m;
    rstd[i] = r;
  }
}

STRATA_KERNEL
void LayerNormBackward(const float* x, const float* g, const float* mean,
                       const float* rstd, const float* dy, int t, int h,
                       float* dx, float* dg, float* db) {
  for (int i = 0; i < t; ++i) {
    const float* xi = x + static_cast<int64_t>(i) * h;
    const float* dyi = dy + static_cast<int64_t>(i) * h;
    float* dxi = dx + static_cast<int64_t>(i) * h;
    const float m = mean[i], r = rstd[i];
    float l1[kLanes] = {}, l2[kLanes] = {};
    int j = 0;
    for (; j + kLanes <= h; j += kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        const float xhat = (xi[j + l] - m) * r;
        const float dxhat = dyi[j + l] * g[j + l];
        l1[l] += dxhat;
        l2[l] += dxhat * xhat;
      }
    }
    float s1 = 0, s2 = 0;
    for (; j < h; ++j) {
      const float xhat = (xi[j] - m) * r;
      const float dxhat = dyi[j] * g[j];
      s1 += dxhat;
      s2 += dxhat * xhat;
    }
    for (int l = 0; l < kLanes; ++l) s1 += l1[l], s2 += l2[l];
    const float a = s1 / static_cast<float>(h);
    const float c = s2 / static_cast<float>(h);
    for (int j2 = 0; j2 < h; ++j2) {
      const float xhat = (xi[j2] - m) * r;
      dg[j2] += dyi[j2] * xhat;
      db[j2] += dyi[j2];
      dxi[j2] = r * (dyi[j2] * g[j2] - a - xhat * c);
    }
  }
}

}  // namespace strata::train
