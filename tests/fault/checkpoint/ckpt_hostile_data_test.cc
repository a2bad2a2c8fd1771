// Damaged and hostile checkpoint directories, through the library and the
// `strata ckpt` commands: empty or tensor-less manifests and truncated data
// are never taken for checkpoints (verify/export/inspect exit 2, resume
// falls back, gc keeps the newest verifiable step), names from a manifest
// never leave the step directory, and no command follows a symlinked step.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint/checkpointer.h"
#include "checkpoint/reader.h"
#include "gtest/gtest.h"
#include "tests/integration/cli/run_command.h"

namespace strata::checkpoint {
namespace {

namespace fs = std::filesystem;
using strata::testing::RunResult;
using strata::testing::RunStrata;

class HostileDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/ckpt_hostile_XXXXXX";
    root_ = mkdtemp(tmpl.data());
    dir_ = root_ + "/ckpt";
  }
  void TearDown() override { fs::remove_all(root_); }

  // Saves steps with "w" = the step number everywhere.
  void Save(const std::vector<int64_t>& steps) {
    CheckpointOptions o;
    o.uri = dir_;
    o.store = comm::NewInMemoryStore();
    Checkpointer ckpt(o);
    for (int64_t step : steps) {
      std::vector<float> w(4096, static_cast<float>(step));
      ShardedTensor t{"w", DType::kF32, {4096}, {4096}, {0}, 0, 1, w.data()};
      ASSERT_TRUE(ckpt.SaveAsync(step, {t}, {Blob{"step", false, "x"}}).ok());
      ASSERT_TRUE(ckpt.Wait().ok());
    }
  }
  std::string StepPath(int64_t step) { return StepDir(dir_, step); }

  std::string root_, dir_;
};

TEST_F(HostileDataTest, EmptyManifestIsNotACheckpoint) {
  Save({1, 2});
  std::ofstream(StepPath(2) + "/manifest.pb", std::ios::trunc).close();
  // Resume falls back to the newest step that checks out.
  EXPECT_EQ(*LatestStep(dir_), 1);
  EXPECT_EQ(ReadManifest(dir_, 2).status().code(),
            absl::StatusCode::kDataLoss);
  RunResult verify = RunStrata("ckpt verify " + dir_ + " --step 2");
  EXPECT_EQ(verify.code, 2) << verify.out;
  EXPECT_NE(verify.out.find("empty"), std::string::npos) << verify.out;
  // Without --step, verify looks at the newest step as it is.
  EXPECT_EQ(RunStrata("ckpt verify " + dir_).code, 2);
  EXPECT_EQ(RunStrata("ckpt inspect " + dir_ + " --step 2").code, 2);
  const std::string out = root_ + "/out.safetensors";
  RunResult exp = RunStrata("ckpt export " + dir_ + " --step 2 --out " + out);
  EXPECT_EQ(exp.code, 2) << exp.out;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  // Export of the newest usable step skips the empty one.
  exp = RunStrata("ckpt export " + dir_ + " --out " + out);
  EXPECT_EQ(exp.code, 0) << exp.out;
  EXPECT_NE(exp.out.find("step 1"), std::string::npos) << exp.out;
  // gc keeps the newest verifiable step, not the empty one.
  RunResult gc = RunStrata("ckpt gc " + dir_ + " --keep 1");
  EXPECT_EQ(gc.code, 0) << gc.out;
  EXPECT_TRUE(Verify(dir_, 1).ok());
}

TEST_F(HostileDataTest, TruncatedDataFallsBackAndSurvivesGc) {
  Save({1, 2});
  fs::resize_file(StepPath(2) + "/rank-00000.data", 100);
  EXPECT_EQ(*LatestStep(dir_), 1);
  RunResult gc = RunStrata("ckpt gc " + dir_ + " --keep 1");
  EXPECT_EQ(gc.code, 0) << gc.out;
  EXPECT_TRUE(Verify(dir_, 1).ok());
  EXPECT_EQ(RunStrata("ckpt verify " + dir_ + " --step 2").code, 2);
}

