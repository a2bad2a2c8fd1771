// Broadcast, barrier and all-to-all.
#include <cstring>

#include "comm/algorithms/algorithms.h"

namespace strata::comm::algorithms {

Status BinomialBroadcast(Transport& t, void* buf, size_t bytes, int root,
                         Deadline deadline) {
  STRATA_CHECK_COLLECTIVE(t, buf, bytes);
  STRATA_CHECK_GE(root, 0);
  STRATA_CHECK_LT(root, t.size());
  const int n = t.size();
  if (n == 1 || bytes == 0) return absl::OkStatus();
  const int vr = (t.rank() - root + n) % n;  // rank relative to the root
  // Receive from the parent (clear the lowest set bit), then send to the
  // children vr + 2^k for 2^k below that bit (MPICH binomial tree).
  int mask = 1;
  while (mask < n) {
    if (vr & mask) {
      const int parent = ((vr - mask) + root) % n;
      RETURN_IF_ERROR(t.Recv(parent, buf, bytes, deadline));
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (vr + mask < n) {
      RETURN_IF_ERROR(t.Send((vr + mask + root) % n, buf, bytes, deadline));
    }
  }
  return absl::OkStatus();
}

Status DisseminationBarrier(Transport& t, Deadline deadline) {
  STRATA_CHECK_COLLECTIVE(t, &t, 0);
  const int n = t.size(), r = t.rank();
  char out = 1, in = 0;
  for (int k = 1; k < n; k <<= 1) {
    RETURN_IF_ERROR(
        t.SendRecv((r + k) % n, &out, 1, (r - k + n) % n, &in, 1, deadline));
  }
  return absl::OkStatus();
}

Status PairwiseAllToAll(Transport& t, const void* in, void* out,
                        size_t bytes_per_rank, Deadline deadline) {
  STRATA_CHECK_COLLECTIVE(t, out, bytes_per_rank);
  STRATA_CHECK(bytes_per_rank == 0 || in != out);
  const int n = t.size(), r = t.rank();
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  std::memcpy(dst + r * bytes_per_rank, src + r * bytes_per_rank,
              bytes_per_rank);
  for (int k = 1; k < n; ++k) {
    const int to = (r + k) % n, from = (r - k + n) % n;
    RETURN_IF_ERROR(t.SendRecv(to, src + to * bytes_per_rank, bytes_per_rank,
                               from, dst + from * bytes_per_rank,
                               bytes_per_rank, deadline));
  }
  return absl::OkStatus();
}

}  // namespace strata::comm::algorithms
