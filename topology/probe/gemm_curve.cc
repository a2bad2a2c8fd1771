#include "topology/probe/gemm_curve.h"

#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"

namespace strata::probe {

StatusOr<GemmCurve> FitGemmCurve(const std::vector<GemmRate>& rates) {
  std::set<int> dims;
  for (size_t i = 0; i < rates.size(); ++i) {
    if (rates[i].dim <= 0 || !(rates[i].gflops > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("GEMM rate ", i, ": dim ", rates[i].dim, ", ",
                       rates[i].gflops, " GFLOP/s; both must be positive"));
    }
    dims.insert(rates[i].dim);
  }
  if (dims.size() < 2) {
    return absl::InvalidArgumentError(
        "GEMM rates: need at least two distinct sizes to fit the size curve");
  }
  const double n = static_cast<double>(rates.size());
  GemmCurve best;
  double best_sse = INFINITY;
  for (double hd = kMinHalfDim; hd <= kMaxHalfDim * 1.0001; hd *= 1.01) {
    double sum = 0, sum2 = 0;
    for (const GemmRate& r : rates) {
      const double res =
          std::log(r.gflops) - 3 * std::log(r.dim / (r.dim + hd));
      sum += res;
      sum2 += res * res;
    }
    const double sse = sum2 - sum * sum / n;  // around the mean log peak
    if (sse < best_sse) {
      best_sse = sse;
      best.half_dim = hd;
      best.peak_gflops = std::exp(sum / n);
    }
  }
  return best;
}

}  // namespace strata::probe
