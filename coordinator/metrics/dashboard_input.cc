#include "coordinator/metrics/dashboard_input.h"

#include <algorithm>
#include <vector>

namespace strata::coordinator {

DashboardInput CollectDashboard(const JobManager& jobs, EventLog& events,
                                const WorkerRegistry& registry,
                                int64_t now_unix_ms) {
  DashboardInput in;
  in.now_unix_ms = now_unix_ms;
  in.jobs = jobs.List(/*with_steps=*/true);
  in.workers = registry.List();
  std::vector<const control::JobInfo*> ended;
  for (const auto& job : in.jobs.jobs()) {
    if (job.state() == control::RUNNING) {
      DashboardJob& d = in.detail[job.job_id()];
      int64_t newest = 0;
      for (const auto& s : job.steps()) newest = std::max(newest, s.step());
      control::DiagnoseRequest req;
      req.set_job_id(job.job_id());
      req.set_history(true);
      req.set_first_step(std::max<int64_t>(0, newest - kDashboardHeatmapSteps + 1));
      if (auto diag = jobs.Diagnose(req); diag.ok()) d.diagnose = *std::move(diag);
      d.curve = jobs.Curve(job.job_id());
    } else if (job.state() != control::PENDING) {
      ended.push_back(&job);
    }
  }
  std::sort(ended.begin(), ended.end(), [](auto* a, auto* b) {
    return a->end_unix_ms() > b->end_unix_ms();
  });
  if (ended.size() > static_cast<size_t>(kDashboardEndedJobs))
    ended.resize(kDashboardEndedJobs);
  for (const auto* job : ended) in.detail[job->job_id()];
  for (auto& [id, d] : in.detail) {
    auto list = events.List(id, 0);
    if (!list.ok()) continue;
    d.events.assign(list->events().begin(), list->events().end());
  }
  return in;
}

}  // namespace strata::coordinator
