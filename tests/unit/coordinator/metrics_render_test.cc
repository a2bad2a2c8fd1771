// The coordinator's /metrics text, from a job list and a worker list.
#include "coordinator/metrics/metrics_render.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace strata::coordinator {
namespace {

bool Has(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

MetricsInput Input(int ranks) {
  MetricsInput in;
  in.now_unix_ms = 1'000'000;
  control::JobInfo* job = in.jobs.add_jobs();
  job->set_job_id("job-1");
  job->set_state(control::RUNNING);
  job->set_restart_count(2);
  job->mutable_plan()->set_mfu(0.5);
  job->mutable_plan()->set_step_time_s(1.0);
  for (int r = 0; r < ranks; ++r) {
    control::StepReport* s = job->add_steps();
    s->set_rank(r);
    s->set_step(40 + (r == 0));
    s->set_step_seconds(r == 3 ? 2.0 : 1.0 + r * 0.01);
    s->set_tokens(4096);
    (*s->mutable_section_seconds())["checkpoint_stall_total"] = 0.25 * r;
  }
  in.jobs.add_jobs()->set_job_id("job-0");  // no steps yet
  in.jobs.mutable_jobs(1)->set_state(control::SUCCEEDED);
  control::WorkerInfo* w = in.workers.add_workers();
  w->set_worker_id("w-a");
  w->set_alive(true);
  w->set_last_heartbeat_unix_ms(999'500);
  in.workers.add_workers()->set_worker_id("w-b");  // lost
  in.rejected["zap"] = 3;
  in.render_cpu_seconds["dashboard"] = 0.25;
  const std::vector<double> buckets = observe::SecondsBuckets();
  for (double v : {0.9, 1.0, 1.1}) in.step_seconds["job-1"].Add(buckets, v);
  in.heartbeat_rtt.Add(buckets, 0.0004);
  control::Goodput* g = job->mutable_goodput();
  g->set_wall_s(100);
  g->set_productive_s(90);
  g->set_startup_s(6);
  g->set_restart_s(4);
  return in;
}

TEST(MetricsRenderTest, JobsWorkersAndHealth) {
  const std::string t = RenderMetrics(Input(4));
  EXPECT_TRUE(Has(t, "strata_jobs{state=\"RUNNING\"} 1")) << t;
  EXPECT_TRUE(Has(t, "strata_jobs{state=\"FAILED\"} 0")) << t;
  EXPECT_TRUE(Has(t, "strata_job_state{job=\"job-1\",state=\"RUNNING\"} 1"));
  EXPECT_TRUE(Has(t, "strata_job_step{job=\"job-1\"} 41"));
  EXPECT_TRUE(Has(t, "strata_job_step_seconds{job=\"job-1\"} 2"));
  EXPECT_TRUE(Has(t, "strata_job_tokens_per_second{job=\"job-1\"} 2048"));
  EXPECT_TRUE(Has(t, "strata_job_mfu_ratio{job=\"job-1\"} 0.25"));
  EXPECT_TRUE(Has(t, "strata_job_restarts_total{job=\"job-1\"} 2"));
  EXPECT_TRUE(
      Has(t, "strata_job_checkpoint_stall_seconds_total{job=\"job-1\"} 0.75"));
  EXPECT_TRUE(Has(t, "strata_rank_step_seconds{job=\"job-1\",rank=\"3\"} 2"));
  EXPECT_TRUE(Has(t, "strata_workers{state=\"alive\"} 1"));
  EXPECT_TRUE(Has(t, "strata_workers{state=\"lost\"} 1"));
  EXPECT_TRUE(
      Has(t, "strata_worker_heartbeat_age_seconds{worker=\"w-a\"} 0.5"));
  EXPECT_TRUE(Has(t, "strata_coordinator_state_writable 1"));
  EXPECT_TRUE(Has(t, "strata_control_rejected_total{reason=\"zap\"} 3"));
  EXPECT_TRUE(Has(
      t, "strata_coordinator_render_cpu_seconds_total{what=\"dashboard\"} 0.25"));
  EXPECT_EQ(t.find("job=\"job-0\"} 4"), std::string::npos);
  // Goodput and the histograms the owners keep.
  EXPECT_TRUE(Has(t, "strata_job_goodput_ratio{job=\"job-1\"} 0.9")) << t;
  EXPECT_TRUE(Has(
      t, "strata_job_lost_seconds{job=\"job-1\",cause=\"restart\"} 4"));
  EXPECT_TRUE(Has(
      t, "strata_job_step_duration_seconds_bucket{job=\"job-1\",le=\"1.024\"} 2"))
      << t;
  EXPECT_TRUE(Has(t, "strata_job_step_duration_seconds_count{job=\"job-1\"} 3"));
  EXPECT_TRUE(Has(t, "strata_heartbeat_round_trip_seconds_bucket{le=\"0.001\"} 1"));
  EXPECT_TRUE(Has(t, "strata_heartbeat_round_trip_seconds_count 1"));
}

TEST(MetricsRenderTest, PerRankSeriesAreBoundedToTheSlowest) {
  MetricsInput in = Input(1000);
  in.max_rank_series = 8;
  const std::string t = RenderMetrics(in);
  size_t series = 0;
  for (size_t p = 0;
       (p = t.find("\nstrata_rank_step_seconds{", p)) != std::string::npos;
       ++p) {
    ++series;
  }
  EXPECT_EQ(series, 8u);  // ranks 992-999 (1 + 0.01 r seconds)
  EXPECT_TRUE(
      Has(t, "strata_rank_step_seconds{job=\"job-1\",rank=\"999\"} 10.99"));
  EXPECT_EQ(t.find("rank=\"0\""), std::string::npos);
}

TEST(MetricsRenderTest, PromtoolFindsNothing) {
  if (std::system("command -v promtool > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool is not installed";
  }
  const std::string path = ::testing::TempDir() + "/coordinator_metrics.txt";
  std::ofstream(path) << RenderMetrics(Input(4));
  const std::string cmd = "promtool check metrics < " + path + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof(buf), p) != nullptr) out += buf;
  EXPECT_EQ(pclose(p), 0) << out;
  EXPECT_EQ(out, "") << out;
  std::remove(path.c_str());
}

}  // namespace
}  // namespace strata::coordinator
