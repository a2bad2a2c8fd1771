// Launch orders of one attempt (docs/control-plane.md "Jobs: from submit to
// end", steps 4-5). What is the same for every rank of the attempt (the plan
// file, the nodes' endpoints, the job-wide values, the plan's shape) is made
// once per attempt, in O(ranks of the attempt); each heartbeat then builds
// its node's orders in O(ranks on that node). Building them from the whole
// plan on every heartbeat cost O(nodes + ranks) per heartbeat: at 16,384
// ranks on 4,096 nodes that was 40% of the coordinator's CPU during the
// hand-out and saturated its event loop (docs/results.md "Coordinator at
// scale"). Plain data; immutable once prepared, so it may be made on any
// thread.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "placement/rank_env.h"
#include "proto/control.pb.h"

namespace strata::coordinator {

class AttemptLaunches {
 public:
  // For `job`'s current attempt (job.plan and job.node_info set).
  // InvalidArgument when the plan places no rank, or places one on a node
  // the job does not have.
  static StatusOr<AttemptLaunches> Prepare(const control::JobInfo& job);

  // Launch orders for `ranks` (ranks of one node) of the attempt `job` is
  // in (the record Prepare was given, or a later version of it in the same
  // attempt): the job's command and environment plus the rank environment
  // of docs/placement.md (placement::RankEnvsFor), and OMP_NUM_THREADS=1
  // unless the job sets it. STRATA_STORE, STRATA_TELEMETRY and STRATA_PLAN
  // are added by the worker, which knows its endpoints and files.
  // InvalidArgument when the plan does not place one of the ranks.
  StatusOr<std::vector<control::RankLaunch>> For(
      const control::JobInfo& job, const std::vector<int>& ranks) const;

  // PlanFileJson(job.plan()): what every launch order carries.
  const std::string& plan_json() const { return plan_json_; }

 private:
  std::string plan_json_;
  placement::PlanShape shape_;
  std::vector<placement::NodeEndpoint> nodes_;
  placement::JobEndpoints endpoints_;
};

}  // namespace strata::coordinator
