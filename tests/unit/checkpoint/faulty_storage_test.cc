// Injected storage faults never produce a committed partial checkpoint and
// never damage the previous one.
#include "checkpoint/testing/faulty_storage.h"

#include "checkpoint/checkpointer.h"
#include "checkpoint/reader.h"
#include "gtest/gtest.h"

namespace strata::checkpoint {
namespace {

using testing::FaultyStorage;

class FaultyStorageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/faulty_XXXXXX";
    dir_ = mkdtemp(tmpl.data());
    faulty_ = std::make_shared<FaultyStorage>(*OpenStorage(dir_, 0, true));
    CheckpointOptions o;
    o.uri = dir_;
    o.store = comm::NewInMemoryStore();
    o.storage = faulty_;
    ckpt_ = std::make_unique<Checkpointer>(o);
  }

  Status Save(int64_t step, float value) {
    w_.assign(1 << 14, value);
    ShardedTensor t{"w", DType::kF32, {1 << 14}, {1 << 14},
                    {0}, 0,           1,         w_.data()};
    ASSIGN_OR_RETURN(SaveHandle h,
                     ckpt_->SaveAsync(step, {t}, {Blob{"rng", true, "r"}}));
    // The save's handle and Wait() report the same result.
    const Status st = h.Wait();
    EXPECT_TRUE(h.done());
    EXPECT_EQ(h.step(), step);
    EXPECT_EQ(ckpt_->Wait(), st);
    return st;
  }

  // The value stored at step `step`, read through the faulty storage.
  float Stored(int64_t step) {
    std::vector<float> got(1 << 14, -1);
    ShardedTensor t{"w", DType::kF32, {1 << 14}, {1 << 14},
                    {0}, 0,           1,         got.data()};
    std::vector<ShardedTensor> targets = {t};
    Status st = Load(*faulty_, step, targets);
    EXPECT_TRUE(st.ok()) << st;
    return got[100];
  }

  std::string dir_;
  std::shared_ptr<FaultyStorage> faulty_;
  std::unique_ptr<Checkpointer> ckpt_;
  std::vector<float> w_;
};

TEST_F(FaultyStorageTest, FailedWriteLeavesThePreviousCheckpoint) {
  ASSERT_TRUE(Save(1, 1.f).ok());
  faulty_->FailAppendAfter(0);
  Status st = Save(2, 2.f);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_EQ(*faulty_->Steps(), std::vector<int64_t>{1});
  EXPECT_EQ(Stored(1), 1.f);
  EXPECT_TRUE(Verify(*faulty_, 1).ok());
}

TEST_F(FaultyStorageTest, FailedFsyncIsNeverCommitted) {
  ASSERT_TRUE(Save(1, 1.f).ok());
  faulty_->FailFinish(true);
  EXPECT_FALSE(Save(2, 2.f).ok());
  faulty_->FailFinish(false);
  EXPECT_EQ(*faulty_->Steps(), std::vector<int64_t>{1});
  // After the fault clears, saving works again and the new step commits.
  ASSERT_TRUE(Save(3, 3.f).ok());
  EXPECT_EQ(*faulty_->Steps(), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(Stored(3), 3.f);
}

TEST_F(FaultyStorageTest, FailedManifestWriteIsNotACommit) {
  faulty_->FailPutMeta("manifest.pb");
  EXPECT_FALSE(Save(1, 1.f).ok());
  EXPECT_TRUE(faulty_->Steps()->empty());
  EXPECT_EQ(ReadManifest(*faulty_, 1).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(FaultyStorageTest, CommittedDataSurvivesLosingEverythingUnsynced) {
  ASSERT_TRUE(Save(1, 1.f).ok());
  faulty_->FailFinish(true);
  EXPECT_FALSE(Save(2, 2.f).ok());
  // Power loss: only data that reached its fsync survives. The committed
  // step was fully durable before its manifest, so it still loads.
  faulty_->DropUnfinished(true);
  EXPECT_EQ(Stored(1), 1.f);
  EXPECT_TRUE(Verify(*faulty_, 1).ok());
}

}  // namespace
}  // namespace strata::checkpoint
