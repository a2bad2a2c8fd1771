#include "comm/process_group.h"

#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "comm/algorithms/algorithms.h"

namespace strata::comm {

const char* AlgorithmName(Algorithm a) {
  switch (a) {
    case Algorithm::kAuto:
      return "auto";
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kRecursiveDoubling:
      return "recursive_doubling";
    case Algorithm::kHierarchical:
      return "hierarchical";
    case Algorithm::kShared:
      return "shared";
  }
  return "?";
}

class ProcessGroup::OpWork final : public Work {
 public:
  explicit OpWork(ProcessGroup* group) : group_(group) {}

  Status Wait(std::chrono::milliseconds timeout) override {
    // If this operation is next in line and nothing runs, execute it on the
    // waiting thread: saves the worker's wake-up and the completion hand-off
    // (latency-bound small collectives) without making the call blocking.
    if (!IsCompleted()) group_->RunIfHead(this);
    UniqueLock lock(mu_);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_; };
    if (timeout == std::chrono::milliseconds::max()) {
      cv_.wait(lock.native(), done);
    } else if (!cv_.wait_for(lock.native(), timeout, done)) {
      return absl::DeadlineExceededError("Work::Wait timed out");
    }
    return status_;
  }

  bool IsCompleted() override {
    MutexLock lock(mu_);
    return done_;
  }

  void Abort() override { group_->Abort(); }

  void Finish(Status st) {
    {
      MutexLock lock(mu_);
      status_ = std::move(st);
      done_ = true;
    }
    cv_.notify_all();
  }

 private:
  ProcessGroup* group_;
  Mutex mu_;
  std::condition_variable cv_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  Status status_ ABSL_GUARDED_BY(mu_);
};

class ProcessGroup::DoneWork final : public Work {
 public:
  DoneWork(ProcessGroup* group, Status st)
      : group_(group), st_(std::move(st)) {}
  Status Wait(std::chrono::milliseconds) override { return st_; }
  bool IsCompleted() override { return true; }
  void Abort() override { group_->Abort(); }

 private:
  ProcessGroup* group_;
  Status st_;
};

Status ProcessGroup::Annotate(const char* what, Status st) const {
  if (st.ok()) return st;
  return Status(st.code(), absl::StrCat(what, " on rank ", rank(), "/", size(),
                                        ": ", st.message()));
}

template <typename F>
std::shared_ptr<Work> ProcessGroup::Submit(const char* what, size_t bytes,
                                           const OpOptions& opts, F&& body) {
  const auto timeout =
      opts.timeout.count() > 0 ? opts.timeout : options_.timeout;
  // The recorder entry is written when the caller enters the operation
  // (submission order is execution order); the operation fills in started,
  // transfers and finished as it runs. An operation refused because the
  // group broke earlier stays "entered".
  FlightRecorder::Op rec;
  if (options_.recorder) {
    uint64_t seq;
    {
      MutexLock lock(mu_);
      seq = ++next_seq_;
    }
    rec = options_.recorder->Begin(recorder_group_, seq, what, bytes);
  }
  auto f = [this, rec,
            body = std::forward<F>(body)](Deadline d) mutable -> Status {
    const int64_t t0 = WallNowNs();
    recording_->BeginOp(rec.active() ? &rec : nullptr);
    Status st = body(d);
    const int64_t first = recording_->EndOp();
    const int64_t t1 = WallNowNs();
    if (rec.active()) rec.Finish(st.ok());
    // Waiting until the first exchange completed, moving data after it.
    const int64_t started = first > 0 ? first : t1;
    wait_ns_.fetch_add(started - t0, std::memory_order_relaxed);
    comm_ns_.fetch_add(t1 - started, std::memory_order_relaxed);
    return st;
  };
  if (opts.synchronous) {
    bool idle;
    {
      MutexLock lock(mu_);
      idle = queue_.empty() && !running_ && broken_.ok();
      running_ = running_ || idle;
    }
    if (idle) {
      Status st = Annotate(what, f(SteadyClock::now() + timeout));
      bool queued;
      {
        MutexLock lock(mu_);
        running_ = false;
        if (!st.ok() && broken_.ok()) broken_ = st;
        queued = !queue_.empty();
      }
      if (!st.ok()) logger_->error("{}", std::string(st.message()));
      // Wake the worker only for ops other threads queued meanwhile (a
      // needless wake-up costs a context switch per call).
      if (queued) cv_.notify_all();
      if (st.ok()) return done_ok_;
      return std::make_shared<DoneWork>(this, std::move(st));
    }
  }
  return Enqueue(what, opts, Op(std::move(f)));
}

