#include "comm/mpi/mpi_backend.h"

#include <mpi.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <limits>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/algorithms/algorithms.h"
#include "common/mutex.h"

namespace strata::comm {
namespace {

std::string MpiMessage(int rc) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return std::string(msg, len);
}

// What a backend and its Work handles share: whether the group is aborted
// or broken. Abort() touches only this (no MPI call), so any thread may.
struct GroupState {
  std::atomic<bool> aborted{false};
  Mutex mu;
  Status broken ABSL_GUARDED_BY(mu);  // the first error

  void Break(Status st) {
    MutexLock lock(mu);
    if (broken.ok()) broken = std::move(st);
  }
  Status Broken() {
    MutexLock lock(mu);
    return broken;
  }
  void Abort() {
    Break(absl::AbortedError("MPI backend aborted"));
    aborted.store(true, std::memory_order_release);
  }
};

// An operation that finished (or failed) when it was issued.
class DoneWork final : public Work {
 public:
  DoneWork(std::shared_ptr<GroupState> state, Status st)
      : state_(std::move(state)), st_(std::move(st)) {}
  Status Wait(std::chrono::milliseconds) override { return st_; }
  bool IsCompleted() override { return true; }
  void Abort() override { state_->Abort(); }

 private:
  std::shared_ptr<GroupState> state_;
  Status st_;
};

// One or two nonblocking MPI requests. Wait polls MPI_Test until the
// operation's deadline: MPI has no timeouts of its own, and a rank stuck in
// a blocking call could never report a stuck peer. `after` runs once on
// success (e.g. the division of an average).
class MpiWork final : public Work {
 public:
  MpiWork(std::string what, std::shared_ptr<GroupState> state,
          std::chrono::milliseconds timeout)
      : what_(std::move(what)),
        state_(std::move(state)),
        timeout_(timeout),
        deadline_(std::chrono::steady_clock::now() + timeout) {}

  // Where the next MPI call stores its request (two at most).
  MPI_Request* NewRequest() {
    STRATA_CHECK_LT(n_, 2);
    return &reqs_[n_++];
  }
  // Records the return code of the call that made the last request.
  void Started(int rc) {
    if (rc != MPI_SUCCESS && !done_) Fail(MpiError(rc));
  }
  void set_after(std::function<void()> after) { after_ = std::move(after); }
  // Argument arrays that must outlive the nonblocking call.
  std::vector<int> counts, displs;

  Status Wait(std::chrono::milliseconds timeout) override {
    const auto start = std::chrono::steady_clock::now();
    while (!IsCompleted()) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline_) {
        // The operation's own timeout: an error that breaks the group. The
        // request stays pending inside MPI (IsCompleted keeps testing it).
        Status st = absl::DeadlineExceededError(
            absl::StrCat(what_, " did not complete within ", timeout_.count(),
                         " ms (MPI does not say which peer is missing)"));
        state_->Break(st);
        return st;
      }
      if (timeout != std::chrono::milliseconds::max() &&
          now - start >= timeout) {
        return absl::DeadlineExceededError(
            absl::StrCat("Work::Wait for ", what_, " timed out after ",
                         timeout.count(), " ms"));
      }
      std::this_thread::yield();
    }
    return st_;
  }

  bool IsCompleted() override {
    if (done_) return true;
    if (state_->aborted.load(std::memory_order_acquire)) {
      done_ = true;
      st_ = absl::AbortedError(absl::StrCat(what_, ": MPI backend aborted"));
      return true;
    }
    int flag = 0;
    const int rc = MPI_Testall(n_, reqs_, &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) {
      Fail(MpiError(rc));
    } else if (flag) {
      if (after_) after_();
      done_ = true;
    }
    return done_;
  }

  void Abort() override { state_->Abort(); }

 private:
  Status MpiError(int rc) const {
    return absl::UnavailableError(
        absl::StrCat(what_, ": MPI error: ", MpiMessage(rc)));
  }
  void Fail(Status st) {
    state_->Break(st);
    st_ = std::move(st);
    done_ = true;
  }

  const std::string what_;
  std::shared_ptr<GroupState> state_;
  const std::chrono::milliseconds timeout_;
  const std::chrono::steady_clock::time_point deadline_;
  MPI_Request reqs_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  int n_ = 0;
  std::function<void()> after_;
  bool done_ = false;
  Status st_;
};

