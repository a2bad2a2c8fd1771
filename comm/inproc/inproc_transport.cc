// In-process transport: an unbounded byte pipe per ordered pair of ranks,
// guarded by one mutex per pipe. Receivers wait on the pipe's condition
// variable with the call's deadline.
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "comm/transport.h"
#include "common/mutex.h"

namespace strata::comm {
namespace {

struct Pipe {
  Mutex mu;
  std::condition_variable cv;
  std::deque<std::vector<char>> chunks ABSL_GUARDED_BY(mu);
  size_t offset = 0;                     // consumed bytes of chunks.front()
};

struct World {
  explicit World(int n) : size(n), pipes(n * n) {}
  Pipe& At(int from, int to) { return pipes[from * size + to]; }
  int size;
  std::vector<Pipe> pipes;
  std::atomic<bool> aborted{false};
  void AbortAll() {
    aborted = true;
    for (Pipe& p : pipes) {
      MutexLock lock(p.mu);
      p.cv.notify_all();
    }
  }
};

class InProcTransport final : public Transport {
 public:
  InProcTransport(std::shared_ptr<World> world, int rank)
      : world_(std::move(world)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return world_->size; }
  const char* name() const override { return "inproc"; }

  Status SendRecv(int send_peer, const void* send, size_t send_bytes,
                  int recv_peer, void* recv, size_t recv_bytes,
                  Deadline deadline) override {
    if (world_->aborted) return absl::AbortedError("transport aborted");
    if (send_peer >= 0 && send_bytes > 0) {
      Pipe& p = world_->At(rank_, send_peer);
      std::vector<char> chunk(static_cast<const char*>(send),
                              static_cast<const char*>(send) + send_bytes);
      MutexLock lock(p.mu);
      p.chunks.push_back(std::move(chunk));
      p.cv.notify_all();
    }
    if (recv_peer < 0 || recv_bytes == 0) return absl::OkStatus();
    Pipe& p = world_->At(recv_peer, rank_);
    char* out = static_cast<char*>(recv);
    size_t got = 0;
    UniqueLock lock(p.mu);
    while (got < recv_bytes) {
      if (world_->aborted) return absl::AbortedError("transport aborted");
      if (p.chunks.empty()) {
        if (p.cv.wait_until(lock.native(), deadline) ==
                std::cv_status::timeout &&
            p.chunks.empty()) {
          return absl::DeadlineExceededError(absl::StrCat(
              "rank ", rank_, ": timed out receiving from rank ", recv_peer,
              " (", got, " of ", recv_bytes, " bytes)"));
        }
        continue;
      }
      std::vector<char>& front = p.chunks.front();
      const size_t n = std::min(recv_bytes - got, front.size() - p.offset);
      std::memcpy(out + got, front.data() + p.offset, n);
      got += n;
      p.offset += n;
      if (p.offset == front.size()) {
        p.chunks.pop_front();
        p.offset = 0;
      }
    }
    return absl::OkStatus();
  }

  void Abort() override { world_->AbortAll(); }

 private:
  std::shared_ptr<World> world_;
  int rank_;
};

}  // namespace

std::vector<std::unique_ptr<Transport>> NewInProcessTransports(int size) {
  auto world = std::make_shared<World>(size);
  std::vector<std::unique_ptr<Transport>> out;
  for (int r = 0; r < size; ++r) {
    out.push_back(std::make_unique<InProcTransport>(world, r));
  }
  return out;
}

SubTransport::SubTransport(Transport* base, std::vector<int> members)
    : base_(base), members_(std::move(members)) {
  whole_ = static_cast<int>(members_.size()) == base_->size();
  for (size_t i = 0; i < members_.size(); ++i) {
    if (members_[i] == base_->rank()) rank_ = static_cast<int>(i);
    whole_ &= members_[i] == static_cast<int>(i);
  }
}

Status Transport::SendRecvReduce(int send_peer, const void* send,
                                 size_t send_bytes, int recv_peer, void* acc,
                                 size_t count, DataType type, ReduceOp op,
                                 Deadline deadline) {
  thread_local std::vector<char> scratch;
  const size_t bytes = recv_peer >= 0 ? count * ElementSize(type) : 0;
  if (scratch.size() < bytes) scratch.resize(bytes);
  RETURN_IF_ERROR(SendRecv(send_peer, send, send_bytes, recv_peer,
                           scratch.data(), bytes, deadline));
  if (bytes > 0) ReduceInto(acc, scratch.data(), count, type, op);
  return absl::OkStatus();
}

Status Transport::SharedAllReduce(void*, size_t, DataType, ReduceOp, Deadline) {
  return absl::UnimplementedError(absl::StrCat(
      "the ", name(), " transport has no memory shared by all its ranks"));
}

Status SubTransport::SharedAllReduce(void* buf, size_t count, DataType type,
                                     ReduceOp op, Deadline deadline) {
  if (!whole_) {
    return absl::UnimplementedError(absl::StrCat(
        "a group of ", size(), " of the ", base_->size(), " ranks of the ",
        name(), " transport: only a group of all of them shares its memory"));
  }
  return base_->SharedAllReduce(buf, count, type, op, deadline);
}

Status SubTransport::SendRecvReduce(int send_peer, const void* send,
                                    size_t send_bytes, int recv_peer, void* acc,
                                    size_t count, DataType type, ReduceOp op,
                                    Deadline deadline) {
  return base_->SendRecvReduce(send_peer >= 0 ? members_[send_peer] : -1, send,
                               send_bytes,
                               recv_peer >= 0 ? members_[recv_peer] : -1, acc,
                               count, type, op, deadline);
}

Status SubTransport::SendRecv(int send_peer, const void* send,
                              size_t send_bytes, int recv_peer, void* recv,
                              size_t recv_bytes, Deadline deadline) {
  return base_->SendRecv(send_peer >= 0 ? members_[send_peer] : -1, send,
                         send_bytes, recv_peer >= 0 ? members_[recv_peer] : -1,
                         recv, recv_bytes, deadline);
}

}  // namespace strata::comm