ProcessGroup::ProcessGroup(std::unique_ptr<Transport> transport,
                           GroupOptions options, Logger logger)
    : transport_(std::move(transport)),
      options_(std::move(options)),
      logger_(std::move(logger)) {
  auto rec = std::make_unique<RecordingTransport>(std::move(transport_),
                                                  options_.world_ranks);
  recording_ = rec.get();
  transport_ = std::move(rec);
  if (options_.recorder) {
    recorder_group_ = options_.recorder->AddGroup(options_.name);
  }
  const int n = transport_->size();
  if (static_cast<int>(options_.node_of.size()) != n) {
    options_.node_of.resize(n);
    for (int r = 0; r < n; ++r) options_.node_of[r] = r;
  }
  std::map<int, int> per_node;
  for (int node : options_.node_of) ++per_node[node];
  hierarchical_ok_ =
      per_node.size() > 1 && per_node.size() < static_cast<size_t>(n);
  for (const auto& [node, count] : per_node) {
    hierarchical_ok_ &= count == per_node.begin()->second;
  }
  done_ok_ = std::make_shared<DoneWork>(this, absl::OkStatus());
  worker_ = std::thread([this] { Loop(); });
}

ProcessGroup::~ProcessGroup() {
  bool busy;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    busy = running_ || !queue_.empty();
  }
  // Destroying a group mid-operation aborts it (its peers cannot finish
  // either) instead of waiting out the operation's timeout.
  if (busy) Abort();
  cv_.notify_all();
  worker_.join();
}

Algorithm ProcessGroup::ChooseAllReduce(size_t bytes) const {
  // Through shared slots every chunk costs two barriers, where the ring's
  // 2(n-1) steps each wait for a neighbour; on 2 ranks the ring's two steps
  // win from 16 KiB to 256 KiB and tie at 1-4 MiB (docs/comm.md).
  if (transport_->shares_memory() &&
      (size() > 2 || bytes <= options_.small_message_bytes ||
       bytes >= options_.shared_two_rank_min_bytes)) {
    return Algorithm::kShared;
  }
  if (bytes <= options_.small_message_bytes)
    return Algorithm::kRecursiveDoubling;
  if (hierarchical_ok_) return Algorithm::kHierarchical;
  return Algorithm::kRing;
}

void ProcessGroup::Abort() {
  transport_->Abort();
  MutexLock lock(mu_);
  if (broken_.ok()) broken_ = absl::AbortedError("process group aborted");
}

std::shared_ptr<Work> ProcessGroup::Enqueue(const char* what,
                                            const OpOptions& opts, Op op) {
  auto work = std::make_shared<OpWork>(this);
  const auto timeout =
      opts.timeout.count() > 0 ? opts.timeout : options_.timeout;
  Op timed = [op = std::move(op), timeout, what, this](Deadline) {
    return Annotate(what, op(SteadyClock::now() + timeout));
  };
  bool wake = true;
  {
    MutexLock lock(mu_);
    queue_.emplace_back(work, std::move(timed));
    // A synchronous op at the head runs on this thread: leave the worker
    // asleep (waking it costs a context switch on a busy core).
    wake = !opts.synchronous || queue_.size() > 1 || running_;
  }
  if (wake) cv_.notify_all();
  if (opts.synchronous) (void)work->Wait(std::chrono::milliseconds::max());
  return work;
}

