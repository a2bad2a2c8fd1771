#include "observe/spare_pool.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace strata::observe {

SparePool ComputeSparePool(const control::JobsReply& jobs,
                           const control::ListWorkersReply& workers) {
  std::set<std::string> running;
  std::map<std::string, std::string> spare_of;
  for (const auto& j : jobs.jobs()) {
    if (j.state() != control::PENDING && j.state() != control::RUNNING) {
      continue;
    }
    if (j.state() == control::RUNNING) {
      for (const auto& id : j.nodes()) running.insert(id);
    }
    for (const auto& id : j.spare_workers()) spare_of.emplace(id, j.job_id());
  }
  SparePool pool;
  for (const auto& w : workers.workers()) {
    const std::string& id = w.worker_id();
    if (!w.alive()) {
      ++pool.lost;
    } else if (running.contains(id) || w.holds_size() > 0) {
      pool.busy.push_back(id);
    } else if (auto it = spare_of.find(id); it != spare_of.end()) {
      pool.reserved[id] = it->second;
    } else {
      pool.free.push_back(id);
    }
  }
  return pool;
}

std::string DescribeSparePool(const SparePool& pool) {
  std::vector<std::string> reserved;
  for (const auto& [id, job] : pool.reserved) {
    reserved.push_back(absl::StrCat(id, " for ", job));
  }
  std::string text = absl::StrCat(
      pool.free.size() + pool.reserved.size(), " idle: ", pool.free.size(),
      " free [", absl::StrJoin(pool.free, ", "), "], ", pool.reserved.size(),
      " reserved as spares [", absl::StrJoin(reserved, ", "), "]; ",
      pool.busy.size(), " busy");
  if (pool.lost > 0) absl::StrAppend(&text, "; ", pool.lost, " lost");
  return text;
}

}  // namespace strata::observe
