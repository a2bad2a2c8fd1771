// strata-train on a checkpoint disk that fills up: every save fails with
// ENOSPC, and after --ckpt-max-failures (default 3) in a row the run stops
// with exit 1 and a message naming the location, the error and the free
// space, instead of training on with no checkpoint. A small tmpfs is the
// disk (root only; skipped when mount is not permitted). Saves that fail
// for a while (EIO injected by libstrata_failio.so) and then succeed again
// reset the count: the run finishes with exit 0.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "checkpoint/checkpointer.h"
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
  TrainRun r = RunTrainFor(
      "--model tiny --steps 30 --ckpt-every 1 --ckpt "
      "file://" +
          dir_ + "/ckpt",
      "", 60);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("3 checkpoint saves in a row failed at file://" + dir_ +
                       "/ckpt"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("--ckpt-max-failures 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("No space left on device"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("MiB free of 4.0 MiB"), std::string::npos) << r.out;
  // Saves 1, 2, 3 failed; the third is known at step 4's save.
  EXPECT_NE(r.out.find("step=3 "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("step=4 "), std::string::npos) << r.out;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(TrainCkptEioFaultTest, SavesFailingForAWhileDoNotStopTheRun) {
  const char* lib = std::getenv("STRATA_FAILIO_LIB");
  if (lib == nullptr) GTEST_SKIP() << "STRATA_FAILIO_LIB not set";
  const std::string base =
      "/tmp/strata-train-fault-eio-" + std::to_string(getpid());
  std::filesystem::remove_all(base);
  std::filesystem::create_directories(base);
  const std::string ckpt = base + "/ckpt", trigger = base + "/trigger",
                    log = base + "/log";
  // The fault starts once training does (the start check must pass) and
  // ends after two failed saves in a row.
  std::thread fault([&] {
    for (int i = 0; i < 3000; ++i) {
      const std::string out = ReadAll(log);
      if (out.find("(2 in a row") != std::string::npos) {
        std::filesystem::remove(trigger);
        return;
      }
      if (out.find("model=") != std::string::npos &&
          !std::filesystem::exists(trigger)) {
        std::ofstream(trigger) << "on";
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  TrainRun r = RunTrainFor(
      "--model tiny --steps 12 --global-batch 32 --ckpt-every 1 "
      "--ckpt-max-failures 5 --ckpt file://" +
          ckpt + " > " + log,
      "LD_PRELOAD=" + std::string(lib) + " STRATA_FAILIO_PATH=" + ckpt +
          " STRATA_FAILIO_ERRNO=EIO STRATA_FAILIO_TRIGGER=" + trigger,
      120);
  fault.join();
  const std::string out = ReadAll(log);
  EXPECT_EQ(r.code, 0) << out;
  EXPECT_NE(out.find("(2 in a row, stopping at 5)"), std::string::npos) << out;
  EXPECT_NE(out.find("Input/output error"), std::string::npos) << out;
  EXPECT_EQ(out.find("saves in a row failed"), std::string::npos) << out;
  EXPECT_NE(out.find("done steps=12"), std::string::npos) << out;
  auto latest = strata::checkpoint::LatestStep("file://" + ckpt);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, 12);
  std::filesystem::remove_all(base);
}

}  // namespace