void ProcessGroup::Loop() {
  for (;;) {
    UniqueLock lock(mu_);
    cv_.wait(lock.native(), [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || (!queue_.empty() && !running_);
    });
    if (queue_.empty()) return;
    RunHead(lock);
  }
}

bool ProcessGroup::RunIfHead(const Work* work) {
  UniqueLock lock(mu_);
  if (queue_.empty() || running_ || queue_.front().first.get() != work) {
    return false;
  }
  RunHead(lock);
  return true;
}

void ProcessGroup::RunHead(UniqueLock& lock) {
  running_ = true;
  std::shared_ptr<OpWork> work = std::move(queue_.front().first);
  Op op = std::move(queue_.front().second);
  queue_.pop_front();
  const Status broken = broken_;
  // `lock` holds mu_; released through the mutex, which the analysis sees
  // (it cannot tie a UniqueLock parameter to mu_).
  mu_.unlock();
  {
    Status st = broken.ok()
                    ? op(Deadline{})
                    : absl::FailedPreconditionError(absl::StrCat(
                          "process group is broken after an earlier error: ",
                          broken.message()));
    if (!st.ok() && broken.ok())
      logger_->error("{}", std::string(st.message()));
    {
      MutexLock guard(mu_);
      running_ = false;
      if (!st.ok() && broken_.ok()) broken_ = st;
    }
    cv_.notify_all();
    work->Finish(std::move(st));
  }
  mu_.lock();
}

std::shared_ptr<Work> ProcessGroup::AllReduce(void* buf, size_t count,
                                              DataType type, ReduceOp op,
                                              const OpOptions& opts) {
  Algorithm algo = opts.algorithm == Algorithm::kAuto
                       ? ChooseAllReduce(count * ElementSize(type))
                       : opts.algorithm;
  return Submit(
      "all_reduce", count * ElementSize(type), opts,
      [=, this](Deadline d) -> Status {
        Transport& t = *transport_;
        switch (algo) {
          case Algorithm::kRecursiveDoubling:
            RETURN_IF_ERROR(algorithms::RecursiveDoublingAllReduce(
                t, buf, count, type, op, d));
            break;
          case Algorithm::kHierarchical:
            RETURN_IF_ERROR(algorithms::HierarchicalAllReduce(
                t, options_.node_of, buf, count, type, op, d));
            break;
          case Algorithm::kShared:
            RETURN_IF_ERROR(t.SharedAllReduce(buf, count, type, op, d));
            break;
          default:
            RETURN_IF_ERROR(
                algorithms::RingAllReduce(t, buf, count, type, op, d));
        }
        if (op == ReduceOp::kAvg) Divide(buf, count, type, size());
        return absl::OkStatus();
      });
}

std::shared_ptr<Work> ProcessGroup::ReduceScatter(const void* in, void* out,
                                                  size_t count, DataType type,
                                                  ReduceOp op,
                                                  const OpOptions& opts) {
  return Submit(
      "reduce_scatter", count * ElementSize(type), opts,
      [=, this](Deadline d) -> Status {
        const size_t es = ElementSize(type);
        std::vector<char>& tmp = scatter_buf_;
        tmp.assign(static_cast<const char*>(in),
                   static_cast<const char*>(in) + count * es);
        RETURN_IF_ERROR(algorithms::RingReduceScatter(*transport_, tmp.data(),
                                                      count, type, op, d));
        const size_t b0 = algorithms::BlockBegin(count, size(), rank());
        const size_t b1 = algorithms::BlockBegin(count, size(), rank() + 1);
        std::memcpy(out, tmp.data() + b0 * es, (b1 - b0) * es);
        if (op == ReduceOp::kAvg) Divide(out, b1 - b0, type, size());
        return absl::OkStatus();
      });
}

