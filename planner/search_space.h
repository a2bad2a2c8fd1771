// Step 1 of PlanJob (search.cc): the search space. Private to the
// planner's search; docs/planner.md "Search".
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "planner/candidate.h"
#include "planner/search.h"

namespace strata::planner::search_internal {

struct ZeroOption {
  int stage;
  bool distopt;
};

// Enumerates candidates in a fixed order, one group of axes at a time:
// layouts (tp, cp, pp and the dp they leave), then schedules of a layout
// (micro-batch, vpp), then options of a schedule (ZeRO, recompute). Each
// group drops the values its divisibility rules or the pinned --fix values
// exclude, so every candidate visited is runnable. Borrows `req`.
class SearchSpace {
 public:
  SearchSpace(const PlanRequest& req, int seq);

  // Calls visit(candidate) for every candidate, in order. Stops and
  // returns false as soon as visit returns false.
  template <typename Visit>
  bool ForEach(Visit&& visit) const {
    return ForEachShard(0, 1,
                        [&](const Candidate& c, size_t) { return visit(c); });
  }

  // The same over one shard of a parallel search: the layouts whose index
  // is `shard` modulo `shards`, in order; visit(candidate, layout index).
  // The shards of 0..shards-1 together visit every candidate once.
  template <typename Visit>
  bool ForEachShard(int shard, int shards, Visit&& visit) const {
    std::vector<Candidate> layouts, schedules, options;
    Layouts(&layouts);
    for (size_t i = shard; i < layouts.size(); i += shards) {
      Schedules(layouts[i], &schedules);
      for (const Candidate& schedule : schedules) {
        Options(schedule, &options);
        for (const Candidate& c : options) {
          if (!visit(c, i)) return false;
        }
      }
    }
    return true;
  }

 private:
  void Layouts(std::vector<Candidate>* out) const;
  void Schedules(const Candidate& layout, std::vector<Candidate>* out) const;
  void Options(const Candidate& schedule, std::vector<Candidate>* out) const;
  bool ZeroAllowed(const ZeroOption& z, const Candidate& schedule) const;
  bool RecomputeAllowed(Recompute::Mode rc) const;

  // (ep, etp) pairs of MoE layers for a layout's stage of `stage_ranks`.
  void ExpertLayouts(const Candidate& layout,
                     std::vector<std::pair<int, int>>* out) const;

 public:
  // Offload targets the search tries for an option (none when --fix pins
  // offload: Options then sets it on every candidate).
  const std::vector<Offload::Kind>& offload_kinds() const {
    return offload_kinds_;
  }
  // Offload of `c`'s optimizer state is runnable: its state is sharded
  // (ZeRO >= 1 or the distributed optimizer; Megatron-core offloads only
  // its distributed optimizer, and to CPU only) or there is one shard.
  bool OffloadAllowed(Offload::Kind kind, const Candidate& c) const;
  // On this cluster the host step is slower per parameter than the GPU's
  // (OffloadDominated), so an offload twin of a candidate that fits without
  // offload can never be faster and is not scored.
  bool offload_dominated() const { return offload_dominated_; }
  // Host seconds per parameter of the offloaded step (lower bound) and of
  // the GPU step (upper bound), for the explanation.
  double host_s_per_param() const { return host_s_per_param_; }
  double gpu_s_per_param() const { return gpu_s_per_param_; }

 private:
  const PlanRequest& req_;
  const PlanConstraints& fix_;
  const int layers_;
  std::vector<int> tps_, cps_;
  std::vector<int> eps_;  // divisors of the experts (MoE models), else {1}
  int64_t max_micro_batch_ = 1;  // sequences
  int max_vpp_ = 1;
  std::vector<Offload::Kind> offload_kinds_;
  bool offload_dominated_ = true;
  double host_s_per_param_ = 0, gpu_s_per_param_ = 0;
};

// The offload targets the cluster's host supports (HostSpec fields > 0).
bool HostSupports(const HostSpec& host, Offload::Kind kind);

}  // namespace strata::planner::search_internal
