// strata-train refuses what it cannot do before it trains: a flag out of
// range, a --data that is a directory, checkpoint flags without a
// location, a location it cannot write (exit 2, one line naming the flag
// or path, no step run). A diverging run stops at the first non-finite
// step (or rolls back, by policy) and never commits its NaN state.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "checkpoint/checkpointer.h"
#include "tests/fault/train/train_process.h"

namespace {

using strata::testing::RunTrainFor;
using strata::testing::TrainRun;

std::string TempDir(const std::string& name) {
  const std::string d =
      "/tmp/strata-train-fault-" + name + "-" + std::to_string(getpid());
  std::filesystem::remove_all(d);
  return d;
}

TEST(TrainFlagsFaultTest, BadFlagsExitTwoBeforeTraining) {
  const std::string file = TempDir("file");
  std::ofstream(file) << "a file, not a directory";
  struct Case {
    std::string args, env, says;
  } cases[] = {
      {"--data /tmp --model small", "", "--data /tmp is a directory"},
      {"--ckpt-every 1", "", "--ckpt-every 1 but no checkpoint location"},
      {"--resume", "", "--resume but no checkpoint location"},
      {"--ckpt-every 1 --ckpt file://" + file + "/ckpt", "",
       "--ckpt file://" + file + "/ckpt: checkpoint location " + file +
           "/ckpt is not writable"},
      {"--ckpt-every 1", "STRATA_CKPT_URI=file://" + file + "/ckpt",
       "STRATA_CKPT_URI file://" + file + "/ckpt: checkpoint location"},
      {"--ckpt-every 1 --ckpt s3://bucket/x", "", "--ckpt: checkpoint URI"},
      {"--ckpt file:///tmp/x", "", "--ckpt file:///tmp/x is not used"},
      {"--ckpt-every 4 --ckpt /tmp/x", "",
       "--ckpt-every 4 is more than --steps 3: no checkpoint would be"},
      {"--lr nan", "", "--lr nan must be a finite number > 0"},
      {"--lr -1", "", "--lr"},
      {"--lr 1e40", "", "--lr inf must be a finite number > 0"},
      {"--steps 0", "", "--steps"},
      {"--micro-batch 100000 --global-batch 100000", "", "--micro-batch"},
      {"--ckpt-keep 0 --ckpt-every 1 --ckpt /tmp/x", "", "--ckpt-keep"},
      {"--ckpt-max-failures 0", "", "--ckpt-max-failures"},
      {"--on-nonfinite maybe", "", "--on-nonfinite"},
      {"--on-nonfinite rollback", "", "--on-nonfinite=rollback needs"},
  };
  for (const auto& c : cases) {
    TrainRun r = RunTrainFor("--model tiny --steps 3 " + c.args, c.env, 30);
    EXPECT_EQ(r.code, 2) << c.args << " -> " << r.out;
    EXPECT_NE(r.out.find(c.says), std::string::npos)
        << c.args << " -> " << r.out;
    EXPECT_EQ(r.out.find("step=1 "), std::string::npos)
        << c.args << " trained -> " << r.out;
  }
  std::filesystem::remove(file);
}

TEST(TrainFlagsFaultTest, NonFiniteStepStopsAndIsNeverCommitted) {
  const std::string dir = TempDir("nan");
  TrainRun r = RunTrainFor(
      "--model tiny --steps 6 --lr 1e30 --ckpt-every 1 --ckpt file://" + dir,
      "", 60);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("step 2 is not finite: loss"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("--on-nonfinite=stop"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("step=2 "), std::string::npos) << r.out;
  auto steps = strata::checkpoint::ListSteps("file://" + dir);
  ASSERT_TRUE(steps.ok()) << steps.status();
  EXPECT_EQ(*steps, std::vector<int64_t>({1}));  // the good step only
  std::filesystem::remove_all(dir);
}

TEST(TrainFlagsFaultTest, RollbackIsBoundedThenStops) {
  const std::string dir = TempDir("rollback");
  TrainRun r = RunTrainFor(
      "--model tiny --steps 6 --lr 1e30 --ckpt-every 1 --ckpt file://" + dir +
          " --on-nonfinite rollback --max-rollbacks 2",
      "", 60);
  EXPECT_EQ(r.code, 1) << r.out;
  // Training is deterministic: the same step diverges after each rollback.
  const std::string line = "rollback: step 2 loss=";
  size_t rollbacks = 0;
  for (size_t at = r.out.find(line); at != std::string::npos;
       at = r.out.find(line, at + 1)) {
    ++rollbacks;
  }
  EXPECT_EQ(rollbacks, 2u) << r.out;
  EXPECT_NE(r.out.find("stopping after 2 rollbacks"), std::string::npos)
      << r.out;
  auto steps = strata::checkpoint::ListSteps("file://" + dir);
  ASSERT_TRUE(steps.ok()) << steps.status();
  EXPECT_EQ(*steps, std::vector<int64_t>({1}));
  std::filesystem::remove_all(dir);
}

}  // namespace
