// Collective algorithms written only against Transport (gloo style). All are
// in place on `buf` unless stated; counts are in elements of `type`. Every
// rank of the transport must call with the same arguments (except buffer
// contents). Bytes on the wire per rank, for an S-byte buffer on n ranks:
//   ring all-reduce 2(n-1)/n S (bandwidth-optimal; Patarasuk & Yuan 2009),
//   recursive doubling all-reduce log2(n) S (latency-optimal; Thakur et al.
//   2005), hierarchical: intra-node ring reduce-scatter + inter-node
//   all-reduce of S/r among same-local-rank peers + intra-node all-gather.
#pragma once

#include <cstddef>
#include <vector>

#include "comm/transport.h"
#include "comm/types.h"

namespace strata::comm::algorithms {

// Entry invariants of every algorithm (callers validate user input first,
// so a failure is a bug): a rank inside a non-empty group and a buffer
// wherever there are bytes to move.
#define STRATA_CHECK_COLLECTIVE(t, buf, count)      \
  do {                                              \
    STRATA_CHECK_GE((t).size(), 1);                 \
    STRATA_CHECK_GE((t).rank(), 0);                 \
    STRATA_CHECK_LT((t).rank(), (t).size());        \
    STRATA_CHECK((count) == 0 || (buf) != nullptr); \
  } while (0)

// Block i of `count` elements split over n ranks: [Begin(i), Begin(i+1)).
// Blocks differ in size by at most one element; any count works, 0 too.
inline size_t BlockBegin(size_t count, int n, int i) {
  return count * static_cast<size_t>(i) / static_cast<size_t>(n);
}

// Ring reduce-scatter: afterwards rank r holds the reduction of block r in
// place (other blocks hold partial sums).
Status RingReduceScatter(Transport& t, void* buf, size_t count, DataType type,
                         ReduceOp op, Deadline deadline);
// Ring all-gather: rank r contributes block r; afterwards all blocks.
Status RingAllGather(Transport& t, void* buf, size_t count, DataType type,
                     Deadline deadline);
Status RingAllReduce(Transport& t, void* buf, size_t count, DataType type,
                     ReduceOp op, Deadline deadline);
// Recursive doubling; non-powers of two fold the extra ranks in first.
Status RecursiveDoublingAllReduce(Transport& t, void* buf, size_t count,
                                  DataType type, ReduceOp op,
                                  Deadline deadline);
// Two-level all-reduce. `node_of[r]` names rank r's node; every node must
// hold the same number of ranks (FailedPrecondition otherwise).
Status HierarchicalAllReduce(Transport& t, const std::vector<int>& node_of,
                             void* buf, size_t count, DataType type,
                             ReduceOp op, Deadline deadline);
// Binomial-tree broadcast of `bytes` from `root`.
Status BinomialBroadcast(Transport& t, void* buf, size_t bytes, int root,
                         Deadline deadline);
// Dissemination barrier: ceil(log2 n) rounds of 1-byte messages.
Status DisseminationBarrier(Transport& t, Deadline deadline);
// Pairwise exchange: block j of `in` (bytes_per_rank each) goes to rank j,
// block i of `out` comes from rank i. `in` and `out` must not overlap.
Status PairwiseAllToAll(Transport& t, const void* in, void* out,
                        size_t bytes_per_rank, Deadline deadline);

}  // namespace strata::comm::algorithms
