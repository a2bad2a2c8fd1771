#include "coordinator/jobs/launch_orders.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/mem_wire.h"
#include "coordinator/jobs/attempt_plan.h"

namespace strata::coordinator {

StatusOr<AttemptLaunches> AttemptLaunches::Prepare(
    const control::JobInfo& job) {
  const Plan& plan = job.plan();
  const JobLaunch& l = job.spec().launch();
  AttemptLaunches a;
  for (const control::WorkerInfo& n : job.node_info()) {
    a.nodes_.push_back({n.node_name(), n.address(), n.probe().gpus()});
  }
  if (plan.placement().ranks_size() == 0 || a.nodes_.empty()) {
    return absl::InvalidArgumentError("the attempt has no placed ranks");
  }
  ASSIGN_OR_RETURN(a.shape_, placement::ShapeOf(plan, a.nodes_.size()));
  placement::JobEndpoints& e = a.endpoints_;
  e.job_id = job.job_id();
  e.restart_count = job.attempt();
  e.max_restarts = l.max_restarts();
  // ShapeOf checked that every rank's node is one of nodes_.
  e.master_addr = a.nodes_[plan.placement().ranks(0).node()].address;
  e.master_port = job.master_port();
  e.ckpt_uri = l.checkpoint_uri();
  a.plan_json_ = PlanFileJson(plan);
  return a;
}

StatusOr<std::vector<control::RankLaunch>> AttemptLaunches::For(
    const control::JobInfo& job, const std::vector<int>& ranks) const {
  const JobLaunch& l = job.spec().launch();
  ASSIGN_OR_RETURN(
      std::vector<placement::RankEnv> envs,
      placement::RankEnvsFor(job.plan(), shape_, ranks, nodes_, endpoints_));
  // The memory tier (docs/checkpoint.md "Memory tier"): every node's
  // replica server in node order, when every node has one.
  std::vector<std::string> replicas;
  for (const control::WorkerInfo& n : job.node_info()) {
    if (n.replica_endpoint().empty()) {
      replicas.clear();
      break;
    }
    replicas.push_back(n.replica_endpoint());
  }
  std::vector<control::RankLaunch> out;
  out.reserve(envs.size());
  for (const placement::RankEnv& e : envs) {
    control::RankLaunch launch;
    launch.set_job_id(job.job_id());
    launch.set_attempt(job.attempt());
    launch.set_rank(e.rank);
    *launch.mutable_command() = l.command();
    auto& env = *launch.mutable_env();
    env = l.env();
    // torchrun sets one OpenMP thread per process unless told otherwise.
    // (insert keeps a value the job set; it also sidesteps GCC 12's false
    // -Wrestrict on assigning a literal to a map's new std::string.)
    env.insert({std::string("OMP_NUM_THREADS"), std::string("1")});
    // The rank environment (docs/placement.md) wins over the job's own.
    for (auto& [k, v] : placement::Variables(e)) env[k] = std::move(v);
    if (!replicas.empty()) {
      env[checkpoint::mem::kMemPeersEnv] = absl::StrJoin(replicas, ",");
      env[checkpoint::mem::kMemNodeEnv] = std::to_string(e.node_rank);
    }
    launch.set_plan_json(plan_json_);
    out.push_back(std::move(launch));
  }
  return out;
}

}  // namespace strata::coordinator
