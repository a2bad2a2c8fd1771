// Retention of ended jobs (docs/control-plane.md "Retention"): the most
// recently ended jobs stay in memory up to a count and an age; older ones
// leave List() and /metrics but stay in the state store, where status,
// events and cancel still find them; a restart holds the same set.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "coordinator/metrics/metrics_render.h"
#include "tests/unit/coordinator/job_driver.h"

namespace strata::coordinator {
namespace {

JobOptions Keep(int64_t jobs, int64_t age_ms) {
  JobOptions o;
  o.default_worker_wait_ms = 10000;
  o.default_grace_ms = 100;
  o.retention = {.max_ended_jobs = jobs, .max_ended_age_ms = age_ms};
  return o;
}

std::vector<std::string> Listed(JobManager& jobs) {
  std::vector<std::string> ids;
  const control::JobsReply list = jobs.List();
  for (const auto& j : list.jobs()) ids.push_back(j.job_id());
  return ids;
}

TEST(JobRetentionTest, KeepsTheNewestEndedJobsAndFindsTheOthersInTheStore) {
  ControlFixture f(Keep(2, 3600'000));
  JobDriver d(&f);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(d.RunOne(), control::SUCCEEDED);
  const std::string pending = d.Submit();  // never placed: no free worker
  EXPECT_EQ(Listed(*f.jobs),
            (std::vector<std::string>{"job-3", "job-4", "job-5"}));
  EXPECT_EQ(f.jobs->StepHistograms().size(), 2u);

  // job-1 aged out of memory: still found, from the store.
  auto old = f.jobs->Get("job-1");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->state(), control::SUCCEEDED);
  EXPECT_EQ(old->message(), "all 1 ranks exited 0");
  EXPECT_GT(old->goodput().wall_s(), 0);
  EXPECT_EQ(f.jobs->Cancel("job-1").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(f.jobs->Cancel("job-1").status().message(),
            "job job-1 already ended (SUCCEEDED)");
  EXPECT_EQ(f.jobs->Get("job-9").status().message(), "no job 'job-9'");
  EXPECT_TRUE(f.jobs->Facts("job-1").has_value());
  EXPECT_TRUE(f.jobs->Diagnose([] {
                      control::DiagnoseRequest r;
                      r.set_job_id("job-1");
                      return r;
                    }())
                  .ok());
  control::TraceRequest trace;
  trace.set_job_id("job-2");
  EXPECT_EQ(f.jobs->Trace(trace, f.service->registry()).status().message(),
            "job job-2 is SUCCEEDED: traces come from the ranks of a running "
            "attempt");
  auto events = f.events->List("job-1", 0);
  ASSERT_TRUE(events.ok());
  ASSERT_FALSE(events->events().empty());
  EXPECT_EQ(events->events().rbegin()->kind(), "succeeded");

  // A restart holds the same jobs.
  f.Restart();
  ASSERT_TRUE(f.recovered.ok()) << f.recovered;
  EXPECT_EQ(Listed(*f.jobs),
            (std::vector<std::string>{"job-3", "job-4", "job-5"}));
  EXPECT_EQ(f.jobs->Get(pending)->state(), control::PENDING);
  EXPECT_EQ(f.jobs->Get("job-2")->state(), control::SUCCEEDED);
}

TEST(JobRetentionTest, EndedJobsAgeOutOfMemoryAndMetrics) {
  ControlFixture f(Keep(100, 60'000));
  JobDriver d(&f);
  ASSERT_EQ(d.RunOne(), control::SUCCEEDED);
  ASSERT_EQ(d.RunOne(), control::SUCCEEDED);
  MetricsInput in;
  in.jobs = f.jobs->List(true);
  in.step_seconds = f.jobs->StepHistograms();
  EXPECT_NE(RenderMetrics(in).find("job=\"job-1\""), std::string::npos);

  f.clock.Advance(61'000);
  f.service->Tick();
  EXPECT_TRUE(Listed(*f.jobs).empty());
  in.jobs = f.jobs->List(true);
  in.step_seconds = f.jobs->StepHistograms();
  EXPECT_EQ(RenderMetrics(in).find("job=\""), std::string::npos);
  EXPECT_EQ(f.jobs->Get("job-2")->state(), control::SUCCEEDED);
}

TEST(JobRetentionTest, KeepingNoEndedJobLosesNoLateOutput) {
  ControlFixture f(Keep(0, 60'000));
  JobDriver d(&f);
  ASSERT_EQ(d.RunOne(), control::SUCCEEDED);
  EXPECT_TRUE(Listed(*f.jobs).empty());
  // Output relayed after the job left memory is still stored.
  EXPECT_TRUE(f.jobs->MayRelayLogs(d.worker(), "job-1", 0, 0));
  google::protobuf::RepeatedPtrField<control::LogChunk> chunks;
  control::LogChunk* c = chunks.Add();
  c->set_job_id("job-1");
  c->set_rank(0);
  c->set_data("late line\n");
  f.jobs->OnLogs(chunks);
  control::LogsRequest req;
  req.set_job_id("job-1");
  req.set_rank(0);
  EXPECT_EQ(f.logs->Read(req)->data(), "late line\n");
}

// `strata status` pages the job list (cli/job_command.cc ListAllJobs): the
// pages, each within its byte budget, hold every job once, in id order.
TEST(JobRetentionTest, ListPagesCoverEveryJobOnce) {
  ControlFixture f(Keep(100, 3600'000));
  JobDriver d(&f);
  for (int i = 0; i < 12; ++i) ASSERT_EQ(d.RunOne(), control::SUCCEEDED);
  const std::vector<std::string> all = Listed(*f.jobs);
  ASSERT_EQ(all.size(), 12u);
  const int64_t one = f.jobs->List().jobs(0).ByteSizeLong();
  std::vector<std::string> paged;
  std::string after;
  int pages = 0;
  do {
    control::Request r;
    r.mutable_list_jobs()->set_after_job_id(after);
    r.mutable_list_jobs()->set_page_bytes(3 * one);
    control::Reply reply = f.service->Handle(r);
    ASSERT_EQ(reply.status().code(), 0) << reply.status().message();
    EXPECT_LE(reply.jobs().jobs_size(), 4);
    EXPECT_GE(reply.jobs().jobs_size(), 1);
    for (const auto& j : reply.jobs().jobs()) paged.push_back(j.job_id());
    after = reply.jobs().next_after_job_id();
    ASSERT_LT(++pages, 20);
  } while (!after.empty());
  EXPECT_EQ(paged, all);
  EXPECT_GE(pages, 3);
  // Unpaged: everything in one reply, as before.
  control::Request r;
  r.mutable_list_jobs();
  EXPECT_EQ(f.service->Handle(r).jobs().jobs_size(), 12);
}

}  // namespace
}  // namespace strata::coordinator
