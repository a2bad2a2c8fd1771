#include "comm/mpi/mpi_backend.h"

#include <mpi.h>

#include <functional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/algorithms/algorithms.h"

namespace strata::comm {
namespace {

std::string MpiMessage(int rc) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return std::string(msg, len);
}

// A nonblocking MPI operation. Wait polls MPI_Test until the operation's
// timeout: MPI has no timeouts of its own, and a rank stuck in a blocking
// call could never report a stuck peer. `after` runs once on completion
// (e.g. the division of an average).
class MpiWork final : public Work {
 public:
  MpiWork(const char* what, MPI_Request req, int rc,
          std::chrono::milliseconds timeout, std::function<void()> after)
      : what_(what), req_(req), timeout_(timeout), after_(std::move(after)) {
    if (rc != MPI_SUCCESS) {
      done_ = true;
      st_ = absl::UnavailableError(
          absl::StrCat(what_, ": MPI error: ", MpiMessage(rc)));
    }
  }
  Status Wait(std::chrono::milliseconds timeout) override {
    const auto end =
        std::chrono::steady_clock::now() + std::min(timeout, timeout_);
    while (!IsCompleted()) {
      if (std::chrono::steady_clock::now() >= end) {
        return absl::DeadlineExceededError(
            absl::StrCat(what_, " did not complete within ",
                         std::min(timeout, timeout_).count(),
                         " ms (MPI does not say which peer is missing)"));
      }
      std::this_thread::yield();
    }
    return st_;
  }
  bool IsCompleted() override {
    if (done_) return true;
    int flag = 0;
    const int rc = MPI_Test(&req_, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      st_ = absl::UnavailableError(
          absl::StrCat(what_, ": MPI error: ", MpiMessage(rc)));
      done_ = true;
    } else if (flag) {
      if (after_) after_();
      done_ = true;
    }
    return done_;
  }
  void Abort() override { MPI_Abort(MPI_COMM_WORLD, 1); }

 private:
  const char* what_;
  MPI_Request req_;
  std::chrono::milliseconds timeout_;
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
  explicit MpiBackend(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiBackend() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "mpi"; }

  std::shared_ptr<Work> AllReduce(void* buf, size_t count, DataType t,
                                  ReduceOp op, const OpOptions& o) override {
    MPI_Request r;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, static_cast<int>(count), Type(t),
                            Op(t, op), comm_, &r);
    std::function<void()> after;
    if (op == ReduceOp::kAvg)
      after = [=, n = size_] { Divide(buf, count, t, n); };
    return Make("MPI_Iallreduce", r, rc, o, std::move(after));
  }
  std::shared_ptr<Work> ReduceScatter(const void* in, void* out, size_t count,
                                      DataType t, ReduceOp op,
                                      const OpOptions& o) override {
    counts_.assign(size_, 0);
    for (int i = 0; i < size_; ++i) {
      counts_[i] =
          static_cast<int>(algorithms::BlockBegin(count, size_, i + 1) -
                           algorithms::BlockBegin(count, size_, i));
    }
    MPI_Request r;
    int rc = MPI_Ireduce_scatter(in, out, counts_.data(), Type(t), Op(t, op),
                                 comm_, &r);
    std::function<void()> after;
    if (op == ReduceOp::kAvg) {
      after = [=, n = size_, mine = counts_[rank_]] {
        Divide(out, mine, t, n);
      };
    }
    return Make("MPI_Ireduce_scatter", r, rc, o, std::move(after));
  }
  std::shared_ptr<Work> AllGather(const void* in, void* out, size_t count,
                                  DataType t, const OpOptions& o) override {
    counts_.assign(size_, 0);
    displs_.assign(size_, 0);
    for (int i = 0; i < size_; ++i) {
      displs_[i] = static_cast<int>(algorithms::BlockBegin(count, size_, i));
      counts_[i] =
          static_cast<int>(algorithms::BlockBegin(count, size_, i + 1)) -
          displs_[i];
    }
    MPI_Request r;
    int rc = MPI_Iallgatherv(in, counts_[rank_], Type(t), out, counts_.data(),
                             displs_.data(), Type(t), comm_, &r);
    return Make("MPI_Iallgatherv", r, rc, o);
  }
  std::shared_ptr<Work> Broadcast(void* buf, size_t count, DataType t, int root,
                                  const OpOptions& o) override {
    MPI_Request r;
    int rc = MPI_Ibcast(buf, static_cast<int>(count), Type(t), root, comm_, &r);
    return Make("MPI_Ibcast", r, rc, o);
  }
  std::shared_ptr<Work> AllToAll(const void* in, void* out, size_t per,
                                 DataType t, const OpOptions& o) override {
    MPI_Request r;
    int rc = MPI_Ialltoall(in, static_cast<int>(per), Type(t), out,
                           static_cast<int>(per), Type(t), comm_, &r);
    return Make("MPI_Ialltoall", r, rc, o);
  }
  std::shared_ptr<Work> Send(const void* buf, size_t count, DataType t,
                             int peer, const OpOptions& o) override {
    MPI_Request r;
    int rc =
        MPI_Isend(buf, static_cast<int>(count), Type(t), peer, 0, comm_, &r);
    return Make("MPI_Isend", r, rc, o);
  }
  std::shared_ptr<Work> Recv(void* buf, size_t count, DataType t, int peer,
                             const OpOptions& o) override {
    MPI_Request r;
    int rc =
        MPI_Irecv(buf, static_cast<int>(count), Type(t), peer, 0, comm_, &r);
    return Make("MPI_Irecv", r, rc, o);
  }
  std::shared_ptr<Work> Barrier(const OpOptions& o) override {
    MPI_Request r;
    int rc = MPI_Ibarrier(comm_, &r);
    return Make("MPI_Ibarrier", r, rc, o);
  }
  void Abort() override { MPI_Abort(comm_, 1); }

 private:
  std::shared_ptr<Work> Make(const char* what, MPI_Request r, int rc,
                             const OpOptions& o,
                             std::function<void()> after = {}) {
    auto w = std::make_shared<MpiWork>(
        what, r, rc, o.timeout.count() > 0 ? o.timeout : timeout_,
        std::move(after));
    if (o.synchronous) (void)w->Wait(std::chrono::milliseconds::max());
    return w;
  }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  std::chrono::milliseconds timeout_{std::chrono::seconds(300)};
  // Count/displacement arrays must outlive the nonblocking call; ops run
  // one at a time per the contract below.
  std::vector<int> counts_, displs_;
};

}  // namespace

StatusOr<std::unique_ptr<Backend>> NewMpiBackend() {
  int init = 0;
  MPI_Initialized(&init);
  if (!init) return absl::FailedPreconditionError("MPI is not initialised");
  InitTypes();
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return std::unique_ptr<Backend>(std::make_unique<MpiBackend>(comm));
}

}  // namespace strata::comm
