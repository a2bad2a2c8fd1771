// Recursive-doubling all-reduce (Thakur, Rabenseifner & Gropp 2005, §4.4):
// log2(p) exchange rounds of the whole buffer, best for small messages where
// latency dominates. With n not a power of two, the n - p extra ranks first
// hand their data to a partner among the first p and get the result back at
// the end.
#include <vector>

#include "comm/algorithms/algorithms.h"

namespace strata::comm::algorithms {

Status RecursiveDoublingAllReduce(Transport& t, void* buf, size_t count,
                                  DataType type, ReduceOp op,
                                  Deadline deadline) {
  STRATA_CHECK_COLLECTIVE(t, buf, count);
  const int n = t.size(), r = t.rank();
  if (n == 1 || count == 0) return absl::OkStatus();
  const size_t bytes = count * ElementSize(type);
  int p = 1;
  while (p * 2 <= n) p *= 2;
  thread_local std::vector<char> scratch;
  if (scratch.size() < bytes) scratch.resize(bytes);
  if (r >= p) {  // extra rank: give data to r - p, wait for the result
    RETURN_IF_ERROR(t.Send(r - p, buf, bytes, deadline));
    return t.Recv(r - p, buf, bytes, deadline);
  }
  if (r + p < n) {
    RETURN_IF_ERROR(t.Recv(r + p, scratch.data(), bytes, deadline));
    ReduceInto(buf, scratch.data(), count, type, op);
  }
  for (int mask = 1; mask < p; mask <<= 1) {
    const int peer = r ^ mask;
    RETURN_IF_ERROR(
        t.SendRecv(peer, buf, bytes, peer, scratch.data(), bytes, deadline));
    // Reduce in rank order so every rank computes the same bits even for
    // non-associative floating-point sums.
    if (peer < r) {
      ReduceInto(scratch.data(), buf, count, type, op);
      std::copy(scratch.begin(), scratch.begin() + bytes,
                static_cast<char*>(buf));
    } else {
      ReduceInto(buf, scratch.data(), count, type, op);
    }
  }
  if (r + p < n) RETURN_IF_ERROR(t.Send(r + p, buf, bytes, deadline));
  return absl::OkStatus();
}

}  // namespace strata::comm::algorithms