std::shared_ptr<Work> ProcessGroup::AllGather(const void* in, void* out,
                                              size_t count, DataType type,
                                              const OpOptions& opts) {
  return Submit(
      "all_gather", count * ElementSize(type), opts,
      [=, this](Deadline d) -> Status {
        const size_t es = ElementSize(type);
        const size_t b0 = algorithms::BlockBegin(count, size(), rank());
        const size_t b1 = algorithms::BlockBegin(count, size(), rank() + 1);
        std::memmove(static_cast<char*>(out) + b0 * es, in, (b1 - b0) * es);
        return algorithms::RingAllGather(*transport_, out, count, type, d);
      });
}

std::shared_ptr<Work> ProcessGroup::Broadcast(void* buf, size_t count,
                                              DataType type, int root,
                                              const OpOptions& opts) {
  if (root < 0 || root >= size()) {
    auto w = std::make_shared<OpWork>(this);
    w->Finish(absl::InvalidArgumentError(
        absl::StrCat("broadcast root ", root, " outside group of ", size())));
    return w;
  }
  return Submit("broadcast", count * ElementSize(type), opts,
                [=, this](Deadline d) {
                  return algorithms::BinomialBroadcast(
                      *transport_, buf, count * ElementSize(type), root, d);
                });
}

std::shared_ptr<Work> ProcessGroup::AllToAll(const void* in, void* out,
                                             size_t count_per_rank,
                                             DataType type,
                                             const OpOptions& opts) {
  return Submit("all_to_all", count_per_rank * ElementSize(type) * size(), opts,
                [=, this](Deadline d) {
                  return algorithms::PairwiseAllToAll(
                      *transport_, in, out, count_per_rank * ElementSize(type),
                      d);
                });
}

std::shared_ptr<Work> ProcessGroup::Send(const void* buf, size_t count,
                                         DataType type, int peer,
                                         const OpOptions& opts) {
  if (peer < 0 || peer >= size() || peer == rank()) {
    auto w = std::make_shared<OpWork>(this);
    w->Finish(absl::InvalidArgumentError(absl::StrCat("bad send peer ", peer)));
    return w;
  }
  return Submit("send", count * ElementSize(type), opts, [=, this](Deadline d) {
    return transport_->Send(peer, buf, count * ElementSize(type), d);
  });
}

std::shared_ptr<Work> ProcessGroup::Recv(void* buf, size_t count, DataType type,
                                         int peer, const OpOptions& opts) {
  if (peer < 0 || peer >= size() || peer == rank()) {
    auto w = std::make_shared<OpWork>(this);
    w->Finish(absl::InvalidArgumentError(absl::StrCat("bad recv peer ", peer)));
    return w;
  }
  return Submit("recv", count * ElementSize(type), opts, [=, this](Deadline d) {
    return transport_->Recv(peer, buf, count * ElementSize(type), d);
  });
}

std::shared_ptr<Work> ProcessGroup::SendRecv(const void* send,
                                             size_t send_count, int send_peer,
                                             void* recv, size_t recv_count,
                                             int recv_peer, DataType type,
                                             const OpOptions& opts) {
  auto bad = [&](int peer) {
    return peer != -1 && (peer < 0 || peer >= size() || peer == rank());
  };
  if (bad(send_peer) || bad(recv_peer)) {
    auto w = std::make_shared<OpWork>(this);
    w->Finish(absl::InvalidArgumentError(
        absl::StrCat("bad sendrecv peers ", send_peer, " / ", recv_peer)));
    return w;
  }
  const size_t es = ElementSize(type);
  return Submit(
      "sendrecv", (send_count + recv_count) * es, opts, [=, this](Deadline d) {
        return transport_->SendRecv(send_peer, send, send_count * es, recv_peer,
                                    recv, recv_count * es, d);
      });
}

std::shared_ptr<Work> ProcessGroup::Barrier(const OpOptions& opts) {
  return Submit("barrier", 0, opts, [this](Deadline d) {
    return algorithms::DisseminationBarrier(*transport_, d);
  });
}

}  // namespace strata::comm
