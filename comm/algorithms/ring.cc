// Ring reduce-scatter and all-gather (Patarasuk & Yuan 2009; the NCCL and
// gloo ring). Each step moves one block to the right neighbour while the
// left neighbour's block arrives and is reduced as it streams in: the
// transport's SendRecvReduce consumes the incoming bytes in chunks (for shm
// straight out of the ring), so reduction overlaps the transfer.
#include <algorithm>
#include <utility>

#include "comm/algorithms/algorithms.h"

namespace strata::comm::algorithms {
namespace {

int Mod(int a, int n) { return ((a % n) + n) % n; }

// Element range [first, second) of block `i` (taken mod n).
std::pair<size_t, size_t> Block(size_t count, int n, int i) {
  i = Mod(i, n);
  return {BlockBegin(count, n, i), BlockBegin(count, n, i + 1)};
}

}  // namespace

Status RingReduceScatter(Transport& t, void* buf, size_t count, DataType type,
                         ReduceOp op, Deadline deadline) {
  STRATA_CHECK_COLLECTIVE(t, buf, count);
  const int n = t.size(), r = t.rank();
  if (n == 1 || count == 0) return absl::OkStatus();
  const size_t es = ElementSize(type);
  char* base = static_cast<char*>(buf);
  const int right = Mod(r + 1, n), left = Mod(r - 1, n);
  for (int step = 0; step < n - 1; ++step) {
    // Send the block reduced in the previous step; receive the one to the
    // left of it. After n-1 steps rank r owns block r.
    const auto [s0, s1] = Block(count, n, r - step - 1);
    const auto [r0, r1] = Block(count, n, r - step - 2);
    RETURN_IF_ERROR(t.SendRecvReduce(right, base + s0 * es, (s1 - s0) * es,
                                     left, base + r0 * es, r1 - r0, type, op,
                                     deadline));
  }
  return absl::OkStatus();
}

Status RingAllGather(Transport& t, void* buf, size_t count, DataType type,
                     Deadline deadline) {
  STRATA_CHECK_COLLECTIVE(t, buf, count);
  const int n = t.size(), r = t.rank();
  if (n == 1 || count == 0) return absl::OkStatus();
  const size_t es = ElementSize(type);
  char* base = static_cast<char*>(buf);
  const int right = Mod(r + 1, n), left = Mod(r - 1, n);
  for (int step = 0; step < n - 1; ++step) {
    const auto [s0, s1] = Block(count, n, r - step);
    const auto [r0, r1] = Block(count, n, r - step - 1);
    RETURN_IF_ERROR(t.SendRecv(right, base + s0 * es, (s1 - s0) * es, left,
                               base + r0 * es, (r1 - r0) * es, deadline));
  }
  return absl::OkStatus();
}

Status RingAllReduce(Transport& t, void* buf, size_t count, DataType type,
                     ReduceOp op, Deadline deadline) {
  RETURN_IF_ERROR(RingReduceScatter(t, buf, count, type, op, deadline));
  return RingAllGather(t, buf, count, type, deadline);
}

}  // namespace strata::comm::algorithms
