#include "coordinator/jobs/job_manager.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace strata::coordinator {

JobManager::JobManager(const Clock* clock, StateStore* store)
    : clock_(clock), store_(store) {}

Status JobManager::Recover() {
  ASSIGN_OR_RETURN(auto rows, store_->Scan("job/"));
  for (const auto& [key, value] : rows) {
    control::JobInfo info;
    if (!info.ParseFromString(value)) {
      return absl::DataLossError(
          absl::StrCat("state record ", key, " does not parse as JobInfo"));
    }
    jobs_[info.job_id()] = info;
  }
  auto next = store_->Get("meta/next_job_id");
  if (next.ok()) {
    if (!absl::SimpleAtoi(*next, &next_id_)) {
      return absl::DataLossError("meta/next_job_id is not an integer");
    }
  } else if (!absl::IsNotFound(next.status())) {
    return next.status();
  }
  return absl::OkStatus();
}

Status JobManager::Persist(const control::JobInfo& info) {
  return store_->Put(absl::StrCat("job/", info.job_id()),
                     info.SerializeAsString());
}

StatusOr<std::string> JobManager::Submit(const JobSpec& spec) {
  const JobLaunch& l = spec.launch();
  if (l.command().empty() || l.command(0).empty()) {
    return absl::InvalidArgumentError("job spec: launch.command is empty");
  }
  if (l.nodes() < 0 || l.ranks_per_node() < 0 || l.max_restarts() < 0) {
    return absl::InvalidArgumentError(
        "job spec: launch.nodes, ranks_per_node and max_restarts must be >= 0");
  }
  std::string id = absl::StrCat("job-", next_id_);
  RETURN_IF_ERROR(store_->Put("meta/next_job_id", absl::StrCat(next_id_ + 1)));
  ++next_id_;
  control::JobInfo info;
  info.set_job_id(id);
  *info.mutable_spec() = spec;
  info.set_state(control::PENDING);
  info.set_submit_unix_ms(clock_->NowMs());
  RETURN_IF_ERROR(Persist(info));
  jobs_[id] = info;
  return id;
}

StatusOr<control::JobInfo> JobManager::Get(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("no job '", job_id, "'"));
  }
  return it->second;
}

StatusOr<control::JobInfo> JobManager::Cancel(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("no job '", job_id, "'"));
  }
  control::JobInfo info = it->second;
  if (info.state() != control::PENDING && info.state() != control::RUNNING) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " already ended (",
                     control::JobState_Name(info.state()), ")"));
  }
  info.set_state(control::CANCELLED);
  info.set_end_unix_ms(clock_->NowMs());
  info.set_message("cancelled by user");
  RETURN_IF_ERROR(Persist(info));
  it->second = info;
  return info;
}

control::JobsReply JobManager::List() const {
  control::JobsReply reply;
  for (const auto& [id, info] : jobs_) *reply.add_jobs() = info;
  return reply;
}

}  // namespace strata::coordinator
