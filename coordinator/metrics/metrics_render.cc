#include "coordinator/metrics/metrics_render.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "observe/goodput.h"
#include "observe/metrics.h"
#include "observe/progress.h"

namespace strata::coordinator {
namespace {

using observe::MetricType;

// Families are defined from constants: a failure is a programming error,
// logged once per render rather than aborting the coordinator.
void Check(const Status& st) {
  if (!st.ok())
    GetLogger("CTRL")->error("metrics: {}", std::string(st.message()));
}

struct JobNumbers {
  int64_t step = -1;
  double slowest_s = 0;  // slowest rank's latest step time
  int64_t tokens = 0;
  double stall_s = 0;  // max over ranks of checkpoint_stall_total
  std::vector<std::pair<double, int>> rank_seconds;  // (seconds, rank)
};

JobNumbers Summarize(const control::JobInfo& job) {
  JobNumbers n;
  for (const control::StepReport& s : job.steps()) {
    n.step = std::max(n.step, s.step());
    n.slowest_s = std::max(n.slowest_s, s.step_seconds());
    n.tokens = std::max(n.tokens, s.tokens());
    auto it = s.section_seconds().find("checkpoint_stall_total");
    if (it != s.section_seconds().end())
      n.stall_s = std::max(n.stall_s, it->second);
    n.rank_seconds.emplace_back(s.step_seconds(), s.rank());
  }
  return n;
}

}  // namespace

std::string RenderMetrics(const MetricsInput& in) {
  observe::Registry r;
  Check(r.Define("strata_jobs", MetricType::kGauge, "Jobs per state.",
                 {"state"}));
  Check(r.Define("strata_job_state", MetricType::kGauge,
                 "1 for the job's current state.", {"job", "state"}));
  Check(r.Define("strata_job_step", MetricType::kGauge,
                 "Newest step any rank of the job reported.", {"job"}));
  Check(r.Define("strata_job_step_seconds", MetricType::kGauge,
                 "Slowest rank's latest step time.", {"job"}));
  Check(r.Define("strata_job_tokens_per_second", MetricType::kGauge,
                 "Global tokens per step over the slowest rank's step time.",
                 {"job"}));
  Check(r.Define("strata_job_mfu_ratio", MetricType::kGauge,
                 "Model FLOPs utilization: the plan's MFU scaled by predicted "
                 "over measured step time.",
                 {"job"}));
  Check(r.Define("strata_job_restarts_total", MetricType::kCounter,
                 "Attempts started after the first.", {"job"}));
  Check(r.Define("strata_job_checkpoint_stall_seconds_total",
                 MetricType::kCounter,
                 "Training time spent in checkpoint saves (slowest rank), "
                 "current attempt.",
                 {"job"}));
  Check(r.Define("strata_job_goodput_ratio", MetricType::kGauge,
                 "Share of the job's wall time since the submit spent on "
                 "productive steps (observe/goodput.h).",
                 {"job"}));
  Check(r.Define("strata_job_lost_seconds", MetricType::kGauge,
                 "Wall time since the submit not spent on productive steps, "
                 "by cause (the time since the last event is counted where "
                 "it is heading, so a cause can shrink).",
                 {"job", "cause"}));
  Check(r.Define("strata_rank_step_seconds", MetricType::kGauge,
                 "Latest step time per rank (the slowest ranks when a job has "
                 "more than the series limit).",
                 {"job", "rank"}));
  Check(r.Define("strata_job_step_duration_seconds", MetricType::kHistogram,
                 "Step times of the job's rank 0 (the job moves in lock-step).",
                 {"job"}, observe::SecondsBuckets()));
  Check(r.Define("strata_heartbeat_round_trip_seconds",
                 MetricType::kHistogram,
                 "Worker heartbeat round trips, as the workers measured them.",
                 {}, observe::SecondsBuckets()));
  Check(r.Define("strata_workers", MetricType::kGauge, "Workers per state.",
                 {"state"}));
  Check(r.Define("strata_worker_heartbeat_age_seconds", MetricType::kGauge,
                 "Time since the worker's last heartbeat.", {"worker"}));
  Check(r.Define("strata_coordinator_state_writable", MetricType::kGauge,
                 "1 when the coordinator can persist changes.", {}));
  Check(r.Define("strata_coordinator_refused_changes_total",
                 MetricType::kCounter,
                 "Changes refused since the state dir became unwritable.", {}));
  Check(r.Define("strata_coordinator_render_cpu_seconds_total",
                 MetricType::kCounter,
                 "CPU time spent making /metrics (the event loop's snapshot "
                 "and the scraping thread's rendering), the dashboard's JSON "
                 "and traces: what observability costs the coordinator.",
                 {"what"}));
  if (!in.loop_steps.buckets.empty()) {
    Check(r.Define("strata_coordinator_loop_step_seconds",
                   MetricType::kHistogram,
                   "How long each request or tick held the coordinator's "
                   "event loop: wall time (what requests queued behind it "
                   "waited) and the loop thread's CPU time.",
                   {"clock"}, in.loop_steps.buckets));
  }
  Check(r.Define("strata_control_rejected_total", MetricType::kCounter,
                 "Control connections or frames rejected, by reason.",
                 {"reason"}));

  std::map<std::string, int> per_state;
  for (const char* name :
       {"PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"}) {
    per_state[name] = 0;
  }
  for (const control::JobInfo& job : in.jobs.jobs()) {
    const std::string state = control::JobState_Name(job.state());
    ++per_state[state];
    const std::string& id = job.job_id();
    Check(r.Set("strata_job_state", {id, state}, 1));
    Check(r.Set("strata_job_restarts_total", {id}, job.restart_count()));
    if (job.goodput().wall_s() > 0) {
      const observe::Goodput g = observe::FromProto(job.goodput());
      Check(r.Set("strata_job_goodput_ratio", {id}, g.ratio()));
      for (const auto& [cause, s] :
           {std::pair{"startup", g.startup_s}, {"restart", g.restart_s},
            {"hang", g.hang_s}, {"recompute", g.recompute_s},
            {"checkpoint", g.checkpoint_s}, {"straggler", g.straggler_s}}) {
        Check(r.Set("strata_job_lost_seconds", {id, cause}, s));
      }
    }
    const JobNumbers n = Summarize(job);
    if (n.step < 0) continue;
    Check(r.Set("strata_job_step", {id}, n.step));
    Check(r.Set("strata_job_step_seconds", {id}, n.slowest_s));
    Check(r.Set("strata_job_checkpoint_stall_seconds_total", {id}, n.stall_s));
    if (n.slowest_s > 0) {
      Check(
          r.Set("strata_job_tokens_per_second", {id}, n.tokens / n.slowest_s));
      if (auto mfu = observe::MeasuredMfu(job.plan(), n.slowest_s)) {
        Check(r.Set("strata_job_mfu_ratio", {id}, *mfu));
      }
    }
    std::vector<std::pair<double, int>> ranks = n.rank_seconds;
    std::sort(ranks.begin(), ranks.end(),
              [](const auto& a, const auto& b) { return a.first > b.first; });
    if (static_cast<int>(ranks.size()) > in.max_rank_series)
      ranks.resize(std::max(0, in.max_rank_series));
    std::sort(ranks.begin(), ranks.end(),
              [](const auto& a, const auto& b) { return a.second < b.second; });
    for (const auto& [seconds, rank] : ranks) {
      Check(r.Set("strata_rank_step_seconds", {id, std::to_string(rank)},
                  seconds));
    }
  }
  for (const auto& [state, count] : per_state)
    Check(r.Set("strata_jobs", {state}, count));
  for (const auto& [id, h] : in.step_seconds) {
    Check(r.SetHistogram("strata_job_step_duration_seconds", {id}, h));
  }
  if (in.heartbeat_rtt.count > 0) {
    Check(r.SetHistogram("strata_heartbeat_round_trip_seconds", {},
                         in.heartbeat_rtt));
  }

  int alive = 0, lost = 0;
  for (const control::WorkerInfo& w : in.workers.workers()) {
    (w.alive() ? alive : lost)++;
    if (w.alive() && w.last_heartbeat_unix_ms() > 0) {
      Check(r.Set(
          "strata_worker_heartbeat_age_seconds", {w.worker_id()},
          std::max<int64_t>(0, in.now_unix_ms - w.last_heartbeat_unix_ms()) /
              1000.0));
    }
  }
  Check(r.Set("strata_workers", {"alive"}, alive));
  Check(r.Set("strata_workers", {"lost"}, lost));
  const control::CoordinatorHealth& h = in.workers.health();
  Check(r.Set("strata_coordinator_state_writable", {},
              h.state_error().empty() ? 1 : 0));
  Check(r.Set("strata_coordinator_refused_changes_total", {},
              h.refused_changes()));
  for (const auto& [reason, count] : in.rejected)
    Check(r.Set("strata_control_rejected_total", {reason}, count));
  if (!in.loop_steps.buckets.empty() && in.loop_steps.wall.count > 0) {
    Check(r.SetHistogram("strata_coordinator_loop_step_seconds", {"wall"},
                         in.loop_steps.wall));
    Check(r.SetHistogram("strata_coordinator_loop_step_seconds", {"cpu"},
                         in.loop_steps.cpu));
  }
  for (const auto& [what, s] : in.render_cpu_seconds)
    Check(r.Set("strata_coordinator_render_cpu_seconds_total", {what}, s));
  return r.Exposition();
}

}  // namespace strata::coordinator
