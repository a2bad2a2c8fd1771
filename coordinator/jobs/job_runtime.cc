#include "coordinator/jobs/job_runtime.h"

#include "absl/strings/str_cat.h"

namespace strata::coordinator {

std::string DescribeExit(const control::RankReport& r) {
  if (r.state() == control::RANK_FAILED_TO_START) {
    return absl::StrCat("failed to start: ", r.message());
  }
  if (r.signal() != 0) return absl::StrCat("killed by signal ", r.signal());
  return absl::StrCat("exited with code ", r.exit_code());
}

const AttemptIndex& IndexOf(JobRuntime& rt) {
  if (rt.index.attempt == rt.info.attempt() && rt.index.built) return rt.index;
  rt.index = BuildAttemptIndex(rt.info);
  return rt.index;
}

AttemptIndex BuildAttemptIndex(const control::JobInfo& job) {
  AttemptIndex index;
  index.attempt = job.attempt();
  index.built = true;
  index.launches = AttemptLaunches::Prepare(job);
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

const std::vector<int>* RanksOn(JobRuntime& rt, const std::string& worker_id) {
  const AttemptIndex& index = IndexOf(rt);
  auto node = index.node_of_worker.find(worker_id);
  if (node == index.node_of_worker.end()) return nullptr;
  return &index.ranks_of_node[node->second];
}

}  // namespace strata::coordinator
