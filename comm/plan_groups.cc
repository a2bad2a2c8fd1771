#include "comm/plan_groups.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace strata::comm {
namespace {

// SubTransport that keeps the world transport alive.
class SharedSubTransport final : public Transport {
 public:
  SharedSubTransport(std::shared_ptr<Transport> world, std::vector<int> members)
      : world_(std::move(world)), view_(world_.get(), std::move(members)) {}
  int rank() const override { return view_.rank(); }
  int size() const override { return view_.size(); }
  const char* name() const override { return view_.name(); }
  Status SendRecv(int sp, const void* s, size_t sb, int rp, void* r, size_t rb,
                  Deadline d) override {
    return view_.SendRecv(sp, s, sb, rp, r, rb, d);
  }
  Status SendRecvReduce(int sp, const void* s, size_t sb, int rp, void* acc,
                        size_t count, DataType t, ReduceOp op,
                        Deadline d) override {
    return view_.SendRecvReduce(sp, s, sb, rp, acc, count, t, op, d);
  }
  Status SharedAllReduce(void* buf, size_t count, DataType t, ReduceOp op,
                         Deadline d) override {
    return view_.SharedAllReduce(buf, count, t, op, d);
  }
  bool shares_memory() const override { return view_.shares_memory(); }
  void Abort() override { view_.Abort(); }

 private:
  std::shared_ptr<Transport> world_;
  SubTransport view_;
};

}  // namespace

StatusOr<std::unique_ptr<PlanGroups>> BuildPlanGroups(
    int rank, int world_size, const Placement& placement,
    const GroupMaker& make) {
  if (placement.ranks_size() != world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("placement has ", placement.ranks_size(),
                     " ranks, the world ", world_size));
  }
  std::vector<int> node_of(world_size);
  for (const RankPlacement& r : placement.ranks()) {
    if (r.rank() < 0 || r.rank() >= world_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("placement rank ", r.rank(), " out of range"));
    }
    node_of[r.rank()] = r.node();
  }
  // This rank's group of each kind, in the order groups are made.
  const char* kinds[] = {"tp", "cp", "dp", "pp"};
  const Group* mine[4] = {nullptr, nullptr, nullptr, nullptr};
  for (const Group& g : placement.groups()) {
    const auto k = std::find(std::begin(kinds), std::end(kinds), g.kind());
    if (k == std::end(kinds)) continue;
    if (std::find(g.ranks().begin(), g.ranks().end(), rank) == g.ranks().end())
      continue;
    const Group*& slot = mine[k - std::begin(kinds)];
    if (slot != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank, " is in two '", g.kind(),
                       "' groups of the placement"));
    }
    slot = &g;
  }
  auto out = std::make_unique<PlanGroups>();
  std::unique_ptr<Backend>* backends[] = {&out->tp, &out->cp, &out->dp,
                                          &out->pp};
  int* indices[] = {&out->tp_index, &out->cp_index, &out->dp_index,
                    &out->pp_index};
  for (int k = 0; k < 4; ++k) {
    if (mine[k] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "placement has no '", kinds[k], "' group containing rank ", rank));
    }
    std::vector<int> members(mine[k]->ranks().begin(), mine[k]->ranks().end());
    std::vector<int> nodes;
    for (int m : members) {
      if (m < 0 || m >= world_size) {
        return absl::InvalidArgumentError(absl::StrCat(
            "placement '", kinds[k], "' group ", mine[k]->index(), " has rank ",
            m, " outside the world of ", world_size));
      }
      nodes.push_back(node_of[m]);
    }
    ASSIGN_OR_RETURN(*backends[k],
                     make(kinds[k], mine[k]->index(), members, nodes));
    *indices[k] = mine[k]->index();
  }
  return out;
}

StatusOr<std::unique_ptr<PlanGroups>> BuildPlanGroups(
    std::shared_ptr<Transport> world, const Placement& placement,
    const GroupOptions& base_options) {
  auto groups = BuildPlanGroups(
      world->rank(), world->size(), placement,
      [&](const std::string& kind, int index, const std::vector<int>& members,
          const std::vector<int>& node_of)
          -> StatusOr<std::unique_ptr<Backend>> {
        GroupOptions opts = base_options;
        opts.node_of = node_of;
        // The same on every member, unique in the job (flight recorder).
        opts.name = absl::StrCat(kind, index);
        opts.world_ranks = members;
        return std::make_unique<ProcessGroup>(
            std::make_unique<SharedSubTransport>(world, members), opts);
      });
  if (groups.ok()) (*groups)->world = std::move(world);
  return groups;
}

}  // namespace strata::comm
