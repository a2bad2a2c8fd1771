#include "comm/mpi/mpi_backend.h"

#include <mpi.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/algorithms/algorithms.h"

namespace strata::comm {
namespace {

class DoneWork final : public Work {
 public:
  explicit DoneWork(Status st) : st_(std::move(st)) {}
  Status Wait(std::chrono::milliseconds) override { return st_; }
  bool IsCompleted() override { return true; }
  void Abort() override { MPI_Abort(MPI_COMM_WORLD, 1); }

 private:
  Status st_;
};

std::shared_ptr<Work> Done(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return std::make_shared<DoneWork>(absl::OkStatus());
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return std::make_shared<DoneWork>(
      absl::UnavailableError(absl::StrCat(what, ": MPI error: ", std::string(msg, len))));
}

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
    case DataType::kF32: return MPI_FLOAT;
    case DataType::kF64: return MPI_DOUBLE;
    case DataType::kI32: return MPI_INT32_T;
    case DataType::kI64: return MPI_INT64_T;
    case DataType::kF16: return g_f16;
    case DataType::kBF16: return g_bf16;
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
                                  ReduceOp op, const OpOptions&) override {
    int rc = MPI_Allreduce(MPI_IN_PLACE, buf, static_cast<int>(count), Type(t),
                           Op(t, op), comm_);
    if (rc == MPI_SUCCESS && op == ReduceOp::kAvg) Divide(buf, count, t, size_);
    return Done(rc, "MPI_Allreduce");
  }
  std::shared_ptr<Work> ReduceScatter(const void* in, void* out, size_t count,
                                      DataType t, ReduceOp op,
                                      const OpOptions&) override {
    std::vector<int> counts(size_);
    for (int i = 0; i < size_; ++i) {
      counts[i] = static_cast<int>(algorithms::BlockBegin(count, size_, i + 1) -
                                   algorithms::BlockBegin(count, size_, i));
    }
    int rc = MPI_Reduce_scatter(in, out, counts.data(), Type(t), Op(t, op), comm_);
    if (rc == MPI_SUCCESS && op == ReduceOp::kAvg) Divide(out, counts[rank_], t, size_);
    return Done(rc, "MPI_Reduce_scatter");
  }
  std::shared_ptr<Work> AllGather(const void* in, void* out, size_t count,
                                  DataType t, const OpOptions&) override {
    std::vector<int> counts(size_), displs(size_);
    for (int i = 0; i < size_; ++i) {
      displs[i] = static_cast<int>(algorithms::BlockBegin(count, size_, i));
      counts[i] = static_cast<int>(algorithms::BlockBegin(count, size_, i + 1)) - displs[i];
    }
    return Done(MPI_Allgatherv(in, counts[rank_], Type(t), out, counts.data(),
                               displs.data(), Type(t), comm_),
                "MPI_Allgatherv");
  }
  std::shared_ptr<Work> Broadcast(void* buf, size_t count, DataType t, int root,
                                  const OpOptions&) override {
    return Done(MPI_Bcast(buf, static_cast<int>(count), Type(t), root, comm_), "MPI_Bcast");
  }
  std::shared_ptr<Work> AllToAll(const void* in, void* out, size_t per,
                                 DataType t, const OpOptions&) override {
    return Done(MPI_Alltoall(in, static_cast<int>(per), Type(t), out,
                             static_cast<int>(per), Type(t), comm_),
                "MPI_Alltoall");
  }
  std::shared_ptr<Work> Send(const void* buf, size_t count, DataType t, int peer,
                             const OpOptions&) override {
    return Done(MPI_Send(buf, static_cast<int>(count), Type(t), peer, 0, comm_), "MPI_Send");
  }
  std::shared_ptr<Work> Recv(void* buf, size_t count, DataType t, int peer,
                             const OpOptions&) override {
    return Done(MPI_Recv(buf, static_cast<int>(count), Type(t), peer, 0, comm_,
                         MPI_STATUS_IGNORE),
                "MPI_Recv");
  }
  std::shared_ptr<Work> Barrier(const OpOptions&) override {
    return Done(MPI_Barrier(comm_), "MPI_Barrier");
  }
  void Abort() override { MPI_Abort(comm_, 1); }

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
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
