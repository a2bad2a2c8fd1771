// Job records: submit, status, list, cancel, persisted in a StateStore
// before any reply so a coordinator restart loses no acknowledged job.
// Placement and launch are not implemented yet: jobs stay PENDING until
// cancelled. Event-loop thread only; not thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "common/status.h"
#include "coordinator/protocol/clock.h"
#include "coordinator/state/state_store.h"
#include "proto/control.pb.h"

namespace strata::coordinator {

class JobManager {
 public:
  // `clock` and `store` must outlive the manager.
  JobManager(const Clock* clock, StateStore* store);

  // Reloads every job from the store. DataLoss if a record does not parse.
  Status Recover();

  // Validates the spec (non-empty command, non-negative counts) and stores
  // it as a PENDING job. Returns the new job id ("job-<n>").
  StatusOr<std::string> Submit(const JobSpec& spec);
  StatusOr<control::JobInfo> Get(const std::string& job_id) const;
  // Moves a PENDING/RUNNING job to CANCELLED; FailedPrecondition if it has
  // already ended.
  StatusOr<control::JobInfo> Cancel(const std::string& job_id);
  control::JobsReply List() const;

 private:
  Status Persist(const control::JobInfo& info);

  const Clock* clock_;
  StateStore* store_;
  int64_t next_id_ = 1;
  std::map<std::string, control::JobInfo> jobs_;
};

}  // namespace strata::coordinator