// 16-bit float types get their own MPI datatypes so the user-defined ops can
// tell them apart.
MPI_Datatype g_f16 = MPI_DATATYPE_NULL, g_bf16 = MPI_DATATYPE_NULL;
MPI_Op g_ops16[2][3];  // [f16|bf16][sum|max|min]

template <DataType T, ReduceOp O>
void Reduce16(void* in, void* inout, int* len, MPI_Datatype*) {
  ReduceInto(inout, in, static_cast<size_t>(*len), T, O);
}

void InitTypes() {
  if (g_f16 != MPI_DATATYPE_NULL) return;
  MPI_Type_contiguous(2, MPI_BYTE, &g_f16);
  MPI_Type_commit(&g_f16);
  MPI_Type_contiguous(2, MPI_BYTE, &g_bf16);
  MPI_Type_commit(&g_bf16);
  MPI_Op_create(&Reduce16<DataType::kF16, ReduceOp::kSum>, 1, &g_ops16[0][0]);
  MPI_Op_create(&Reduce16<DataType::kF16, ReduceOp::kMax>, 1, &g_ops16[0][1]);
  MPI_Op_create(&Reduce16<DataType::kF16, ReduceOp::kMin>, 1, &g_ops16[0][2]);
  MPI_Op_create(&Reduce16<DataType::kBF16, ReduceOp::kSum>, 1, &g_ops16[1][0]);
  MPI_Op_create(&Reduce16<DataType::kBF16, ReduceOp::kMax>, 1, &g_ops16[1][1]);
  MPI_Op_create(&Reduce16<DataType::kBF16, ReduceOp::kMin>, 1, &g_ops16[1][2]);
}

MPI_Datatype Type(DataType t) {
  switch (t) {
    case DataType::kF32:
      return MPI_FLOAT;
    case DataType::kF64:
      return MPI_DOUBLE;
    case DataType::kI32:
      return MPI_INT32_T;
    case DataType::kI64:
      return MPI_INT64_T;
    case DataType::kF16:
      return g_f16;
    case DataType::kBF16:
      return g_bf16;
  }
  return MPI_BYTE;
}

MPI_Op Op(DataType t, ReduceOp op) {
  const int k = op == ReduceOp::kMax ? 1 : op == ReduceOp::kMin ? 2 : 0;
  if (t == DataType::kF16) return g_ops16[0][k];
  if (t == DataType::kBF16) return g_ops16[1][k];
  return k == 1 ? MPI_MAX : k == 2 ? MPI_MIN : MPI_SUM;
}

