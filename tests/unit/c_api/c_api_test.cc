// The C API rejects bad input itself (python/strata checks it first, but
// other languages call c_api.h directly): out-of-range steps, replacing a
// committed step, bad replica counts, bad section names and times.
#include "strata/c_api.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

namespace {

constexpr int kInvalidArgument = 3;
constexpr int kAlreadyExists = 6;

class CApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("strata-c-api-" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    uri_ = "file://" + dir_.string();
    ASSERT_EQ(strata_init(0, &rt_), STRATA_OK) << strata_last_error();
    ASSERT_EQ(strata_ckpt_open(rt_, uri_.c_str(), 0, &ck_), STRATA_OK)
        << strata_last_error();
  }
  void TearDown() override {
    strata_ckpt_close(ck_);
    strata_finalize(rt_);
    std::filesystem::remove_all(dir_);
  }
  strata_tensor Tensor(const char* name, int replica_id, int num_replicas) {
    return strata_tensor{name,    0,          1,           shape_, shape_,
                         offset_, replica_id, num_replicas, data_};
  }
  int Save(int64_t step) {
    strata_tensor t = Tensor("w", 0, 1);
    return strata_ckpt_save(ck_, step, &t, 1, nullptr, 0);
  }

  std::filesystem::path dir_;
  std::string uri_;
  strata_runtime* rt_ = nullptr;
  strata_checkpointer* ck_ = nullptr;
  int64_t shape_[1] = {4};
  int64_t offset_[1] = {0};
  float data_[4] = {1, 2, 3, 4};
};

TEST_F(CApiTest, NegativeStepIsRejectedAndNothingIsWritten) {
  EXPECT_EQ(Save(-3), kInvalidArgument);
  EXPECT_NE(std::string(strata_last_error()).find("step -3 < 0"),
            std::string::npos)
      << strata_last_error();
  EXPECT_EQ(strata_ckpt_wait(ck_), STRATA_OK);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "manifest.pb"));
}

TEST_F(CApiTest, CommittedStepIsNeverReplaced) {
  ASSERT_EQ(Save(5), STRATA_OK) << strata_last_error();
  ASSERT_EQ(strata_ckpt_wait(ck_), STRATA_OK) << strata_last_error();
  EXPECT_EQ(Save(5), kAlreadyExists);
  EXPECT_NE(std::string(strata_last_error()).find("step 5 is not newer"),
            std::string::npos)
      << strata_last_error();
  EXPECT_EQ(Save(3), kAlreadyExists);
  // A new checkpointer on the same URI sees the committed step too.
  strata_checkpointer* other = nullptr;
  ASSERT_EQ(strata_ckpt_open(rt_, uri_.c_str(), 0, &other), STRATA_OK);
  strata_tensor t = Tensor("w", 0, 1);
  EXPECT_EQ(strata_ckpt_save(other, 5, &t, 1, nullptr, 0), kAlreadyExists);
  EXPECT_EQ(strata_ckpt_save(other, 6, &t, 1, nullptr, 0), STRATA_OK)
      << strata_last_error();
  EXPECT_EQ(strata_ckpt_close(other), STRATA_OK) << strata_last_error();
  int64_t latest = -1;
  ASSERT_EQ(strata_ckpt_latest(uri_.c_str(), &latest), STRATA_OK);
  EXPECT_EQ(latest, 6);
}

// A borrowed save writes the caller's memory as it is at the wait (no
// copy at the save: strata.torch's DCP writer hands over its staged
// tensors), and checks its input like a copying one.
TEST_F(CApiTest, BorrowedSaveWritesTheCallersMemory) {
  float data[4] = {1, 2, 3, 4};
  strata_tensor t = Tensor("w", 0, 1);
  t.data = data;
  ASSERT_EQ(strata_ckpt_save_borrowed(ck_, 3, &t, 1, nullptr, 0), STRATA_OK)
      << strata_last_error();
  ASSERT_EQ(strata_ckpt_wait(ck_), STRATA_OK) << strata_last_error();
  float got[4] = {0, 0, 0, 0};
  strata_tensor out = Tensor("w", 0, 1);
  out.data = got;
  ASSERT_EQ(strata_ckpt_load(uri_.c_str(), 3, &out, 1), STRATA_OK)
      << strata_last_error();
  EXPECT_EQ(std::vector<float>(got, got + 4), std::vector<float>(data, data + 4));
  EXPECT_EQ(strata_ckpt_save_borrowed(ck_, 3, &t, 1, nullptr, 0),
            kAlreadyExists);
  EXPECT_EQ(strata_ckpt_save_borrowed(ck_, -1, &t, 1, nullptr, 0),
            kInvalidArgument);
}

