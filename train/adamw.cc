#include "train/adamw.h"

#include <cmath>
#include <cstdint>

#include "train/vec_math.h"

namespace strata::train {
namespace {

STRATA_KERNEL
double SumSquares(const float* g, size_t n) {
  double lanes[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) {
      const double x = g[i + l];
      lanes[l] += x * x;
    }
  }
  double s = 0;
  for (; i < n; ++i) s += static_cast<double>(g[i]) * g[i];
  for (int l = 0; l < 8; ++l) s += lanes[l];
  return s;
}

// Returns sum(w * 0) over the updated weights: NaN once one is NaN or Inf.
STRATA_KERNEL
float UpdateRun(const AdamWStep& s, float wd, const float* g, float* m,
                float* v, float* w, size_t n) {
  const float b1 = s.beta1, b2 = s.beta2, c1 = 1 - s.beta1, c2 = 1 - s.beta2;
  const float coef = s.coef, bc1 = s.bc1, bc2 = s.bc2, eps = s.eps, lr = s.lr;
  float check[kLanes] = {};
  size_t i = 0;
  auto one = [&](size_t j) {
    const float gi = g[j] * coef;
    m[j] = b1 * m[j] + c1 * gi;
    v[j] = b2 * v[j] + c2 * gi * gi;
    const float update = (m[j] / bc1) / (std::sqrt(v[j] / bc2) + eps);
    w[j] -= lr * (update + wd * w[j]);
    return w[j] * 0.0f;
  };
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) check[l] += one(i + l);
  }
  float c = 0;
  for (; i < n; ++i) c += one(i);
  for (int l = 0; l < kLanes; ++l) c += check[l];
  return c;
}

}  // namespace

double SquaredNorm(const float* g, const std::vector<AdamSegment>& segments) {
  double s = 0;
  for (const AdamSegment& seg : segments) {
    if (seg.counted) s += SumSquares(g + seg.begin, seg.end - seg.begin);
  }
  return s;
}

bool AdamWUpdate(const AdamWStep& s, const std::vector<AdamSegment>& segments,
                 const float* g, float* m, float* v, float* w) {
  float check = 0;
  for (const AdamSegment& seg : segments) {
    const size_t b = seg.begin;
    check += UpdateRun(s, seg.decay ? s.weight_decay : 0.0f, g + b, m + b,
                       v + b, w + b, seg.end - b);
  }
  return std::isfinite(check);
}

}  // namespace strata::train