class MpiBackend final : public Backend {
 public:
  MpiBackend(MPI_Comm comm, std::chrono::milliseconds timeout)
      : comm_(comm), timeout_(timeout) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiBackend() override {
    // A broken group may have requests MPI still progresses (given up, not
    // cancelled): they need the communicator, so it is left allocated.
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && state_->Broken().ok()) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "mpi"; }

  std::shared_ptr<Work> AllReduce(void* buf, size_t count, DataType t,
                                  ReduceOp op, const OpOptions& o) override {
    if (Status st = Check("all_reduce", count); !st.ok()) return Done(st);
    auto w = NewWork("MPI_Iallreduce", o);
    if (op == ReduceOp::kAvg) {
      w->set_after([=, n = size_] { Divide(buf, count, t, n); });
    }
    return Start(w,
                 MPI_Iallreduce(MPI_IN_PLACE, buf, static_cast<int>(count),
                                Type(t), Op(t, op), comm_, w->NewRequest()),
                 o);
  }
  std::shared_ptr<Work> ReduceScatter(const void* in, void* out, size_t count,
                                      DataType t, ReduceOp op,
                                      const OpOptions& o) override {
    if (Status st = Check("reduce_scatter", count); !st.ok()) return Done(st);
    auto w = NewWork("MPI_Ireduce_scatter", o);
    w->counts.resize(size_);
    for (int i = 0; i < size_; ++i) {
      w->counts[i] =
          static_cast<int>(algorithms::BlockBegin(count, size_, i + 1) -
                           algorithms::BlockBegin(count, size_, i));
    }
    if (op == ReduceOp::kAvg) {
      w->set_after(
          [=, n = size_, mine = w->counts[rank_]] { Divide(out, mine, t, n); });
    }
    return Start(w,
                 MPI_Ireduce_scatter(in, out, w->counts.data(), Type(t),
                                     Op(t, op), comm_, w->NewRequest()),
                 o);
  }
  std::shared_ptr<Work> AllGather(const void* in, void* out, size_t count,
                                  DataType t, const OpOptions& o) override {
    if (Status st = Check("all_gather", count); !st.ok()) return Done(st);
    auto w = NewWork("MPI_Iallgatherv", o);
    w->counts.resize(size_);
    w->displs.resize(size_);
    for (int i = 0; i < size_; ++i) {
      w->displs[i] = static_cast<int>(algorithms::BlockBegin(count, size_, i));
      w->counts[i] =
          static_cast<int>(algorithms::BlockBegin(count, size_, i + 1)) -
          w->displs[i];
    }
    return Start(
        w,
        MPI_Iallgatherv(in, w->counts[rank_], Type(t), out, w->counts.data(),
                        w->displs.data(), Type(t), comm_, w->NewRequest()),
        o);
  }
  std::shared_ptr<Work> Broadcast(void* buf, size_t count, DataType t, int root,
                                  const OpOptions& o) override {
    if (Status st = Check("broadcast", count, root); !st.ok()) return Done(st);
    auto w = NewWork("MPI_Ibcast", o);
    return Start(w,
                 MPI_Ibcast(buf, static_cast<int>(count), Type(t), root, comm_,
                            w->NewRequest()),
                 o);
  }
  std::shared_ptr<Work> AllToAll(const void* in, void* out, size_t per,
                                 DataType t, const OpOptions& o) override {
    if (Status st = Check("all_to_all", per * size_); !st.ok()) return Done(st);
    auto w = NewWork("MPI_Ialltoall", o);
    return Start(
        w,
        MPI_Ialltoall(in, static_cast<int>(per), Type(t), out,
                      static_cast<int>(per), Type(t), comm_, w->NewRequest()),
        o);
  }
  std::shared_ptr<Work> Send(const void* buf, size_t count, DataType t,
                             int peer, const OpOptions& o) override {
    if (peer < 0) return Done(BadPeer("send", peer));
    return SendRecv(buf, count, peer, nullptr, 0, -1, t, o);
  }
  std::shared_ptr<Work> Recv(void* buf, size_t count, DataType t, int peer,
                             const OpOptions& o) override {
    if (peer < 0) return Done(BadPeer("recv", peer));
    return SendRecv(nullptr, 0, -1, buf, count, peer, t, o);
  }
  std::shared_ptr<Work> SendRecv(const void* send, size_t send_count,
                                 int send_peer, void* recv, size_t recv_count,
                                 int recv_peer, DataType t,
                                 const OpOptions& o) override {
    for (Status st : {Check("send", send_count, send_peer, true),
                      Check("recv", recv_count, recv_peer, true)}) {
      if (!st.ok()) return Done(st);
    }
    // A count of 0 disables a side, as in Transport::SendRecv.
    if (send_count == 0) send_peer = -1;
    if (recv_count == 0) recv_peer = -1;
    if (send_peer < 0 && recv_peer < 0) return Done(absl::OkStatus());
    auto w = NewWork(send_peer < 0   ? "MPI_Irecv"
                     : recv_peer < 0 ? "MPI_Isend"
                                     : "MPI_Isend+MPI_Irecv",
                     o);
    int rc = MPI_SUCCESS;
    // Receive first: a matching send from the peer can then land at once.
    if (recv_peer >= 0) {
      rc = MPI_Irecv(recv, static_cast<int>(recv_count), Type(t), recv_peer,
                     kTag, comm_, w->NewRequest());
      w->Started(rc);
    }
    if (send_peer >= 0 && rc == MPI_SUCCESS) {
      rc = MPI_Isend(send, static_cast<int>(send_count), Type(t), send_peer,
                     kTag, comm_, w->NewRequest());
    }
    return Start(w, rc, o);
  }
  std::shared_ptr<Work> Barrier(const OpOptions& o) override {
    if (Status st = Check("barrier", 0); !st.ok()) return Done(st);
    auto w = NewWork("MPI_Ibarrier", o);
    return Start(w, MPI_Ibarrier(comm_, w->NewRequest()), o);
  }
  void Abort() override { state_->Abort(); }

 private:
  static constexpr int kTag = 0;

  // FailedPrecondition once the group is broken; InvalidArgument for a count
  // MPI cannot take or a `peer` outside the group (for point-to-point
  // sides, `p2p`: not this rank either, and -1 means the side is off).
  Status Check(const char* what, size_t count, int peer = 0,
               bool p2p = false) const {
    if (Status broken = state_->Broken(); !broken.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, " on rank ", rank_, "/", size_,
                       ": MPI backend is broken after an earlier error: ",
                       broken.message()));
    }
    if (p2p && peer == -1) return absl::OkStatus();
    if (count > static_cast<size_t>(std::numeric_limits<int>::max())) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": count ", count, " exceeds MPI's int range"));
    }
    if (peer < 0 || peer >= size_ || (p2p && peer == rank_)) {
      return BadPeer(what, peer);
    }
    return absl::OkStatus();
  }
  Status BadPeer(const char* what, int peer) const {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " on rank ", rank_, ": rank ", peer,
                     " is not a valid peer in the ", size_, "-rank group"));
  }
  std::shared_ptr<Work> Done(Status st) {
    return std::make_shared<DoneWork>(state_, std::move(st));
  }
  std::shared_ptr<MpiWork> NewWork(const char* what, const OpOptions& o) {
    return std::make_shared<MpiWork>(
        absl::StrCat(what, " on rank ", rank_, "/", size_), state_,
        o.timeout.count() > 0 ? o.timeout : timeout_);
  }
  std::shared_ptr<Work> Start(std::shared_ptr<MpiWork> w, int rc,
                              const OpOptions& o) {
    w->Started(rc);
    if (o.synchronous) (void)w->Wait(std::chrono::milliseconds::max());
    return w;
  }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  const std::chrono::milliseconds timeout_;
  std::shared_ptr<GroupState> state_ = std::make_shared<GroupState>();
};

