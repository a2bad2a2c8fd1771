#include "launch/rank_env.h"

#include <algorithm>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "planner/placement.h"

namespace strata::launch {

StatusOr<ParallelSizes> DeriveParallelSizes(int world_size, int tp, int pp,
                                            int cp) {
  for (auto [name, v] : {std::pair{"--tp", tp}, {"--pp", pp}, {"--cp", cp}}) {
    if (v < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " must be at least 1, got ", v));
    }
  }
  const int64_t model = static_cast<int64_t>(tp) * pp * cp;
  if (world_size < 1 || world_size % model != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "world size ", world_size, " is not divisible by tp*pp*cp = ", model,
        " (--tp ", tp, " --pp ", pp, " --cp ", cp, ")"));
  }
  return ParallelSizes{tp, pp, static_cast<int>(world_size / model), cp};
}

Locality ComputeLocality(const std::vector<std::string>& node_of_rank,
                         int rank) {
  std::vector<std::string> nodes;  // in order of their lowest rank
  Locality loc;
  loc.local_rank = 0;
  loc.local_world_size = 0;
  for (int r = 0; r < static_cast<int>(node_of_rank.size()); ++r) {
    const std::string& n = node_of_rank[r];
    if (std::find(nodes.begin(), nodes.end(), n) == nodes.end())
      nodes.push_back(n);
    if (n == node_of_rank[rank]) {
      if (r < rank) ++loc.local_rank;
      ++loc.local_world_size;
    }
  }
  loc.num_nodes = static_cast<int>(nodes.size());
  loc.node_rank = static_cast<int>(
      std::find(nodes.begin(), nodes.end(), node_of_rank[rank]) -
      nodes.begin());
  return loc;
}

bool NodesAreContiguousEqualBlocks(
    const std::vector<std::string>& node_of_rank) {
  const int n = static_cast<int>(node_of_rank.size());
  if (n == 0) return true;
  const Locality first = ComputeLocality(node_of_rank, 0);
  const int block = first.local_world_size;
  if (n % block != 0) return false;
  for (int r = 0; r < n; ++r) {
    if (node_of_rank[r] != node_of_rank[r - r % block]) return false;
    if (r % block == 0 &&
        ComputeLocality(node_of_rank, r).local_world_size != block)
      return false;
  }
  return true;
}

std::map<std::string, std::string> RankVariables(const RankEnvInputs& in) {
  planner::Candidate c;
  c.tp = in.sizes.tp;
  c.pp = in.sizes.pp;
  c.dp = in.sizes.dp;
  c.cp = in.sizes.cp;
  const planner::RankCoord coord = planner::CoordOf(c, in.rank);
  auto s = [](int64_t v) { return std::to_string(v); };
  std::map<std::string, std::string> v = {
      {"RANK", s(in.rank)},
      {"WORLD_SIZE", s(in.world_size)},
      {"LOCAL_RANK", s(in.locality.local_rank)},
      {"LOCAL_WORLD_SIZE", s(in.locality.local_world_size)},
      {"GROUP_RANK", s(in.locality.node_rank)},
      {"GROUP_WORLD_SIZE", s(in.locality.num_nodes)},
      {"NODE_RANK", s(in.locality.node_rank)},
      {"MASTER_ADDR", in.master_addr},
      {"MASTER_PORT", s(in.master_port)},
      {"STRATA_JOB_ID", in.job_id},
      {"STRATA_STORE", in.store},
      {"STRATA_TP", s(in.sizes.tp)},
      {"STRATA_PP", s(in.sizes.pp)},
      {"STRATA_DP", s(in.sizes.dp)},
      {"STRATA_CP", s(in.sizes.cp)},
      {"STRATA_TP_RANK", s(coord.tp)},
      {"STRATA_PP_RANK", s(coord.pp)},
      {"STRATA_DP_RANK", s(coord.dp)},
      {"STRATA_CP_RANK", s(coord.cp)},
      {"STRATA_RESTART_COUNT", "0"},
      {"STRATA_NODE_NAME", in.node_name},
      {"STRATA_NODE_ADDR", in.node_addr},
  };
  if (!in.ckpt_uri.empty()) v["STRATA_CKPT_URI"] = in.ckpt_uri;
  return v;
}

std::vector<std::string> ChildEnvironment(
    const std::vector<std::string>& inherited,
    const std::map<std::string, std::string>& vars) {
  auto dropped = [&](std::string_view name) {
    return name.starts_with("OMPI_") || name.starts_with("PMIX_") ||
           name == "STRATA_PLAN" || name == "STRATA_TELEMETRY" ||
           vars.count(std::string(name)) > 0;
  };
  std::vector<std::string> out;
  for (const std::string& kv : inherited) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || dropped(std::string_view(kv).substr(0, eq)))
      continue;
    out.push_back(kv);
  }
  for (const auto& [k, val] : vars) out.push_back(k + "=" + val);
  return out;
}

}  // namespace strata::launch
