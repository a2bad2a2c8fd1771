// The fault policy: defaults and key=value settings (its ranges and job
// files: tests/unit/planner/job_fault_test.cc, with the job validation).
#include "fault/policy.h"

#include <string>

#include "gtest/gtest.h"

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

}  // namespace
}  // namespace strata::fault
