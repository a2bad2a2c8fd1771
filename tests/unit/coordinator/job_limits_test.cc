// Per-job and aggregate job limits (job_limits.h): tables of specs against
// the defaults, and refusals at submit naming the limit and the totals.
#include "coordinator/jobs/job_limits.h"

#include <string>

#include "gtest/gtest.h"
#include "tests/unit/coordinator/control_fixture.h"

namespace strata::coordinator {
namespace {

JobSpec Spec(int nodes, int rpn, size_t arg_bytes = 0, size_t env_bytes = 0) {
  JobSpec spec;
  spec.set_name("j");
  spec.mutable_launch()->add_command("/bin/true");
  if (arg_bytes > 0)
    spec.mutable_launch()->add_command(std::string(arg_bytes - 1, 'a'));
  if (env_bytes > 0)
    (*spec.mutable_launch()->mutable_env())["E"] =
        std::string(env_bytes - 1, 'e');
  spec.mutable_launch()->set_nodes(nodes);
  spec.mutable_launch()->set_ranks_per_node(rpn);
  return spec;
}

// The size: 16,384 nodes of 8 GPUs (131,072 ranks) fits the
// defaults; twice the node limit does not.
TEST(JobLimitsTest, DefaultsAdmitTheLargestPlannedJob) {
  const JobLimits defaults;
  EXPECT_TRUE(CheckJobLimits(Spec(16384, 8), defaults).ok());
  EXPECT_TRUE(CheckActiveLimits(Spec(16384, 8), {}, defaults).ok());
  const Status refused = CheckJobLimits(Spec(65536, 8), defaults);
  EXPECT_TRUE(absl::IsInvalidArgument(refused));
  EXPECT_NE(refused.message().find("--max-nodes"), std::string::npos);
}

TEST(JobLimitsTest, ActiveTotalsOnATable) {
  JobLimits limits;
  limits.max_active_launch_bytes = 1000;
  limits.max_active_ranks = 100;
  struct Case {
    ActiveTotals active;
    JobSpec spec;
    const char* flag;  // nullptr: admitted
  };
  const std::string cmd = "/bin/true";  // 10 bytes with its separator
  for (const Case& c : std::vector<Case>{
           {{}, Spec(10, 10), nullptr},
           {{.jobs = 3, .launch_bytes = 0, .ranks = 90}, Spec(2, 5), nullptr},
           {{.jobs = 3, .launch_bytes = 0, .ranks = 91}, Spec(2, 5),
            "--max-active-ranks"},
           {{}, Spec(0, 0), nullptr},  // counts as one rank
           {{.jobs = 1, .launch_bytes = 0, .ranks = 100}, Spec(0, 0),
            "--max-active-ranks"},
           {{.jobs = 2, .launch_bytes = 500, .ranks = 0},
            Spec(1, 1, 290, 200), nullptr},  // 10 + 290 + 200 = 500
           {{.jobs = 2, .launch_bytes = 501, .ranks = 0},
            Spec(1, 1, 290, 200), "--max-active-launch-bytes"},
       }) {
    const Status s = CheckActiveLimits(c.spec, c.active, limits);
    if (c.flag == nullptr) {
      EXPECT_TRUE(s.ok()) << s;
      continue;
    }
    EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
    EXPECT_NE(s.message().find(c.flag), std::string::npos) << s;
    // The refusal names the current totals.
    const std::string held = std::to_string(
        std::string(c.flag) == "--max-active-ranks" ? c.active.ranks
                                                    : c.active.launch_bytes);
    EXPECT_NE(s.message().find(" " + held), std::string::npos) << s;
  }
}

TEST(JobLimitsTest, SumActiveCountsOnlyActiveJobs) {
  std::map<std::string, control::JobInfo> jobs;
  for (auto [id, state] : {std::pair{"a", control::PENDING},
                           {"b", control::RUNNING},
                           {"c", control::SUCCEEDED},
                           {"d", control::FAILED}}) {
    jobs[id].set_state(state);
    *jobs[id].mutable_spec() = Spec(2, 4, 100);
  }
  const ActiveTotals t = SumActive(jobs, [](const control::JobInfo& j) {
    return j.state() == control::PENDING || j.state() == control::RUNNING;
  });
  EXPECT_EQ(t.jobs, 2);
  EXPECT_EQ(t.ranks, 16);
  EXPECT_EQ(t.launch_bytes, 2 * (10 + 100));
}

// Through JobManager::Submit: the third job over the aggregate limit is
// refused naming the flag and the totals; after one is cancelled it fits.
TEST(JobLimitsTest, SubmitRefusesBeyondTheActiveTotals) {
  JobLimits limits;
  limits.max_active_ranks = 20;
  ControlFixture f({.default_worker_wait_ms = 10000,
                    .default_grace_ms = 100,
                    .limits = limits});
  auto first = f.jobs->Submit(Spec(2, 4), nullptr, "");
  auto second = f.jobs->Submit(Spec(2, 4), nullptr, "");
  ASSERT_TRUE(first.ok() && second.ok());
  auto third = f.jobs->Submit(Spec(2, 4), nullptr, "");
  ASSERT_TRUE(absl::IsResourceExhausted(third.status())) << third.status();
  EXPECT_NE(third.status().message().find("--max-active-ranks"),
            std::string::npos);
  EXPECT_NE(third.status().message().find("2 pending or running jobs already "
                                          "hold 16"),
            std::string::npos)
      << third.status();
  ASSERT_TRUE(f.jobs->Cancel(*first).ok());
  EXPECT_TRUE(f.jobs->Submit(Spec(2, 4), nullptr, "").ok());
}

}  // namespace
}  // namespace strata::coordinator