TEST_F(CApiTest, ReplicaCountsAreChecked) {
  for (auto [id, n] : {std::pair{0, 0}, {2, 2}, {-1, 2}}) {
    strata_tensor t = Tensor("w", id, n);
    EXPECT_EQ(strata_ckpt_save(ck_, 1, &t, 1, nullptr, 0), kInvalidArgument)
        << id << "/" << n;
    EXPECT_NE(std::string(strata_last_error()).find("tensor 'w': replica_id"),
              std::string::npos)
        << strata_last_error();
  }
}

TEST_F(CApiTest, EmptyNamesAreRejected) {
  strata_tensor t = Tensor("", 0, 1);
  EXPECT_EQ(strata_ckpt_save(ck_, 1, &t, 1, nullptr, 0), kInvalidArgument);
  strata_blob b{"", 0, "x", 1};
  EXPECT_EQ(strata_ckpt_save(ck_, 1, nullptr, 0, &b, 1), kInvalidArgument);
  EXPECT_EQ(strata_timer_add(rt_, "", 1.0), kInvalidArgument);
}

TEST_F(CApiTest, SectionTimesMustBeFinite) {
  EXPECT_EQ(strata_timer_add(rt_, "forward", std::nan("")), kInvalidArgument);
  EXPECT_NE(std::string(strata_last_error()).find("section 'forward'"),
            std::string::npos)
      << strata_last_error();
  EXPECT_EQ(strata_timer_add(rt_, "forward",
                             std::numeric_limits<double>::infinity()),
            kInvalidArgument);
  EXPECT_EQ(strata_timer_add(rt_, "forward", -1.0), kInvalidArgument);
  EXPECT_EQ(strata_timer_add(rt_, "forward", 0.5), STRATA_OK);
}

TEST_F(CApiTest, AStepFitsTheTelemetryFrame) {
  EXPECT_EQ(strata_timer_add(rt_, std::string(65, 'x').c_str(), 1.0),
            kInvalidArgument);
  for (int i = 0; i < 128; ++i) {
    ASSERT_EQ(strata_timer_add(rt_, ("s" + std::to_string(i)).c_str(), 1.0),
              STRATA_OK)
        << strata_last_error();
  }
  EXPECT_EQ(strata_timer_add(rt_, "s128", 1.0), kInvalidArgument);
  EXPECT_NE(std::string(strata_last_error()).find("64 KiB"), std::string::npos);
  // Adding to a section already there is fine; a new step starts afresh.
  EXPECT_EQ(strata_timer_add(rt_, "s0", 1.0), STRATA_OK);
  ASSERT_EQ(strata_timer_end_step(rt_, 1, 0, std::nan("")), STRATA_OK);
  EXPECT_EQ(strata_timer_add(rt_, "s128", 1.0), STRATA_OK);
}

TEST_F(CApiTest, EndStepChecksItsArguments) {
  EXPECT_EQ(strata_timer_end_step(rt_, -5, 0, 1.0), kInvalidArgument);
  EXPECT_EQ(strata_timer_end_step(rt_, 5, -1, 1.0), kInvalidArgument);
  EXPECT_EQ(strata_timer_end_step(
                rt_, 5, 0, std::numeric_limits<double>::infinity()),
            kInvalidArgument);
  EXPECT_EQ(strata_timer_end_step(rt_, 5, 0, std::nan("")), STRATA_OK);
}

TEST_F(CApiTest, LoadOfNegativeStepIsRejected) {
  strata_tensor t = Tensor("w", 0, 1);
  EXPECT_EQ(strata_ckpt_load(uri_.c_str(), -1, &t, 1), kInvalidArgument);
}

}  // namespace
