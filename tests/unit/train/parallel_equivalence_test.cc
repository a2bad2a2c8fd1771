// "Numerical equivalence": for every (tp, pp, dp) with product <= 8
// on `tiny` (powers of two: tp | 8 heads, pp | 8 layers, dp | batch 8), the
// loss of the first 20 steps matches the serial run within 1e-4 relative,
// with and without ZeRO-1. Ranks are threads over in-process transports.
#include <gtest/gtest.h>

#include <cmath>

#include "train/thread_ranks.h"

extern "C" void openblas_set_num_threads(int);

namespace strata::train {
namespace {

constexpr int kSteps = 20;
constexpr double kRelTol = 1e-4;

TrainOptions Tiny() {
  openblas_set_num_threads(1);
  TrainOptions o;
  o.model = *ModelPreset("tiny");
  o.global_batch = 8;
  o.micro_batch = 1;
  return o;
}

const std::vector<double>& Serial() {
  static const std::vector<double> losses = [] {
    ThreadRun r = RunThreads(Tiny(), 1, 1, 1, kSteps);
    EXPECT_TRUE(r.status.ok()) << r.status;
    return r.losses;
  }();
  return losses;
}

struct Split {
  int tp, pp, dp;
  bool zero1;
};

class EquivalenceTest : public ::testing::TestWithParam<Split> {};

TEST_P(EquivalenceTest, First20LossesMatchSerial) {
  const Split s = GetParam();
  const auto& serial = Serial();
  ASSERT_EQ(serial.size(), static_cast<size_t>(kSteps));
  EXPECT_LT(serial.back(), serial.front());  // it learns
  TrainOptions o = Tiny();
  o.zero1 = s.zero1;
  ThreadRun r = RunThreads(o, s.tp, s.pp, s.dp, kSteps);
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.losses.size(), serial.size());
  for (int i = 0; i < kSteps; ++i) {
    EXPECT_NEAR(r.losses[i], serial[i], kRelTol * std::abs(serial[i]))
        << "step " << i + 1;
  }
}

std::vector<Split> AllSplits() {
  std::vector<Split> out;
  for (int tp : {1, 2, 4, 8}) {
    for (int pp : {1, 2, 4, 8}) {
      for (int dp : {1, 2, 4, 8}) {
        if (tp * pp * dp > 8 || tp * pp * dp == 1) continue;
        out.push_back({tp, pp, dp, false});
        if (dp > 1) out.push_back({tp, pp, dp, true});
      }
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllSplits, EquivalenceTest,
                         ::testing::ValuesIn(AllSplits()),
                         [](const ::testing::TestParamInfo<Split>& info) {
                           const Split& s = info.param;
                           return "tp" + std::to_string(s.tp) + "_pp" +
                                  std::to_string(s.pp) + "_dp" +
                                  std::to_string(s.dp) +
                                  (s.zero1 ? "_zero1" : "");
                         });

TEST(EquivalenceTest, MicroBatchesOfTwoMatchToo) {
  TrainOptions o = Tiny();
  o.micro_batch = 2;
  ThreadRun r = RunThreads(o, 2, 2, 2, kSteps);
  ASSERT_TRUE(r.status.ok()) << r.status;
  const auto& serial = Serial();
  for (int i = 0; i < kSteps; ++i) {
    EXPECT_NEAR(r.losses[i], serial[i], kRelTol * std::abs(serial[i]));
  }
}

// Over the shm transport (strata-bench train's, thread_ranks.h): the shared
// all-reduce and the shm rings give the same model as the serial run.
TEST(EquivalenceTest, OverShmMatchesToo) {
  for (auto [tp, pp, dp] : {std::tuple{1, 1, 4}, std::tuple{2, 2, 1}}) {
    ThreadRun r = RunThreads(Tiny(), tp, pp, dp, kSteps, /*resume=*/false,
                             ThreadTransport::kShm);
    ASSERT_TRUE(r.status.ok()) << r.status;
    const auto& serial = Serial();
    for (int i = 0; i < kSteps; ++i) {
      EXPECT_NEAR(r.losses[i], serial[i], kRelTol * std::abs(serial[i]))
          << "tp " << tp << " pp " << pp << " dp " << dp << " step " << i + 1;
    }
  }
}

// Uneven pipeline splits (a slow node's stage holding fewer layers) compute
// the same model.
TEST(EquivalenceTest, UnevenStageLayersMatchToo) {
  for (std::vector<int> split :
       {std::vector<int>{6, 2}, {2, 6}, std::vector<int>{4, 2, 2}}) {
    TrainOptions o = Tiny();
    o.par.stage_layers = split;
    ThreadRun r = RunThreads(o, 1, static_cast<int>(split.size()), 2, kSteps);
    ASSERT_TRUE(r.status.ok()) << r.status;
    const auto& serial = Serial();
    for (int i = 0; i < kSteps; ++i) {
      EXPECT_NEAR(r.losses[i], serial[i], kRelTol * std::abs(serial[i]))
          << "split " << split[0] << " step " << i + 1;
    }
  }
}

TEST(EquivalenceTest, ImpossibleSplitsAreRejected) {
  TrainOptions o = Tiny();
  Parallel p;
  p.tp = 3;
  EXPECT_EQ(ValidateSplit(o.model, p, 8, 1).code(),
            absl::StatusCode::kInvalidArgument);
  p = Parallel();
  p.pp = 3;
  EXPECT_NE(ValidateSplit(o.model, p, 8, 1).message().find("layers"),
            std::string::npos);
  p = Parallel();
  p.dp = 3;
  EXPECT_NE(ValidateSplit(o.model, p, 8, 1).message().find("global-batch"),
            std::string::npos);
  for (std::vector<int> bad : {std::vector<int>{8, 0}, {4, 3}, {3, 3, 2}}) {
    p = Parallel();
    p.pp = 2;
    p.stage_layers = bad;
    EXPECT_NE(
        ValidateSplit(o.model, p, 8, 1).message().find("layers per stage"),
        std::string::npos);
  }
}

}  // namespace
}  // namespace strata::train
