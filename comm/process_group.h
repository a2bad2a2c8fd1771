// ProcessGroup: the Backend that runs comm/algorithms over a Transport
// (shm, tcp, in-process). One worker thread per group executes operations
// in submission order; Work handles complete from that thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/backend.h"
#include "comm/flight_recorder.h"
#include "comm/recording_transport.h"
#include "comm/transport.h"
#include "common/logging.h"
#include "common/mutex.h"

namespace strata::comm {

struct GroupOptions {
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  // node_of[r]: node index of rank r (hierarchical algorithm, tuner). Empty
  // means every rank on its own node.
  std::vector<int> node_of;
  // Tuner thresholds: all-reduces up to this size use recursive doubling
  // (latency-bound); larger ones the ring, or the hierarchical algorithm
  // when the group spans several nodes with equal ranks per node. On a
  // transport whose ranks share memory (shm) the shared algorithm replaces
  // recursive doubling, for 3 or more ranks the ring too, and for 2 ranks
  // the ring from shared_two_rank_min_bytes up (measured, docs/results.md
  // "Choices behind the tuner").
  size_t small_message_bytes = 8 * 1024;
  size_t shared_two_rank_min_bytes = size_t{16} << 20;
  // Flight recorder (flight_recorder.h) every operation of the group is
  // written to under `name` ("world", "tp0", "dp1", ...); null records
  // nothing. `world_ranks[i]` is the world rank of group rank i, so the
  // recorder names peers by world rank (empty: group ranks).
  std::shared_ptr<FlightRecorder> recorder;
  std::string name = "world";
  std::vector<int> world_ranks;
};

class ProcessGroup final : public Backend {
 public:
  ProcessGroup(std::unique_ptr<Transport> transport, GroupOptions options,
               Logger logger = GetLogger("COMM"));
  ~ProcessGroup() override;

  int rank() const override { return transport_->rank(); }
  int size() const override { return transport_->size(); }
  const char* name() const override { return transport_->name(); }

  // The algorithm the tuner picks for an all-reduce of `bytes`.
  Algorithm ChooseAllReduce(size_t bytes) const;

  std::shared_ptr<Work> AllReduce(void* buf, size_t count, DataType type,
                                  ReduceOp op,
                                  const OpOptions& opts = {}) override;
  std::shared_ptr<Work> ReduceScatter(const void* in, void* out, size_t count,
                                      DataType type, ReduceOp op,
                                      const OpOptions& opts = {}) override;
  std::shared_ptr<Work> AllGather(const void* in, void* out, size_t count,
                                  DataType type,
                                  const OpOptions& opts = {}) override;
  std::shared_ptr<Work> Broadcast(void* buf, size_t count, DataType type,
                                  int root,
                                  const OpOptions& opts = {}) override;
  std::shared_ptr<Work> AllToAll(const void* in, void* out,
                                 size_t count_per_rank, DataType type,
                                 const OpOptions& opts = {}) override;
  std::shared_ptr<Work> Send(const void* buf, size_t count, DataType type,
                             int peer, const OpOptions& opts = {}) override;
  std::shared_ptr<Work> Recv(void* buf, size_t count, DataType type, int peer,
                             const OpOptions& opts = {}) override;
  std::shared_ptr<Work> Barrier(const OpOptions& opts = {}) override;
  // Over Transport::SendRecv, which progresses both directions at once.
  std::shared_ptr<Work> SendRecv(const void* send, size_t send_count,
                                 int send_peer, void* recv, size_t recv_count,
                                 int recv_peer, DataType type,
                                 const OpOptions& opts = {}) override;
  void Abort() override;
  CommTime comm_time() const override {
    return {wait_ns_.load(std::memory_order_relaxed) / 1e9,
            comm_ns_.load(std::memory_order_relaxed) / 1e9};
  }

 private:
  class OpWork;
  class DoneWork;
  using Op = std::function<Status(Deadline)>;
  // Runs `f` at once on the calling thread when `opts.synchronous` and the
  // group is idle (no queue, no std::function, no hand-off); otherwise
  // queues it like Enqueue.
  // `bytes` is the operation's payload for the flight recorder.
  template <typename F>
  std::shared_ptr<Work> Submit(const char* what, size_t bytes,
                               const OpOptions& opts, F&& f);
  Status Annotate(const char* what, Status st) const;
  std::shared_ptr<Work> Enqueue(const char* what, const OpOptions& opts, Op op);
  void Loop();
  // Runs the queue's head (lock held on entry and exit, released while the
  // op runs).
  void RunHead(UniqueLock& lock) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs `work` on the calling thread if it is the queue's head and nothing
  // is running; returns whether it did.
  bool RunIfHead(const Work* work);

  std::unique_ptr<Transport> transport_;
  GroupOptions options_;
  // Set when options_.recorder is: transport_ wraps it, and every operation
  // gets a sequence number in this group and a recorder entry.
  RecordingTransport* recording_ = nullptr;       // wraps transport_, always
  std::atomic<int64_t> wait_ns_{0}, comm_ns_{0};  // comm_time()
  int recorder_group_ = -1;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  Logger logger_;
  bool hierarchical_ok_ = false;  // > 1 node, equal ranks per node
  // What every synchronous operation that succeeds returns: completed work
  // is immutable, so one object serves them all (no allocation per
  // blocking call).
  std::shared_ptr<Work> done_ok_;
  // ReduceScatter's working copy of its input, kept between calls: a fresh
  // buffer per call costs a page fault per 4 KiB (a 40 MB gradient
  // reduce-scatter on 2 shm ranks took about 33 ms that way, about 10 ms
  // with the buffer kept; docs/comm.md). Only the running op touches it
  // (one op runs at a time).
  std::vector<char> scatter_buf_;

  Mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::shared_ptr<OpWork>, Op>> queue_
      ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // An op is executing (worker or inline).
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  Status broken_ ABSL_GUARDED_BY(mu_);
  std::thread worker_;
};

}  // namespace strata::comm
