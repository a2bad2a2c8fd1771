// The GEMM size curve of the planner's cost model (CostModel::Gemm,
// docs/planner.md "Time per step"): a GEMM of m x n x k runs at
//   peak * (m / (m + half_dim)) * (n / (n + half_dim)) * (k / (k + half_dim)).
// The worker probe times SGEMM on cubes of several sizes and fits the curve,
// so a CPU device's size penalty is measured rather than the GPU default
// (tile quantisation, kGemmHalfDim = 128). Pure; thread-safe.
#pragma once

#include <vector>

#include "common/status.h"

namespace strata::probe {

// One measured rate: a d x d x d GEMM at `gflops`.
struct GemmRate {
  int dim = 0;
  double gflops = 0;
};

struct GemmCurve {
  double half_dim = 0;     // elements, in [kMinHalfDim, kMaxHalfDim]
  double peak_gflops = 0;  // the rate the curve tends to for large d
};

// Fitted half-dimensions are kept inside these bounds: below 0.25 the
// curve is flat to within 3% from d = 16 up, as flat as the probe can
// tell; above 4096 no GEMM of practical size would reach half its peak.
inline constexpr double kMinHalfDim = 0.25;
inline constexpr double kMaxHalfDim = 4096;

// Least squares in log rate: for a half-dimension the best log peak is the
// mean of log(rate) - 3 log(d / (d + half_dim)); the half-dimension is
// searched on a log grid (ratio 1.01) over the bounds. InvalidArgument
// (naming the entry) with fewer than two distinct sizes or a rate <= 0.
StatusOr<GemmCurve> FitGemmCurve(const std::vector<GemmRate>& rates);

}  // namespace strata::probe
