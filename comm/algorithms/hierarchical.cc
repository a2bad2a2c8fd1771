// Two-level all-reduce (the intra/inter split of NCCL's tree/ring and
// Horovod's hierarchical all-reduce): ranks of a node reduce-scatter over
// the fast local link, then the ranks holding the same block on every node
// all-reduce it across the network (all blocks in parallel, each rank on its
// own link), then the node all-gathers. Inter-node bytes per rank:
// 2(k-1)/k * S/r instead of the flat ring's 2(n-1)/n * S.
#include <map>

#include "absl/strings/str_cat.h"
#include "comm/algorithms/algorithms.h"

namespace strata::comm::algorithms {

Status HierarchicalAllReduce(Transport& t, const std::vector<int>& node_of,
                             void* buf, size_t count, DataType type,
                             ReduceOp op, Deadline deadline) {
  const int n = t.size(), r = t.rank();
  if (static_cast<int>(node_of.size()) != n) {
    return absl::InvalidArgumentError("node map size differs from group size");
  }
  // Local groups in rank order; my index inside my node.
  std::map<int, std::vector<int>> nodes;
  for (int i = 0; i < n; ++i) nodes[node_of[i]].push_back(i);
  const size_t local_size = nodes.begin()->second.size();
  for (const auto& [node, ranks] : nodes) {
    if (ranks.size() != local_size) {
      return absl::FailedPreconditionError(absl::StrCat(
          "hierarchical all-reduce needs equal ranks per node; node ", node,
          " has ", ranks.size(), ", another has ", local_size));
    }
  }
  const std::vector<int>& mine = nodes[node_of[r]];
  int local_rank = 0;
  while (mine[local_rank] != r) ++local_rank;
  std::vector<int> cross;  // same local index on every node
  for (const auto& [node, ranks] : nodes) cross.push_back(ranks[local_rank]);

  SubTransport local(&t, mine);
  SubTransport inter(&t, cross);
  RETURN_IF_ERROR(RingReduceScatter(local, buf, count, type, op, deadline));
  const int lr = static_cast<int>(local_size);
  const size_t b0 = BlockBegin(count, lr, local_rank);
  const size_t b1 = BlockBegin(count, lr, local_rank + 1);
  char* block = static_cast<char*>(buf) + b0 * ElementSize(type);
  if (inter.size() > 1 && b1 > b0) {
    RETURN_IF_ERROR(RingAllReduce(inter, block, b1 - b0, type, op, deadline));
  }
  return RingAllGather(local, buf, count, type, deadline);
}

}  // namespace strata::comm::algorithms
