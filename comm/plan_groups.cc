#include "comm/plan_groups.h"

#include <map>

#include "absl/strings/str_cat.h"

namespace strata::comm {

PlanGroups::~PlanGroups() {
  tp.reset();
  cp.reset();
  dp.reset();
  pp.reset();
}

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
  void Abort() override { view_.Abort(); }

 private:
  std::shared_ptr<Transport> world_;
  SubTransport view_;
};

}  // namespace

StatusOr<std::unique_ptr<PlanGroups>> BuildPlanGroups(
    std::shared_ptr<Transport> world, const Placement& placement,
    const GroupOptions& base_options) {
  const int me = world->rank();
  if (placement.ranks_size() != world->size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("placement has ", placement.ranks_size(),
                     " ranks, the world transport ", world->size()));
  }
  std::vector<int> node_of(placement.ranks_size());
  for (const RankPlacement& r : placement.ranks()) {
    if (r.rank() < 0 || r.rank() >= world->size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("placement rank ", r.rank(), " out of range"));
    }
    node_of[r.rank()] = r.node();
  }
  auto out = std::make_unique<PlanGroups>();
  out->world = world;
  std::map<std::string, std::pair<std::unique_ptr<ProcessGroup>*, int*>> slots =
      {{"tp", {&out->tp, &out->tp_index}},
       {"cp", {&out->cp, &out->cp_index}},
       {"dp", {&out->dp, &out->dp_index}},
       {"pp", {&out->pp, &out->pp_index}}};
  for (int gi = 0; gi < placement.groups_size(); ++gi) {
    const Group& g = placement.groups(gi);
    auto slot = slots.find(g.kind());
    if (slot == slots.end()) continue;
    std::vector<int> members(g.ranks().begin(), g.ranks().end());
    if (std::find(members.begin(), members.end(), me) == members.end())
      continue;
    if (*slot->second.first) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", me, " is in two '", g.kind(), "' groups of the placement"));
    }
    GroupOptions opts = base_options;
    opts.node_of.clear();
    for (int m : members) opts.node_of.push_back(node_of[m]);
    *slot->second.first = std::make_unique<ProcessGroup>(
        std::make_unique<SharedSubTransport>(world, members), opts);
    *slot->second.second = g.index();
  }
  for (const auto& [kind, slot] : slots) {
    if (!*slot.first) {
      return absl::InvalidArgumentError(absl::StrCat(
          "placement has no '", kind, "' group containing rank ", me));
    }
  }
  return out;
}

}  // namespace strata::comm
