// The fault policy: defaults, key=value settings, ranges and job files.
#include "fault/policy.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "planner/job.h"

namespace strata::fault {
namespace {

TEST(PolicyTest, AbsentFieldsKeepTheDefaults) {
  const ResolvedPolicy r = Resolve(FaultPolicy());
  EXPECT_EQ(r.straggler, FaultPolicy::report);
  EXPECT_EQ(r.slow_link, FaultPolicy::report);
  EXPECT_EQ(r.hang, FaultPolicy::restart);
  EXPECT_EQ(r.straggler_options.threshold, StragglerOptions().threshold);
  EXPECT_EQ(r.hang_options.floor_ms, HangOptions().floor_ms);
  EXPECT_EQ(r.slow_link_options.threshold, SlowLinkOptions().threshold);
}

TEST(PolicyTest, SettingsChangeActionsAndThresholds) {
  FaultPolicy p;
  ASSERT_TRUE(ApplyFaultSetting("straggler=evict", &p).ok());
  ASSERT_TRUE(ApplyFaultSetting("hang=report", &p).ok());
  ASSERT_TRUE(ApplyFaultSetting("straggler_threshold=1.25", &p).ok());
  ASSERT_TRUE(ApplyFaultSetting("hang_floor_s=30", &p).ok());
  ASSERT_TRUE(ApplyFaultSetting("straggler_confirm=4", &p).ok());
  const ResolvedPolicy r = Resolve(p);
  EXPECT_EQ(r.straggler, FaultPolicy::evict);
  EXPECT_EQ(r.hang, FaultPolicy::report);
  EXPECT_DOUBLE_EQ(r.straggler_options.threshold, 1.25);
  EXPECT_EQ(r.straggler_options.confirm, 4);
  EXPECT_EQ(r.hang_options.floor_ms, 30000);
}

TEST(PolicyTest, BadSettingsNameTheKey) {
  FaultPolicy p;
  auto expect = [&](const char* kv, const char* words) {
    Status st = ApplyFaultSetting(kv, &p);
    EXPECT_TRUE(absl::IsInvalidArgument(st)) << kv;
    EXPECT_NE(std::string(st.message()).find(words), std::string::npos)
        << st.message();
  };
  expect("straggler_treshold=1.2", "unknown fault key 'straggler_treshold'");
  expect("hang=kill", "is not an action");
  expect("hang=default_action", "is not an action");
  expect("hang_k=fast", "is not a number");
  expect("hang_k=nan", "is not a number");
  expect("hang_floor_s=1.5", "is not an integer");
  expect("hang_k", "is not key=value");
}

TEST(PolicyTest, RangesAreCheckedOnTheJob) {
  JobSpec job;
  job.mutable_fault()->set_hang_k(0);
  Status st = planner::ValidateJob(job, "job");
  EXPECT_NE(std::string(st.message()).find("fault.hang_k"), std::string::npos)
      << st;
  job.mutable_fault()->set_hang_k(3);
  job.mutable_fault()->set_straggler_threshold(-1.1);
  st = planner::ValidateJob(job, "job");
  EXPECT_NE(std::string(st.message()).find("fault.straggler_threshold"),
            std::string::npos)
      << st;
  job.mutable_fault()->set_straggler_threshold(1.0);  // exclusive minimum
  EXPECT_FALSE(planner::ValidateJob(job, "job").ok());
  job.mutable_fault()->set_straggler_threshold(1.05);
  EXPECT_TRUE(planner::ValidateJob(job, "job").ok());
}

TEST(PolicyTest, JobFilesCarryAFaultSection) {
  const std::string path = ::testing::TempDir() + "/fault_policy_job.yaml";
  {
    std::ofstream f(path);
    f << "name: j\nfault:\n  hang: restart\n  straggler: evict\n"
         "  straggler_threshold: 1.3\n";
  }
  auto job = planner::LoadJob(path);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->fault().straggler(), FaultPolicy::evict);
  EXPECT_DOUBLE_EQ(job->fault().straggler_threshold(), 1.3);
  {
    std::ofstream f(path);
    f << "name: j\nfault:\n  hang_timeout: 5\n";
  }
  job = planner::LoadJob(path);
  ASSERT_FALSE(job.ok());
  EXPECT_NE(std::string(job.status().message()).find("hang_timeout"),
            std::string::npos)
      << job.status();
  std::remove(path.c_str());
}

}  // namespace
}  // namespace strata::fault
