#include "coordinator/metrics/trace_download.h"

#include <chrono>
#include <vector>

#include "observe/trace.h"
#include "observe/trace_reply.h"

namespace strata::coordinator {

StatusOr<std::string> TraceDownload::Get(const std::string& job) {
  std::unique_lock lock(mu_);
  const int64_t ticket =
      wanted_.try_emplace(job, clock_->SteadyNowMs()).first->second;
  const bool ready =
      cv_.wait_for(lock, std::chrono::milliseconds(kWaitMs), [&] {
        auto it = done_.find(job);
        return it != done_.end() && it->second.ticket >= ticket;
      });
  if (!ready) {
    return absl::DeadlineExceededError(
        "the coordinator did not make the trace in time");
  }
  return done_.at(job).text;
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
    auto [poll, fresh] = polls_.try_emplace(job);
    control::TraceRequest& req = poll->second;
    if (fresh) {
      req.set_job_id(job);
      req.set_newest_steps(kSteps);
    }
    auto reply = jobs.Trace(req, registry);
    if (!reply.ok()) {
      made.emplace_back(job, reply.status());
    } else if (reply->pending_size() == 0 || now - since >= kCollectMs) {
      made.emplace_back(
          job, observe::WriteTrace(observe::TraceInputFromReply(*reply, true)));
    } else {  // poll again on the next turn, as `strata trace` does
      req.set_collection(reply->collection());
      req.set_first_step(reply->first_step());
      req.set_last_step(reply->last_step());
      continue;
    }
    polls_.erase(poll);
  }
  if (made.empty()) return;
  std::lock_guard lock(mu_);
  // Traces are megabytes: keep them only for the readers waiting now.
  std::erase_if(done_, [&](const auto& kv) {
    return now - kv.second.ticket > 2 * kWaitMs;
  });
  for (auto& [job, text] : made) {
    const int64_t ticket = wanted.at(job);
    if (wanted_[job] == ticket) wanted_.erase(job);
    done_.insert_or_assign(job, Made{ticket, std::move(text)});
  }
  cv_.notify_all();
}

}  // namespace strata::coordinator
