// `strata fault set` on a running job: bad keys, out-of-range values and
// unknown job ids are refused naming what is wrong, and the job and its
// stored policy are unaffected; a good setting is stored and logged as an
// event. `strata events` of an unknown job is an error too.
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/fault/coordinator/fault_coordinator.h"

namespace strata::testing {
namespace {

using std::chrono::seconds;

TEST(FaultPolicyFaultTest, SettingsOnARunningJobAreCheckedAndStored) {
  FaultCoordinator c;
  c.Start();
  c.StartWorker("node-0");
  ASSERT_TRUE(c.WaitWorkers(1, seconds(10))) << c.Log();
  const std::string file = c.dir() + "/sleep.yaml";
  std::ofstream(file) << "name: sleep\nlaunch:\n  command: [/bin/sleep, "
                         "\"60\"]\n  nodes: 1\n";
  RunResult r = c.Strata("submit " + file);
  ASSERT_EQ(r.code, 0) << r.out;

  r = c.Strata("fault set job-1 hang_k=-2");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("'fault.hang_k' = -2 is out of range [1, 1000]"),
            std::string::npos)
      << r.out;
  r = c.Strata("fault set job-1 hang_florr_s=3");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("unknown fault key 'hang_florr_s'"), std::string::npos)
      << r.out;
  r = c.Strata("fault set job-1 straggler=kill");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("is not an action"), std::string::npos) << r.out;
  r = c.Strata("fault set job-7 hang_k=4");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("no job 'job-7'"), std::string::npos) << r.out;
  r = c.Strata("events job-7");
  EXPECT_EQ(r.code, 2) << r.out;

  auto job = c.Job("job-1");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_FALSE(job->spec().has_fault());  // nothing of the refused changes
  EXPECT_TRUE(job->state() == control::RUNNING ||
              job->state() == control::PENDING);

  r = c.Strata("fault set job-1 hang_floor_s=30 straggler=restart");
  EXPECT_EQ(r.code, 0) << r.out;
  job = c.Job("job-1");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->spec().fault().hang_floor_s(), 30);
  EXPECT_EQ(job->spec().fault().straggler(), FaultPolicy::restart);
  r = c.Strata("events job-1 --format json");
  EXPECT_NE(r.out.find("\"kind\":\"fault_policy\""), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("set hang_floor_s=30 straggler=restart"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace strata::testing
