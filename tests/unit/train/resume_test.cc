// "Resume under different parallelism": train 40 steps at
// (tp, pp, dp) = (2, 2, 1) checkpointing every 20; resume from the step-20
// checkpoint at (1, 1, 4) and at (4, 1, 1), also with ZeRO-1: steps 21-40
// match the uninterrupted run within 1e-4 relative. Both storage backends.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "train/thread_ranks.h"

extern "C" void openblas_set_num_threads(int);

namespace strata::train {
namespace {

class ResumeTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    openblas_set_num_threads(1);
    dir_ = std::filesystem::temp_directory_path() /
           ("strata-resume-" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  TrainOptions Options(const std::string& name) {
    TrainOptions o;
    o.model = *ModelPreset("tiny");
    o.global_batch = 8;
    o.ckpt_uri = std::string(GetParam()) + (dir_ / name).string();
    o.ckpt_every = 20;
    return o;
  }
  std::filesystem::path dir_;
};

TEST_P(ResumeTest, StepsAfterResumeMatchUninterruptedRun) {
  ThreadRun full = RunThreads(Options("full"), 2, 2, 1, 40);
  ASSERT_TRUE(full.status.ok()) << full.status;
  ASSERT_EQ(full.losses.size(), 40u);

  TrainOptions first = Options("split");
  ThreadRun head = RunThreads(first, 2, 2, 1, 20);
  ASSERT_TRUE(head.status.ok()) << head.status;
  for (int i = 0; i < 20; ++i) EXPECT_DOUBLE_EQ(head.losses[i], full.losses[i]);

  struct Layout {
    int tp, pp, dp;
    bool zero1;
  };
  for (Layout l : {Layout{1, 1, 4, false}, Layout{4, 1, 1, false},
                   Layout{1, 2, 2, true}}) {
    SCOPED_TRACE(testing::Message() << "resume at tp=" << l.tp << " pp=" << l.pp
                                    << " dp=" << l.dp << " zero1=" << l.zero1);
    TrainOptions o = first;
    o.zero1 = l.zero1;
    o.ckpt_every = 0;  // keep the step-20 checkpoint the latest
    ThreadRun tail = RunThreads(o, l.tp, l.pp, l.dp, 40, /*resume=*/true);
    ASSERT_TRUE(tail.status.ok()) << tail.status;
    EXPECT_EQ(tail.resumed_at, 20);
    ASSERT_EQ(tail.losses.size(), 20u);
    for (int i = 0; i < 20; ++i) {
      EXPECT_NEAR(tail.losses[i], full.losses[20 + i],
                  1e-4 * std::abs(full.losses[20 + i]))
          << "step " << 21 + i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Storage, ResumeTest,
                         ::testing::Values("file://", "rocksdb://"),
                         [](const auto& info) {
                           return std::string(info.param).starts_with("file")
                                      ? "file"
                                      : "rocksdb";
                         });

}  // namespace
}  // namespace strata::train
