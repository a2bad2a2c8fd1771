// strata-train on a checkpoint disk that fills up: every save fails with
// ENOSPC, and after --ckpt-max-failures (default 3) in a row the run stops
// with exit 1 and a message naming the location, the error and the free
// space, instead of training on with no checkpoint. A small tmpfs is the
// disk (root only; skipped when mount is not permitted).
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/fault/train/train_process.h"

namespace {

using strata::testing::RunTrainFor;
using strata::testing::TrainRun;

class TrainCkptDiskFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = "/tmp/strata-train-fault-tmpfs-" + std::to_string(getpid());
    std::filesystem::create_directories(dir_);
    if (mount("tmpfs", dir_.c_str(), "tmpfs", 0, "size=4m") != 0) {
      std::filesystem::remove_all(dir_);
      GTEST_SKIP() << "cannot mount a tmpfs (not root?)";
    }
    mounted_ = true;
  }
  void TearDown() override {
    if (mounted_) umount2(dir_.c_str(), MNT_DETACH);
    std::filesystem::remove_all(dir_);
  }
  // Leaves about `keep_kib` KiB free on the tmpfs.
  void Fill(int keep_kib) {
    std::ofstream f(dir_ + "/filler", std::ios::binary);
    const std::string block(1024, 'x');
    for (int i = 0; i < 4096 - keep_kib; ++i) f << block;
  }
  std::string dir_;
  bool mounted_ = false;
};

TEST_F(TrainCkptDiskFaultTest, FullDiskStopsAfterThreeFailedSaves) {
  Fill(512);  // a tiny checkpoint needs ~2.7 MB
  TrainRun r = RunTrainFor("--model tiny --steps 30 --ckpt-every 1 --ckpt "
                           "file://" + dir_ + "/ckpt",
                           "", 60);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("3 checkpoint saves in a row failed at file://" + dir_ +
                       "/ckpt"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("--ckpt-max-failures 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("No space left on device"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("MiB free of 4.0 MiB"), std::string::npos) << r.out;
  // Saves 1, 2, 3 failed; the third is known at step 4's save.
  EXPECT_NE(r.out.find("step=3 "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("step=4 "), std::string::npos) << r.out;
}

}  // namespace
