// Two-level all-reduce (the intra/inter split of NCCL's tree/ring and
// Horovod's hierarchical all-reduce): ranks of a node reduce-scatter over
// the fast local link, then the ranks holding the same block on every node
// all-reduce it across the network (all blocks in parallel, each rank on its
// own link), then the node all-gathers. Inter-node bytes per rank:
// 2(k-1)/k * S/r instead of the flat ring's 2(n-1)/n * S. Large buffers are
// cut into segments and pipelined: the inter-node phase of one segment
// overlaps the intra-node phases of its neighbours.
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "comm/algorithms/algorithms.h"

namespace strata::comm::algorithms {
namespace {
// Pipeline segment between the levels: large enough to keep the network
// busy, small enough for several segments to overlap.
constexpr size_t kHierarchicalSegmentBytes = 4 << 20;
}  // namespace

Status HierarchicalAllReduce(Transport& t, const std::vector<int>& node_of,
                             void* buf, size_t count, DataType type,
                             ReduceOp op, Deadline deadline) {
  STRATA_CHECK_COLLECTIVE(t, buf, count);
  const int n = t.size(), r = t.rank();
  STRATA_CHECK_EQ(node_of.size(), static_cast<size_t>(n));
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
  const size_t es = ElementSize(type);
  const int lr = static_cast<int>(local_size);
  // One segment: intra-node reduce-scatter, inter-node all-reduce of this
  // rank's block, intra-node all-gather.
  auto my_block = [&](char* seg, size_t n) {
    const size_t b0 = BlockBegin(n, lr, local_rank),
                 b1 = BlockBegin(n, lr, local_rank + 1);
    return std::make_pair(seg + b0 * es, b1 - b0);
  };
  char* base = static_cast<char*>(buf);
  const size_t seg = std::max<size_t>(1, kHierarchicalSegmentBytes / es);
  const size_t segments = (count + seg - 1) / seg;
  if (segments < 3 || inter.size() == 1) {
    RETURN_IF_ERROR(RingReduceScatter(local, buf, count, type, op, deadline));
    auto [block, n] = my_block(base, count);
    if (inter.size() > 1 && n > 0) {
      RETURN_IF_ERROR(RingAllReduce(inter, block, n, type, op, deadline));
    }
    return RingAllGather(local, buf, count, type, deadline);
  }
  // Pipelined: a helper thread runs the inter-node all-reduce of segment i
  // while this thread reduce-scatters segment i+1 and all-gathers segment
  // i-1 over the node's fast link (the phases use disjoint rank pairs).
  std::mutex mu;
  std::condition_variable cv;
  size_t scattered = 0, reduced = 0;  // segments through each phase
  Status inter_status;
  std::thread helper([&] {
    for (size_t i = 0; i < segments; ++i) {
      {
        std::unique_lock<std::mutex> lock(mu);
        if (!cv.wait_until(lock, deadline, [&] {
              return scattered > i || !inter_status.ok();
            })) {
          inter_status =
              absl::DeadlineExceededError("hierarchical pipeline stalled");
        }
        if (!inter_status.ok()) break;
      }
      const size_t s0 = i * seg, n = std::min(seg, count - s0);
      auto [block, bn] = my_block(base + s0 * es, n);
      Status st = bn > 0 ? RingAllReduce(inter, block, bn, type, op, deadline)
                         : absl::OkStatus();
      std::lock_guard<std::mutex> lock(mu);
      if (!st.ok()) inter_status = st;
      reduced = i + 1;
      cv.notify_all();
      if (!st.ok()) break;
    }
  });
  // The intra-node sequence must be the same on every rank of a node (their
  // byte streams pair up), so it is fixed: RS(0), then for each i: RS(i+1),
  // wait for the helper's AR(i), AG(i).
  auto scatter = [&](size_t i) -> Status {
    const size_t s0 = i * seg, n = std::min(seg, count - s0);
    Status st = RingReduceScatter(local, base + s0 * es, n, type, op, deadline);
    std::lock_guard<std::mutex> lock(mu);
    if (st.ok()) {
      scattered = i + 1;
    } else if (inter_status.ok()) {
      inter_status = st;  // stops the helper
    }
    cv.notify_all();
    return st;
  };
  Status st = scatter(0);
  for (size_t i = 0; i < segments && st.ok(); ++i) {
    if (i + 1 < segments) {
      st = scatter(i + 1);
      if (!st.ok()) break;
    }
    {
      std::unique_lock<std::mutex> lock(mu);
      if (!cv.wait_until(lock, deadline,
                         [&] { return reduced > i || !inter_status.ok(); })) {
        st = absl::DeadlineExceededError("hierarchical pipeline stalled");
        break;
      }
      if (!inter_status.ok()) {
        st = inter_status;
        break;
      }
    }
    const size_t s0 = i * seg, n = std::min(seg, count - s0);
    st = RingAllGather(local, base + s0 * es, n, type, deadline);
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!st.ok() && inter_status.ok()) inter_status = st;
    cv.notify_all();
  }
  helper.join();
  if (!st.ok()) return st;
  return inter_status;
}

}  // namespace strata::comm::algorithms
