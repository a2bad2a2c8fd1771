// JobManager against a real RocksDB in a temp dir, fake clock: submitted and
// cancelled jobs survive closing and reopening the store (coordinator
// restart); bad specs are rejected with the field named.
#include "coordinator/jobs/job_manager.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace strata::coordinator {
namespace {

JobSpec Spec(const std::string& name) {
  JobSpec spec;
  spec.set_name(name);
  spec.mutable_launch()->add_command("/bin/true");
  spec.mutable_launch()->set_nodes(2);
  spec.mutable_launch()->set_max_restarts(3);
  return spec;
}

class JobManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("strata-jobs-" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
  FakeClock clock_;
};

TEST_F(JobManagerTest, JobsSurviveReopen) {
  {
    auto store = StateStore::Open(dir_.string());
    ASSERT_TRUE(store.ok()) << store.status();
    JobManager jobs(&clock_, store->get());
    ASSERT_TRUE(jobs.Recover().ok());
    auto a = jobs.Submit(Spec("a"));
    auto b = jobs.Submit(Spec("b"));
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(*a, "job-1");
    EXPECT_EQ(*b, "job-2");
    clock_.Advance(500);
    ASSERT_TRUE(jobs.Cancel("job-2").ok());
    EXPECT_EQ(jobs.Cancel("job-2").status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
  auto store = StateStore::Open(dir_.string());
  ASSERT_TRUE(store.ok()) << store.status();
  JobManager jobs(&clock_, store->get());
  ASSERT_TRUE(jobs.Recover().ok());
  auto a = jobs.Get("job-1");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->state(), control::PENDING);
  EXPECT_EQ(a->spec().name(), "a");
  EXPECT_EQ(a->spec().launch().max_restarts(), 3);
  EXPECT_EQ(a->submit_unix_ms(), 1'000'000);
  auto b = jobs.Get("job-2");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->state(), control::CANCELLED);
  EXPECT_EQ(b->end_unix_ms(), 1'000'500);
  auto c = jobs.Submit(Spec("c"));  // ids continue after restart
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, "job-3");
  EXPECT_EQ(jobs.List().jobs_size(), 3);
}

TEST_F(JobManagerTest, RejectsBadSpecsAndUnknownJobs) {
  auto store = StateStore::Open(dir_.string());
  ASSERT_TRUE(store.ok());
  JobManager jobs(&clock_, store->get());
  JobSpec empty;
  auto r = jobs.Submit(empty);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("launch.command"), std::string::npos);
  JobSpec neg = Spec("n");
  neg.mutable_launch()->set_max_restarts(-1);
  EXPECT_EQ(jobs.Submit(neg).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(jobs.Get("job-9").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(jobs.Cancel("job-9").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(jobs.List().jobs_size(), 0);
}

TEST_F(JobManagerTest, CorruptRecordIsDataLoss) {
  auto store = StateStore::Open(dir_.string());
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->Put("job/job-1", "\xff\xff\xff").ok());
  JobManager jobs(&clock_, store->get());
  EXPECT_EQ(jobs.Recover().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace strata::coordinator
