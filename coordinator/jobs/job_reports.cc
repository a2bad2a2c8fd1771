// JobManager's intake of what ranks report through their workers (step
// telemetry, output relay) and the placement facts it is checked against
// (docs/security.md "Telemetry"). Split from job_manager.cc; same class.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "control/codec.h"
#include "coordinator/jobs/attempt_plan.h"
#include "coordinator/jobs/job_manager.h"

namespace strata::coordinator {

using control::AttemptKey;

bool JobManager::MayRelayLogs(const std::string& worker_id,
                              const std::string& job_id, int attempt,
                              int rank) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || attempt < 0 || attempt > it->second.attempt() ||
      rank < 0 || rank >= it->second.ranks_size()) {
    return false;
  }
  if (attempt < it->second.attempt() ||
      it->second.state() != control::RUNNING) {
    return true;
  }
  return PlacedOn(worker_id, job_id, attempt, rank);
}

std::optional<JobFacts> JobManager::Facts(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return std::nullopt;
  return JobFacts{it->second.owner(), it->second.attempt(),
                  it->second.state() == control::RUNNING};
}

bool JobManager::PlacedOn(const std::string& worker_id,
                          const std::string& job_id, int attempt, int rank) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() || it->second.state() != control::RUNNING) {
    return false;
  }
  const control::JobInfo& job = it->second;
  if ((attempt >= 0 && attempt != job.attempt()) || rank < 0 ||
      rank >= job.ranks_size()) {
    return false;
  }
  const AttemptIndex& index = Index(job);
  auto node = index.node_of_worker.find(worker_id);
  if (node == index.node_of_worker.end()) return false;
  const std::vector<int>& ranks = index.ranks_of_node[node->second];
  return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

const JobManager::AttemptIndex& JobManager::Index(const control::JobInfo& job) {
  AttemptIndex& index = index_[job.job_id()];
  if (index.attempt == job.attempt() && !index.plan_json.empty()) return index;
  index = AttemptIndex();
  index.attempt = job.attempt();
  index.plan_json = PlanFileJson(job.plan());
  for (int i = 0; i < job.node_info_size(); ++i) {
    index.node_of_worker[job.node_info(i).worker_id()] = i;
  }
  index.ranks_of_node.resize(job.node_info_size());
  for (const auto& r : job.plan().placement().ranks()) {
    if (r.node() >= 0 && r.node() < job.node_info_size()) {
      index.ranks_of_node[r.node()].push_back(r.rank());
    }
  }
  return index;
}

void JobManager::OnLogs(
    const google::protobuf::RepeatedPtrField<control::LogChunk>& chunks) {
  for (const auto& c : chunks) {
    if (!jobs_.contains(c.job_id())) continue;
    Status s = logs_->Append(c);
    // Logged when output starts and stops being lost, not for every chunk
    // (a full disk would otherwise add a line per heartbeat).
    if (!s.ok() && !losing_output_) {
      logger_->error("storing job output (first loss: {}): {}", c.job_id(),
                     s.ToString());
    } else if (s.ok() && losing_output_) {
      logger_->info("storing job output again");
    }
    losing_output_ = !s.ok();
  }
}

int JobManager::OnSteps(
    const std::string& worker_id,
    const google::protobuf::RepeatedPtrField<control::StepReport>& steps) {
  int dropped = 0;
  for (const auto& report : steps) {
    if (!PlacedOn(worker_id, report.job_id(), -1, report.rank())) {
      ++dropped;
      continue;
    }
    auto it = jobs_.find(report.job_id());
    if (!report.phase().empty() || report.phase_end()) {
      WatchedOf(it->second).monitor->OnPhase(report);  // not a step
      continue;
    }
    auto& latest = steps_[report.job_id()];
    if (auto prev = latest.find(report.rank());
        prev != latest.end() && report.step() <= prev->second.step()) {
      ++dropped;  // steps only move forward
      continue;
    }
    // The job's declared length is what it said first; a later report
    // cannot stretch it (docs/security.md "Telemetry").
    int64_t& declared = declared_steps_[report.job_id()];
    if (declared == 0 && report.total_steps() > 0) {
      declared = report.total_steps();
    }
    if (declared > 0 && report.step() > declared) {
      ++dropped;
      continue;
    }
    control::StepReport s = report;
    s.set_total_steps(declared);
    latest[s.rank()] = s;
    if (s.rank() == 0) {  // the job moves in lock-step: rank 0's steps
      auto ckpt = s.section_seconds().find("checkpoint");
      LedgerOf(it->second).OnStep(
          it->second.attempt(), s.step(), s.unix_ms(), s.step_seconds(),
          ckpt == s.section_seconds().end() ? 0 : ckpt->second);
      step_hist_[s.job_id()].Add(observe::SecondsBuckets(), s.step_seconds());
    }
    Watch(it->second, s);
  }
  return dropped;
}

}  // namespace strata::coordinator
