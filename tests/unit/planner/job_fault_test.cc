// The fault section of job files and its ranges (fault/policy.h holds the
// policy; planner/job.h loads and validates job files). Moved from
// tests/unit/fault/policy_test.cc so fault tests do not link the planner.
#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "planner/job.h"

namespace strata::planner {
namespace {

TEST(JobFaultTest, RangesAreCheckedOnTheJob) {
  JobSpec job;
  job.mutable_fault()->set_hang_k(0);
  Status st = ValidateJob(job, "job");
  EXPECT_NE(std::string(st.message()).find("fault.hang_k"), std::string::npos)
      << st;
  job.mutable_fault()->set_hang_k(3);
  job.mutable_fault()->set_straggler_threshold(-1.1);
  st = ValidateJob(job, "job");
  EXPECT_NE(std::string(st.message()).find("fault.straggler_threshold"),
            std::string::npos)
      << st;
  job.mutable_fault()->set_straggler_threshold(1.0);  // exclusive minimum
  EXPECT_FALSE(ValidateJob(job, "job").ok());
  job.mutable_fault()->set_straggler_threshold(1.05);
  EXPECT_TRUE(ValidateJob(job, "job").ok());
}

TEST(JobFaultTest, JobFilesCarryAFaultSection) {
  const std::string path = ::testing::TempDir() + "/fault_policy_job.yaml";
  {
    std::ofstream f(path);
    f << "name: j\nfault:\n  hang: restart\n  straggler: evict\n"
         "  straggler_threshold: 1.3\n";
  }
  auto job = LoadJob(path);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->fault().straggler(), FaultPolicy::evict);
  EXPECT_DOUBLE_EQ(job->fault().straggler_threshold(), 1.3);
  {
    std::ofstream f(path);
    f << "name: j\nfault:\n  hang_timeout: 5\n";
  }
  job = LoadJob(path);
  ASSERT_FALSE(job.ok());
  EXPECT_NE(std::string(job.status().message()).find("hang_timeout"),
            std::string::npos)
      << job.status();
  std::remove(path.c_str());
}

}  // namespace
}  // namespace strata::planner
