// A Transport that forwards to another and notes, for the operation in
// progress, when its first exchange completed (its peers are present), and,
// with a flight-recorder entry, writes each transfer into it: the first
// completed exchange marks the entry started, and every call adds its bytes
// and time to the peers it moved data with. Driven by one thread at a time,
// like every transport (the process group brackets each operation with
// BeginOp / EndOp).
#pragma once

#include <memory>
#include <vector>

#include "comm/flight_recorder.h"
#include "comm/transport.h"

namespace strata::comm {

class RecordingTransport final : public Transport {
 public:
  // `world_ranks[i]` is the world rank of group rank i (empty: group ranks
  // are recorded as they are).
  RecordingTransport(std::unique_ptr<Transport> base,
                     std::vector<int> world_ranks)
      : base_(std::move(base)), world_ranks_(std::move(world_ranks)) {}

  // Starts tracking an operation; transfers go into `op` unless null.
  void BeginOp(FlightRecorder::Op* op) {
    current_ = op;
    first_ns_ = 0;
    tracking_ = true;
  }
  // Ends it; returns when its first exchange completed (wall ns, 0: none).
  int64_t EndOp() {
    current_ = nullptr;
    tracking_ = false;
    return first_ns_;
  }

  int rank() const override { return base_->rank(); }
  int size() const override { return base_->size(); }
  const char* name() const override { return base_->name(); }
  Status SendRecv(int send_peer, const void* send, size_t send_bytes,
                  int recv_peer, void* recv, size_t recv_bytes,
                  Deadline deadline) override;
  Status SendRecvReduce(int send_peer, const void* send, size_t send_bytes,
                        int recv_peer, void* acc, size_t count, DataType type,
                        ReduceOp op, Deadline deadline) override;
  // Recorded as one transfer of the buffer's bytes with every other rank.
  Status SharedAllReduce(void* buf, size_t count, DataType type, ReduceOp op,
                         Deadline deadline) override;
  bool shares_memory() const override { return base_->shares_memory(); }
  void Abort() override { base_->Abort(); }

 private:
  void Record(int send_peer, size_t send_bytes, int recv_peer,
              size_t recv_bytes, int64_t start_ns, const Status& st);
  int World(int peer) const {
    return peer >= 0 && peer < static_cast<int>(world_ranks_.size())
               ? world_ranks_[peer]
               : peer;
  }

  std::unique_ptr<Transport> base_;
  std::vector<int> world_ranks_;
  FlightRecorder::Op* current_ = nullptr;
  bool tracking_ = false;
  int64_t first_ns_ = 0;
};

}  // namespace strata::comm
