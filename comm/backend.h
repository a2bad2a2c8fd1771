// The collective interface every rank uses (docs/comm.md). Operations are
// asynchronous: each returns a Work handle; operations of one Backend run
// one at a time in submission order (like a CUDA/NCCL stream), so every rank
// must submit the same sequence. Buffers must stay valid until the Work
// completes.
//
// Errors (STYLE.md): DeadlineExceeded when the operation's timeout passes,
// naming the peer that did not answer; Unavailable when a peer is gone;
// Aborted after Abort(); InvalidArgument for bad arguments. After any error
// the group is broken: later operations fail with FailedPrecondition and the
// caller rebuilds the group (groups are immutable).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>

#include "comm/types.h"
#include "common/status.h"

namespace strata::comm {

enum class Algorithm {
  kAuto,
  kRing,
  kRecursiveDoubling,
  kHierarchical,
  kShared,  // through memory all ranks map (Transport::SharedAllReduce)
};
const char* AlgorithmName(Algorithm a);

struct OpOptions {
  // 0 = the backend's default timeout.
  std::chrono::milliseconds timeout{0};
  // kAuto lets the tuner choose (all-reduce only); others force it.
  Algorithm algorithm = Algorithm::kAuto;
  // Run on the calling thread (after any queued operations) and return a
  // completed Work, like a blocking MPI call: no thread hand-offs, for
  // latency-bound calls whose result is needed at once.
  bool synchronous = false;
};

class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the operation finishes or `timeout` passes (then
  // DeadlineExceeded for the wait, the operation keeps running).
  virtual Status Wait(
      std::chrono::milliseconds timeout = std::chrono::milliseconds::max()) = 0;
  virtual bool IsCompleted() = 0;
  // Aborts the whole group: this and every pending operation return Aborted.
  virtual void Abort() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* name() const = 0;

  // In place over `count` elements; kAvg divides by size().
  virtual std::shared_ptr<Work> AllReduce(void* buf, size_t count,
                                          DataType type, ReduceOp op,
                                          const OpOptions& opts = {}) = 0;
  // `in` holds `count` elements; `out` receives this rank's block
  // [count*r/n, count*(r+1)/n) of the reduction (any count, 0 included).
  virtual std::shared_ptr<Work> ReduceScatter(const void* in, void* out,
                                              size_t count, DataType type,
                                              ReduceOp op,
                                              const OpOptions& opts = {}) = 0;
  // `in` holds this rank's block of `count` elements (see ReduceScatter);
  // `out` receives all `count`.
  virtual std::shared_ptr<Work> AllGather(const void* in, void* out,
                                          size_t count, DataType type,
                                          const OpOptions& opts = {}) = 0;
  virtual std::shared_ptr<Work> Broadcast(void* buf, size_t count,
                                          DataType type, int root,
                                          const OpOptions& opts = {}) = 0;
  // `in` and `out` hold size() blocks of `count_per_rank` elements.
  virtual std::shared_ptr<Work> AllToAll(const void* in, void* out,
                                         size_t count_per_rank, DataType type,
                                         const OpOptions& opts = {}) = 0;
  virtual std::shared_ptr<Work> Send(const void* buf, size_t count,
                                     DataType type, int peer,
                                     const OpOptions& opts = {}) = 0;
  virtual std::shared_ptr<Work> Recv(void* buf, size_t count, DataType type,
                                     int peer, const OpOptions& opts = {}) = 0;
  // Sends `send_count` elements to `send_peer` while receiving `recv_count`
  // into `recv` from `recv_peer`, as one operation that progresses both
  // directions: two neighbours exchanging buffers larger than any internal
  // buffering cannot deadlock (separate Send then Recv on both sides can).
  // A peer of -1 or a count of 0 disables that side (no message: both
  // ranks of a pair must agree); the two peers may be the same rank.
  virtual std::shared_ptr<Work> SendRecv(const void* send, size_t send_count,
                                         int send_peer, void* recv,
                                         size_t recv_count, int recv_peer,
                                         DataType type,
                                         const OpOptions& opts = {}) = 0;
  virtual std::shared_ptr<Work> Barrier(const OpOptions& opts = {}) = 0;

  // Unblocks every pending operation with Aborted; thread-safe.
  virtual void Abort() = 0;

  // Seconds this group's operations spent so far, cumulative: `wait` from
  // running an operation until its first exchange with a peer completed
  // (the peers were not there yet), `comm` from then until it finished
  // (data moving). Zero for backends that do not measure (mpi, nccl).
  // Thread-safe.
  struct CommTime {
    double wait_s = 0, comm_s = 0;
  };
  virtual CommTime comm_time() const { return {}; }
};

}  // namespace strata::comm
