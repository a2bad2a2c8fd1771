#include "launch/nodes.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace strata::launch {

std::string RankHost::Encode() const {
  return absl::StrCat(node_name, "\n", hostname, "\n", address);
}

RankHost RankHost::Decode(const std::string& wire) {
  std::vector<std::string> p = absl::StrSplit(wire, absl::MaxSplits('\n', 2));
  p.resize(3);
  return {p[0], p[1], p[2]};
}

StatusOr<JobNodes> GroupNodes(const std::vector<RankHost>& ranks) {
  JobNodes out;
  auto host_of = [](const RankHost& h) {
    return absl::StrCat(h.hostname, "\n", h.address);
  };
  for (const RankHost& h : ranks) {
    out.one_host = out.one_host && host_of(h) == host_of(ranks[0]);
  }
  std::map<std::string, int> index;  // node key -> node index
  std::vector<int> first_rank;       // node index -> its lowest rank
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) {
    const RankHost& h = ranks[r];
    if (!out.one_host && h.address.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", r, " (host ", h.hostname,
          ") has no non-loopback IPv4 address, but the ranks run on several "
          "hosts"));
    }
    const std::string key = h.node_name.empty() ? host_of(h) : h.node_name;
    auto [it, added] =
        index.try_emplace(key, static_cast<int>(out.nodes.size()));
    if (added) {
      out.nodes.push_back({h.node_name.empty() ? h.hostname : h.node_name,
                           out.one_host ? "127.0.0.1" : h.address, 0});
      first_rank.push_back(r);
    } else if (host_of(h) != host_of(ranks[first_rank[it->second]])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ranks ", first_rank[it->second], " and ", r, " have --node-name ",
          h.node_name, " but run on different hosts (",
          ranks[first_rank[it->second]].hostname, ", ", h.hostname, ")"));
    }
    out.node_of_rank.push_back(it->second);
  }
  return out;
}

bool NodesAreContiguousEqualBlocks(const std::vector<int>& node_of_rank) {
  const int n = static_cast<int>(node_of_rank.size());
  int block = 0;  // ranks of node 0
  while (block < n && node_of_rank[block] == node_of_rank[0]) ++block;
  if (block == 0 || n % block != 0) return false;
  for (int r = 0; r < n; ++r) {
    if (node_of_rank[r] != r / block) return false;
  }
  return true;
}

}  // namespace strata::launch
