// A Transport that forwards to another and writes each transfer into the
// flight-recorder entry of the operation in progress: the first completed
// exchange marks the operation started (its peers are present), and every
// call adds its bytes and time to the peers it moved data with. Driven by
// one thread at a time, like every transport (the process group sets the
// current entry before an operation runs and clears it after).
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

  // The entry transfers are recorded into; null records nothing.
  void SetCurrent(FlightRecorder::Op* op) { current_ = op; }

  int rank() const override { return base_->rank(); }
  int size() const override { return base_->size(); }
  const char* name() const override { return base_->name(); }
  Status SendRecv(int send_peer, const void* send, size_t send_bytes,
                  int recv_peer, void* recv, size_t recv_bytes,
                  Deadline deadline) override;
  Status SendRecvReduce(int send_peer, const void* send, size_t send_bytes,
                        int recv_peer, void* acc, size_t count, DataType type,
                        ReduceOp op, Deadline deadline) override;
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
};

}  // namespace strata::comm