Status CheckInitialized() {
  int init = 0;
  MPI_Initialized(&init);
  if (!init) return absl::FailedPreconditionError("MPI is not initialised");
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  if (level < MPI_THREAD_SERIALIZED) {
    return absl::FailedPreconditionError(
        "MPI was initialised below MPI_THREAD_SERIALIZED");
  }
  InitTypes();
  return absl::OkStatus();
}

std::unique_ptr<Backend> Wrap(MPI_Comm comm,
                              std::chrono::milliseconds timeout) {
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return std::make_unique<MpiBackend>(comm, timeout);
}

}  // namespace

Status EnsureMpiInitialized() {
  int init = 0, finalized = 0;
  MPI_Initialized(&init);
  if (init) return absl::OkStatus();
  MPI_Finalized(&finalized);
  if (finalized) {
    return absl::FailedPreconditionError("MPI was already finalised");
  }
  int provided = 0;
  const int rc =
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  if (rc != MPI_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("MPI_Init_thread: ", MpiMessage(rc)));
  }
  std::atexit([] {
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Finalize();
  });
  return absl::OkStatus();
}

StatusOr<std::unique_ptr<Backend>> NewMpiBackend(
    std::chrono::milliseconds timeout) {
  RETURN_IF_ERROR(CheckInitialized());
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  return Wrap(comm, timeout);
}

StatusOr<std::unique_ptr<Backend>> NewMpiSplitBackend(
    int color, int key, std::chrono::milliseconds timeout) {
  if (color < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("MPI group color ", color, " is negative"));
  }
  RETURN_IF_ERROR(CheckInitialized());
  MPI_Comm comm;
  const int rc = MPI_Comm_split(MPI_COMM_WORLD, color, key, &comm);
  if (rc != MPI_SUCCESS) {
    return absl::UnavailableError(
        absl::StrCat("MPI_Comm_split: ", MpiMessage(rc)));
  }
  return Wrap(comm, timeout);
}

}  // namespace strata::comm
