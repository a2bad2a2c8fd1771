// The optimizer's passes over the flat parameter buffer: the squared
// gradient norm for clipping and the AdamW update (Loshchilov & Hutter
// 2019, Algorithm 2, with bias-corrected moments as in Kingma & Ba 2015),
// each one vectorized pass per run of parameters that share a treatment,
// instead of a per-element test of flags.
#pragma once

#include <cstddef>
#include <vector>

namespace strata::train {

// [begin, end) of this rank's optimizer range (indices relative to its
// first element) whose parameters all do (or do not) take weight decay and
// do (or do not) count in the gradient norm.
struct AdamSegment {
  size_t begin = 0, end = 0;
  bool decay = false;    // 2-D weights
  bool counted = false;  // counted once in the global norm
};

// sum of g[i]^2 over the counted segments, accumulated in double.
double SquaredNorm(const float* g, const std::vector<AdamSegment>& segments);

struct AdamWStep {
  float coef = 1;  // gradient scale from clipping
  float lr = 0, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0;
  float bc1 = 1, bc2 = 1;  // 1 - beta^t
};

// For every segment element i: gi = coef g[i];
// m = b1 m + (1 - b1) gi; v = b2 v + (1 - b2) gi^2;
// w -= lr ((m / bc1) / (sqrt(v / bc2) + eps) + [decay] wd w).
// Returns false when an updated weight is NaN or Inf.
bool AdamWUpdate(const AdamWStep& s, const std::vector<AdamSegment>& segments,
                 const float* g, float* m, float* v, float* w);

}  // namespace strata::train
