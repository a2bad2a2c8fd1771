// Point-to-point byte transport among the ranks of one group: the only thing
// collective algorithms see (gloo's Pair/Context split, STYLE.md). Each
// ordered pair of ranks is an in-order byte stream; a message's length is
// known to both sides, so there is no framing.
//
// Threading: one thread (the group's worker) drives a transport; Abort() may
// be called from any thread and makes every pending and later call return
// Aborted.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "comm/types.h"
#include "common/status.h"

namespace strata::comm {

// Deadlines of transport calls are points on the monotonic clock (not the
// injectable strata::Clock: a transport waits on real sockets).
using SteadyClock = std::chrono::steady_clock;
using Deadline = SteadyClock::time_point;

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Transport name for messages and benchmarks ("shm", "tcp", "inproc").
  virtual const char* name() const = 0;

  // Sends `send_bytes` to `send_peer` while receiving `recv_bytes` from
  // `recv_peer`, progressing both at once so two ranks exchanging large
  // buffers cannot deadlock. A peer of -1 (or 0 bytes) disables that side.
  // Errors name the peer: DeadlineExceeded when `deadline` passes,
  // Unavailable when the peer is gone (closed socket, dead process),
  // Aborted after Abort().
  virtual Status SendRecv(int send_peer, const void* send, size_t send_bytes,
                          int recv_peer, void* recv, size_t recv_bytes,
                          Deadline deadline) = 0;

  // Like SendRecv, but the `count` received elements of `type` are reduced
  // into `acc` (acc[i] = acc[i] op in[i]) instead of stored. The default
  // receives into a scratch buffer; transports that can read the peer's
  // bytes in place (shm) reduce straight out of them.
  virtual Status SendRecvReduce(int send_peer, const void* send,
                                size_t send_bytes, int recv_peer, void* acc,
                                size_t count, DataType type, ReduceOp op,
                                Deadline deadline);

  Status Send(int peer, const void* data, size_t bytes, Deadline deadline) {
    return SendRecv(peer, data, bytes, -1, nullptr, 0, deadline);
  }
  Status Recv(int peer, void* data, size_t bytes, Deadline deadline) {
    return SendRecv(-1, nullptr, 0, peer, data, bytes, deadline);
  }

  // All-reduce of `buf` among every rank of this transport through memory
  // they all map (shm: each rank copies its chunk into a shared slot, reduces
  // its share of every slot, then copies the others' shares; two barriers a
  // chunk instead of the ring's 2(n-1) dependent steps). Same calling rules
  // as the algorithms (algorithms.h); every rank gets the same bits.
  // Unimplemented where the ranks share no memory (shares_memory() false).
  virtual Status SharedAllReduce(void* buf, size_t count, DataType type,
                                 ReduceOp op, Deadline deadline);
  virtual bool shares_memory() const { return false; }

  virtual void Abort() = 0;

  // Counters of the transport's network connections (one per peer and
  // stream); empty for transports that use none (shm, in-process). Safe to
  // call from another thread while the driving thread sends: it only reads
  // kernel counters of sockets that stay open for the transport's life.
  virtual std::vector<LinkCounter> LinkCounters() const { return {}; }
};

// A sub-group view: rank i of the view is rank members[i] of `base`.
// Used by hierarchical algorithms (intra-node and inter-node groups) and by
// group construction from a plan. `base` must outlive the view.
class SubTransport final : public Transport {
 public:
  SubTransport(Transport* base, std::vector<int> members);
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  const char* name() const override { return base_->name(); }
  Status SendRecv(int send_peer, const void* send, size_t send_bytes,
                  int recv_peer, void* recv, size_t recv_bytes,
                  Deadline deadline) override;
  Status SendRecvReduce(int send_peer, const void* send, size_t send_bytes,
                        int recv_peer, void* acc, size_t count, DataType type,
                        ReduceOp op, Deadline deadline) override;
  // Only a view of all of `base`'s ranks in their order shares its memory:
  // the base's shared all-reduce is a collective of all its ranks. (Plan
  // groups put every pair of ranks in at most one group, so at most one of
  // them is such a view; plan_groups.h.)
  Status SharedAllReduce(void* buf, size_t count, DataType type, ReduceOp op,
                         Deadline deadline) override;
  bool shares_memory() const override {
    return whole_ && base_->shares_memory();
  }
  void Abort() override { base_->Abort(); }

 private:
  Transport* base_;
  std::vector<int> members_;
  int rank_ = -1;
  bool whole_ = false;  // members_ is 0, 1, ..., base_->size() - 1
};

// Ranks as threads of one process: `size` transports sharing in-memory
// pipes. Sends never block (they copy into the pipe). For tests and for
// single-process tools.
std::vector<std::unique_ptr<Transport>> NewInProcessTransports(int size);

}  // namespace strata::comm
