// Checkpoints on a full disk (a real tmpfs): every save fails with a Status
// that names the place and the free space, nothing aborts, the previous
// committed step stays intact, the catalog never loses a commit, and saving
// works again once space returns — for file:// and rocksdb://.
#include <string>
#include <vector>

#include "checkpoint/catalog.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/reader.h"
#include "gtest/gtest.h"
#include "tests/fault/checkpoint/tmpfs.h"

namespace strata::checkpoint {
namespace {

class EnospcTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    fs_ = std::make_unique<fault::SmallTmpfs>(8 << 20);
    if (!fs_->ok()) GTEST_SKIP() << "cannot mount a tmpfs here";
    uri_ = GetParam() + fs_->dir() + "/ckpt";
  }
  CheckpointOptions Options() {
    CheckpointOptions o;
    o.uri = uri_;
    o.store = comm::NewInMemoryStore();
    o.default_catalog = true;
    o.job = "j";
    o.keep_last = 2;
    return o;
  }
  Status Save(Checkpointer& ckpt, int64_t step, size_t floats) {
    w_.assign(floats, static_cast<float>(step));
    ShardedTensor t{"w",
                    DType::kF32,
                    {static_cast<int64_t>(floats)},
                    {static_cast<int64_t>(floats)},
                    {0},
                    0,
                    1,
                    w_.data()};
    ASSIGN_OR_RETURN(SaveHandle h, ckpt.SaveAsync(step, {t}, {}));
    return h.Wait();
  }

  std::unique_ptr<fault::SmallTmpfs> fs_;
  std::string uri_;
  std::vector<float> w_;
};

TEST_P(EnospcTest, FullDiskFailsSavesCleanlyAndRecovers) {
  constexpr size_t kFloats = 256 << 10;  // 1 MiB
  {
    Checkpointer ckpt(Options());
    ASSERT_TRUE(Save(ckpt, 1, kFloats).ok());
    fs_->Fill(256 << 10);
    for (int64_t step = 2; step <= 8; ++step) {
      Status st = Save(ckpt, step, kFloats);
      ASSERT_FALSE(st.ok()) << "step " << step;
      EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
      EXPECT_NE(st.message().find(fs_->dir()), std::string::npos) << st;
      EXPECT_NE(st.message().find("MiB free of"), std::string::npos) << st;
      // Wait() reports the failure once; Poll() finds nothing new after it.
      EXPECT_FALSE(ckpt.Wait().ok());
      EXPECT_TRUE(ckpt.Poll().ok());
      EXPECT_EQ(ckpt.consecutive_failures(), step - 1);
    }
    EXPECT_EQ(*ListSteps(uri_), std::vector<int64_t>{1});
    EXPECT_TRUE(Verify(uri_, 1).ok());
    fs_->Free();
    Status st = Save(ckpt, 9, kFloats);
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_EQ(ckpt.consecutive_failures(), 0);
    ASSERT_TRUE(Save(ckpt, 10, kFloats).ok());
  }
  EXPECT_EQ(*ListSteps(uri_), (std::vector<int64_t>{9, 10}));
  Status verified = Verify(uri_, 10);
  EXPECT_TRUE(verified.ok()) << verified;
  auto catalog = Catalog::Open(DefaultCatalogPath(uri_));
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  EXPECT_EQ(*(*catalog)->Latest("j"), 10);
  EXPECT_EQ(*(*catalog)->Steps("j"), (std::vector<int64_t>{9, 10}));
}

// A new checkpointer (a resumed run) on the still-full disk: saves fail
// cleanly, nothing aborts, and a run after space returns ends without error.
TEST_P(EnospcTest, ResumedRunsOnAFullDiskDoNotAbort) {
  constexpr size_t kFloats = 256 << 10;
  {
    Checkpointer ckpt(Options());
    ASSERT_TRUE(Save(ckpt, 1, kFloats).ok());
  }
  fs_->Fill(128 << 10);
  for (int run = 0; run < 3; ++run) {
    Checkpointer ckpt(Options());
    EXPECT_EQ(*LatestStep(uri_), 1);  // what a resume reads
    for (int64_t step = 2 + run * 2; step < 4 + run * 2; ++step) {
      EXPECT_FALSE(Save(ckpt, step, kFloats).ok());
    }
  }
  fs_->Free();
  {
    Checkpointer ckpt(Options());
    for (int64_t step = 10; step <= 12; ++step) {
      Status st = Save(ckpt, step, kFloats);
      ASSERT_TRUE(st.ok()) << st;
    }
    EXPECT_TRUE(ckpt.Wait().ok());
  }
  EXPECT_EQ(*ListSteps(uri_), (std::vector<int64_t>{11, 12}));
}

// Retention frees the disk: 30 saves of 1 MiB with keep_last 2 on an 8 MiB
// file system all succeed (rocksdb:// once kept every removed step's
// values in its WAL and blob files).
TEST_P(EnospcTest, RetentionFreesTheSpaceOfRemovedSteps) {
  Checkpointer ckpt(Options());
  for (int64_t step = 1; step <= 30; ++step) {
    Status st = Save(ckpt, step, 256 << 10);
    ASSERT_TRUE(st.ok()) << "step " << step << ": " << st;
  }
  EXPECT_EQ(*ListSteps(uri_), (std::vector<int64_t>{29, 30}));
  EXPECT_GT(fs_->FreeBytes(), 3u << 20);
  for (int64_t step : {29, 30}) {
    Status verified = Verify(uri_, step);
    EXPECT_TRUE(verified.ok()) << verified;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, EnospcTest,
                         ::testing::Values("file://", "rocksdb://"),
                         [](const auto& info) {
                           return std::string(
                               info.param == "file://" ? "File" : "RocksDb");
                         });

}  // namespace
}  // namespace strata::checkpoint
