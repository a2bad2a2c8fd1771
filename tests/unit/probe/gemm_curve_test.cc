// The probe's GEMM size curve fit (topology/probe/gemm_curve.h): recovers a
// known curve, keeps a flat one at the lower bound, rejects bad input.
#include "topology/probe/gemm_curve.h"

#include <gtest/gtest.h>

namespace strata::probe {
namespace {

std::vector<GemmRate> Curve(double half_dim, double peak) {
  std::vector<GemmRate> rates;
  for (int d : {16, 32, 64, 128, 256, 512}) {
    const double f = d / (d + half_dim);
    rates.push_back({d, peak * f * f * f});
  }
  return rates;
}

TEST(GemmCurveTest, RecoversAKnownCurve) {
  for (double hd : {2.0, 24.0, 128.0}) {
    auto fit = FitGemmCurve(Curve(hd, 100));
    ASSERT_TRUE(fit.ok()) << fit.status();
    EXPECT_NEAR(fit->half_dim / hd, 1.0, 0.01) << hd;  // the grid's step
    EXPECT_NEAR(fit->peak_gflops / 100, 1.0, 0.02) << hd;
  }
}

TEST(GemmCurveTest, NoisyRatesStayNearTheCurve) {
  // +-5% alternating noise on a GPU-like curve (half-dimension 128).
  std::vector<GemmRate> rates = Curve(128, 300);
  for (size_t i = 0; i < rates.size(); ++i) {
    rates[i].gflops *= i % 2 == 0 ? 1.05 : 0.95;
  }
  auto fit = FitGemmCurve(rates);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_GT(fit->half_dim, 100);
  EXPECT_LT(fit->half_dim, 160);
}

TEST(GemmCurveTest, AFlatCurveHasTheSmallestHalfDim) {
  // A CPU whose small GEMMs are as fast as large ones.
  std::vector<GemmRate> flat;
  for (int d : {16, 64, 512}) flat.push_back({d, 110});
  auto fit = FitGemmCurve(flat);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_DOUBLE_EQ(fit->half_dim, kMinHalfDim);
  EXPECT_NEAR(fit->peak_gflops, 110, 3);
}

TEST(GemmCurveTest, BadInputIsInvalidArgument) {
  EXPECT_EQ(FitGemmCurve({{64, 100}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FitGemmCurve({{64, 100}, {64, 90}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto bad = FitGemmCurve({{64, 100}, {128, 0}});
  ASSERT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.status().message()).find("GEMM rate 1"),
            std::string::npos);
}

}  // namespace
}  // namespace strata::probe