TEST_F(HostileDataTest, ManifestWithoutTensorsIsNeverCommitted) {
  CheckpointOptions o;
  o.uri = dir_;
  o.store = comm::NewInMemoryStore();
  Checkpointer ckpt(o);
  auto h = ckpt.SaveAsync(1, {}, {Blob{"step", false, "1"}});
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->Wait().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ListSteps(dir_)->empty());
}

TEST_F(HostileDataTest, ManifestNamesNeverLeaveTheStepDirectory) {
  Save({1, 2});
  // A manifest of step 2 whose chunk points at a valid data file outside
  // the checkpoint: old code verified and exported it.
  fs::create_directories(root_ + "/outside");
  fs::copy_file(StepPath(2) + "/rank-00000.data",
                root_ + "/outside/secret.data");
  auto m = ReadManifest(dir_, 2);
  ASSERT_TRUE(m.ok()) << m.status();
  m->mutable_tensors(0)->mutable_chunks(0)->set_file(
      "../../outside/secret.data");
  std::ofstream(StepPath(2) + "/manifest.pb", std::ios::trunc)
      << m->SerializeAsString();
  EXPECT_EQ(ReadManifest(dir_, 2).status().code(),
            absl::StatusCode::kDataLoss);
  RunResult verify = RunStrata("ckpt verify " + dir_ + " --step 2");
  EXPECT_EQ(verify.code, 2) << verify.out;
  EXPECT_NE(verify.out.find("not a file of the step directory"),
            std::string::npos)
      << verify.out;
  const std::string out = root_ + "/out.safetensors";
  EXPECT_EQ(RunStrata("ckpt export " + dir_ + " --step 2 --out " + out).code,
            2);
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(*LatestStep(dir_), 1);
}

TEST_F(HostileDataTest, SymlinkedStepIsNeitherReadNorDeleted) {
  Save({1, 2});
  // A copy of step 2 outside the checkpoint, linked in as step 9.
  const std::string outside = root_ + "/outside-step";
  fs::copy(StepPath(2), outside);
  fs::create_directory_symlink(outside, StepPath(9));
  EXPECT_EQ(*ListSteps(dir_), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(RunStrata("ckpt verify " + dir_ + " --step 9").code, 2);
  RunResult gc = RunStrata("ckpt gc " + dir_ + " --keep 1");
  EXPECT_EQ(gc.code, 0) << gc.out;
  EXPECT_TRUE(fs::exists(outside + "/manifest.pb"));
  EXPECT_TRUE(fs::exists(outside + "/rank-00000.data"));
  // A symlinked data file inside a real step is not followed either.
  fs::remove(StepPath(2) + "/rank-00000.data");
  fs::create_symlink(outside + "/rank-00000.data",
                     StepPath(2) + "/rank-00000.data");
  Status st = Verify(dir_, 2);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  // And retention removing a step with a symlink removes only the link.
  std::error_code ec;
  auto storage = OpenStorage(dir_, 0, true);
  ASSERT_TRUE((*storage)->RemoveStep(2).ok());
  EXPECT_TRUE(fs::exists(outside + "/rank-00000.data"));
}

TEST_F(HostileDataTest, ExitCodesAreConsistent) {
  Save({1});
  EXPECT_EQ(RunStrata("ckpt inspect " + dir_ + " --step 7").code, 2);
  EXPECT_EQ(RunStrata("ckpt verify " + dir_ + " --step 7").code, 2);
  EXPECT_EQ(RunStrata("ckpt export " + dir_ + " --step 7 --out " + root_ +
                      "/x.safetensors")
                .code,
            2);
  EXPECT_EQ(RunStrata("ckpt ls " + root_ + "/nonexistent").code, 2);
  EXPECT_EQ(RunStrata("ckpt verify " + root_ + "/nonexistent").code, 2);
  EXPECT_EQ(RunStrata("ckpt gc " + root_ + "/nonexistent").code, 2);
  // The operation failing (the output cannot replace a directory) is 1.
  fs::create_directories(root_ + "/taken/sub");
  RunResult exp = RunStrata("ckpt export " + dir_ + " --out " + root_ + "/taken");
  EXPECT_EQ(exp.code, 1) << exp.out;
  EXPECT_FALSE(fs::exists(root_ + "/taken.tmp"));
}

}  // namespace
}  // namespace strata::checkpoint
