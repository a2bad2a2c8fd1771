// Sizes that drive allocation are bounded: a job asking for 10^8 ranks per
// node is refused at submit with the limit and its flag named, and the
// coordinator (one worker registered) stays small and up; the same job
// stored before the limits existed is failed with the reason when the
// coordinator starts, not scheduled, and the coordinator survives a worker
// registering. Real strata-coordinator, strata-worker and strata processes.
#include <gtest/gtest.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "coordinator/state/state_store.h"
#include "tests/fault/coordinator/fault_coordinator.h"

namespace strata::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// The coordinator dies at this much address space instead of taking the
// machine down when a test runs against a build without the limits.
constexpr int64_t kAddressSpaceCap = int64_t{3} << 30;
constexpr int64_t kMaxRssKiB = 200 << 10;  // far above a healthy ~30 MiB

JobSpec HugeJob() {
  JobSpec spec;
  spec.set_name("huge");
  spec.mutable_launch()->add_command("/bin/true");
  spec.mutable_launch()->set_nodes(1);
  spec.mutable_launch()->set_ranks_per_node(100000000);
  return spec;
}

TEST(JobLimitsFaultTest, HugeRanksPerNodeIsRefusedAtSubmit) {
  FaultCoordinator c;
  c.LimitMemory(kAddressSpaceCap);
  c.Start();
  c.StartWorker("node-0");
  ASSERT_TRUE(c.WaitWorkers(1, seconds(10))) << c.Log();
  const std::string file = c.dir() + "/huge.yaml";
  std::ofstream(file) << "name: huge\nlaunch:\n  command: [/bin/true]\n"
                         "  nodes: 1\n  ranks_per_node: 100000000\n";
  RunResult r = c.Strata("submit " + file);
  EXPECT_EQ(r.code, 2) << r.out;
  // The CLI refuses it while reading the file (the job file's range); the
  // coordinator's own limit is exercised through the protocol above.
  EXPECT_NE(r.out.find("'launch.ranks_per_node'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("out of range [1, 4096]"), std::string::npos) << r.out;
  // Give a wrongly accepted job the time to be placed.
  std::this_thread::sleep_for(seconds(2));
  ASSERT_TRUE(c.Alive()) << c.Log();
  const int64_t rss = c.RssKiB();
  std::printf("coordinator RSS 2 s after the 10^8-rank submit: %lld KiB\n",
              static_cast<long long>(rss));
  EXPECT_LT(rss, kMaxRssKiB);
  control::Request list;
  list.mutable_list_jobs();
  auto jobs = c.Call(list);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->jobs().jobs_size(), 0);

  // Also refused: more ranks per node than the worker's cores allow, the
  // command over its byte limit.
  control::Request sub;
  JobSpec spec = HugeJob();
  spec.mutable_launch()->set_ranks_per_node(500);
  *sub.mutable_submit_job()->mutable_spec() = spec;
  auto refused = c.Call(sub);
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find("--max-ranks-per-core"),
            std::string::npos)
      << refused.status();
  spec.mutable_launch()->set_ranks_per_node(1);
  spec.mutable_launch()->add_command(std::string(100 << 10, 'x'));
  *sub.mutable_submit_job()->mutable_spec() = spec;
  refused = c.Call(sub);
  EXPECT_NE(refused.status().message().find("--max-command-bytes"),
            std::string::npos)
      << refused.status();
}

TEST(JobLimitsFaultTest, StoredOversizedJobIsFailedAtStartNotScheduled) {
  FaultCoordinator c;
  {
    // As a coordinator without limits would have stored it.
    auto store = coordinator::StateStore::Open(c.state_dir() + "/db");
    ASSERT_TRUE(store.ok()) << store.status();
    control::JobInfo job;
    job.set_job_id("job-1");
    *job.mutable_spec() = HugeJob();
    job.set_state(control::PENDING);
    ASSERT_TRUE((*store)->Put("job/job-1", job.SerializeAsString()).ok());
    ASSERT_TRUE((*store)->Put("meta/next_job_id", "2").ok());
  }
  c.LimitMemory(kAddressSpaceCap);
  c.Start();
  c.StartWorker("node-0");
  ASSERT_TRUE(c.WaitWorkers(1, seconds(10))) << c.Log();
  std::this_thread::sleep_for(seconds(2));  // placement ticks with a worker
  ASSERT_TRUE(c.Alive()) << c.Log();
  EXPECT_LT(c.RssKiB(), kMaxRssKiB);
  auto job = c.Job("job-1");
  ASSERT_TRUE(job.ok()) << job.status() << "\n" << c.Log();
  EXPECT_EQ(job->state(), control::FAILED);
  EXPECT_NE(job->message().find("refused at coordinator start"),
            std::string::npos)
      << job->message();
  EXPECT_NE(job->message().find("ranks_per_node"), std::string::npos)
      << job->message();
  // The failure is stored: after a restart it is still FAILED, and ids go on.
  c.Kill();
  c.Start();
  job = c.Job("job-1");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), control::FAILED);
}

}  // namespace
}  // namespace strata::testing
