#include "coordinator/metrics/trace_download.h"

#include <chrono>
#include <vector>

#include "observe/trace.h"
#include "observe/trace_reply.h"

namespace strata::coordinator {

StatusOr<std::string> TraceDownload::Get(const std::string& job) {
  std::unique_lock lock(mu_);
  wanted_.try_emplace(job, clock_->SteadyNowMs());
  const bool ready = cv_.wait_for(lock, std::chrono::milliseconds(kWaitMs),
                                  [&] { return done_.contains(job); });
  if (!ready) {
    return absl::DeadlineExceededError(
        "the coordinator did not make the trace in time");
  }
  // Every reader waiting for this job saw it by now or will make a new one.
  auto it = done_.find(job);
  StatusOr<std::string> out = it->second;
  done_.erase(it);
  return out;
}

void TraceDownload::Serve(JobManager& jobs, const WorkerRegistry& registry) {
  std::map<std::string, int64_t> wanted;
  {
    std::lock_guard lock(mu_);
    wanted = wanted_;
  }
  if (wanted.empty()) return;
  const int64_t now = clock_->SteadyNowMs();
  std::vector<std::pair<std::string, StatusOr<std::string>>> made;
  for (const auto& [job, since] : wanted) {
    control::TraceRequest req;
    req.set_job_id(job);
    req.set_newest_steps(kSteps);
    auto reply = jobs.Trace(req, registry);
    if (!reply.ok()) {
      made.emplace_back(job, reply.status());
    } else if (reply->pending_size() == 0 || now - since >= kCollectMs) {
      made.emplace_back(job, observe::WriteTrace(
                                 observe::TraceInputFromReply(*reply, true)));
    }
  }
  if (made.empty()) return;
  std::lock_guard lock(mu_);
  for (auto& [job, text] : made) {
    wanted_.erase(job);
    done_.insert_or_assign(job, std::move(text));
  }
  cv_.notify_all();
}

}  // namespace strata::coordinator
