#include "comm/nccl/nccl_backend.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "comm/algorithms/algorithms.h"

namespace strata::comm {
namespace {

Status CudaError(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat(what, ": ", cudaGetErrorString(e)));
}

Status NcclError(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat(what, ": ", ncclGetErrorString(r)));
}

ncclDataType_t Type(DataType t) {
  switch (t) {
    case DataType::kF32:
      return ncclFloat32;
    case DataType::kF64:
      return ncclFloat64;
    case DataType::kF16:
      return ncclFloat16;
    case DataType::kBF16:
      return ncclBfloat16;
    case DataType::kI32:
      return ncclInt32;
    case DataType::kI64:
      return ncclInt64;
  }
  return ncclFloat32;
}

ncclRedOp_t Op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAvg:
      return ncclAvg;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
  }
  return ncclSum;
}

class NcclBackend;

class NcclWork final : public Work {
 public:
  NcclWork(NcclBackend* b, cudaEvent_t ev, Status launch)
      : b_(b), ev_(ev), launch_(std::move(launch)) {}
  ~NcclWork() override {
    if (ev_) cudaEventDestroy(ev_);
  }
  Status Wait(std::chrono::milliseconds timeout) override;
  bool IsCompleted() override {
    return !launch_.ok() || !ev_ || Aborted() ||
           cudaEventQuery(ev_) != cudaErrorNotReady;
  }
  void Abort() override;

 private:
  bool Aborted() const;
  NcclBackend* b_;
  cudaEvent_t ev_;
  Status launch_;
};

class NcclBackend final : public Backend {
 public:
  NcclBackend(ncclComm_t comm, cudaStream_t stream, int rank, int size,
              std::chrono::milliseconds timeout)
      : comm_(comm),
        stream_(stream),
        rank_(rank),
        size_(size),
        timeout_(timeout) {}
  ~NcclBackend() override {
    // ncclCommAbort already freed an aborted communicator.
    if (!aborted_.load()) {
      cudaStreamSynchronize(stream_);
      ncclCommDestroy(comm_);
    }
    cudaStreamDestroy(stream_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "nccl"; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }

  std::shared_ptr<Work> AllReduce(void* buf, size_t count, DataType t,
                                  ReduceOp op, const OpOptions&) override {
    if (aborted()) return Broken();
    return Launch(NcclError(
        ncclAllReduce(buf, buf, count, Type(t), Op(op), comm_, stream_),
        "ncclAllReduce"));
  }
  std::shared_ptr<Work> ReduceScatter(const void* in, void* out, size_t count,
                                      DataType t, ReduceOp op,
                                      const OpOptions&) override {
    if (aborted()) return Broken();
    const size_t es = ElementSize(t);
    const size_t b0 = algorithms::BlockBegin(count, size_, rank_);
    const size_t b1 = algorithms::BlockBegin(count, size_, rank_ + 1);
    if (count % size_ == 0) {
      return Launch(NcclError(ncclReduceScatter(in, out, count / size_, Type(t),
                                                Op(op), comm_, stream_),
                              "ncclReduceScatter"));
    }
    // Uneven blocks: reduce everything into a scratch buffer, keep ours.
    void* tmp = nullptr;
    Status st = CudaError(cudaMallocAsync(&tmp, count * es, stream_),
                          "cudaMallocAsync");
    if (st.ok()) {
      st = NcclError(
          ncclAllReduce(in, tmp, count, Type(t), Op(op), comm_, stream_),
          "ncclAllReduce");
    }
    if (st.ok()) {
      st = CudaError(
          cudaMemcpyAsync(out, static_cast<char*>(tmp) + b0 * es,
                          (b1 - b0) * es, cudaMemcpyDeviceToDevice, stream_),
          "cudaMemcpyAsync");
    }
    if (tmp) cudaFreeAsync(tmp, stream_);
    return Launch(st);
  }
  std::shared_ptr<Work> AllGather(const void* in, void* out, size_t count,
                                  DataType t, const OpOptions&) override {
    if (aborted()) return Broken();
    const size_t es = ElementSize(t);
    if (count % size_ == 0) {
      return Launch(NcclError(
          ncclAllGather(in, out, count / size_, Type(t), comm_, stream_),
          "ncclAllGather"));
    }
    ncclGroupStart();
    Status st;
    for (int r = 0; r < size_ && st.ok(); ++r) {
      const size_t b0 = algorithms::BlockBegin(count, size_, r);
      const size_t b1 = algorithms::BlockBegin(count, size_, r + 1);
      st = NcclError(
          ncclBroadcast(r == rank_ ? in : static_cast<char*>(out) + b0 * es,
                        static_cast<char*>(out) + b0 * es, b1 - b0, Type(t), r,
                        comm_, stream_),
          "ncclBroadcast");
    }
    ncclGroupEnd();
    return Launch(st);
  }
  std::shared_ptr<Work> Broadcast(void* buf, size_t count, DataType t, int root,
                                  const OpOptions&) override {
    if (aborted()) return Broken();
    return Launch(
        NcclError(ncclBroadcast(buf, buf, count, Type(t), root, comm_, stream_),
                  "ncclBroadcast"));
  }
  std::shared_ptr<Work> AllToAll(const void* in, void* out, size_t per,
                                 DataType t, const OpOptions&) override {
    if (aborted()) return Broken();
    const size_t bytes = per * ElementSize(t);
    ncclGroupStart();
    Status st;
    for (int r = 0; r < size_ && st.ok(); ++r) {
      st = NcclError(ncclSend(static_cast<const char*>(in) + r * bytes, per,
                              Type(t), r, comm_, stream_),
                     "ncclSend");
      if (st.ok()) {
        st = NcclError(ncclRecv(static_cast<char*>(out) + r * bytes, per,
                                Type(t), r, comm_, stream_),
                       "ncclRecv");
      }
    }
    ncclGroupEnd();
    return Launch(st);
  }
  std::shared_ptr<Work> Send(const void* buf, size_t count, DataType t,
                             int peer, const OpOptions&) override {
    if (aborted()) return Broken();
    return Launch(NcclError(ncclSend(buf, count, Type(t), peer, comm_, stream_),
                            "ncclSend"));
  }
  std::shared_ptr<Work> Recv(void* buf, size_t count, DataType t, int peer,
                             const OpOptions&) override {
    if (aborted()) return Broken();
    return Launch(NcclError(ncclRecv(buf, count, Type(t), peer, comm_, stream_),
                            "ncclRecv"));
  }
  std::shared_ptr<Work> SendRecv(const void* send, size_t send_count,
                                 int send_peer, void* recv, size_t recv_count,
                                 int recv_peer, DataType t,
                                 const OpOptions&) override {
    if (aborted()) return Broken();
    // Both sides in one NCCL group: they progress together.
    Status st = NcclError(ncclGroupStart(), "ncclGroupStart");
    if (st.ok() && send_peer >= 0 && send_count > 0) {
      st = NcclError(
          ncclSend(send, send_count, Type(t), send_peer, comm_, stream_),
          "ncclSend");
    }
    if (st.ok() && recv_peer >= 0 && recv_count > 0) {
      st = NcclError(
          ncclRecv(recv, recv_count, Type(t), recv_peer, comm_, stream_),
          "ncclRecv");
    }
    Status end = NcclError(ncclGroupEnd(), "ncclGroupEnd");
    return Launch(st.ok() ? end : st);
  }
  std::shared_ptr<Work> Barrier(const OpOptions& o) override {
    if (aborted()) return Broken();
    if (!barrier_buf_) cudaMalloc(&barrier_buf_, sizeof(int));
    return AllReduce(barrier_buf_, 1, DataType::kI32, ReduceOp::kSum, o);
  }
  // ncclCommAbort is NCCL's thread-safe way to stop kernels in flight; it
  // also frees the communicator, so it runs once.
  void Abort() override {
    if (!aborted_.exchange(true)) ncclCommAbort(comm_);
  }

 private:
  // Later operations of an aborted group (its communicator is gone).
  std::shared_ptr<Work> Broken() {
    return std::make_shared<NcclWork>(
        this, nullptr,
        absl::FailedPreconditionError("NCCL backend is broken: aborted"));
  }
  std::shared_ptr<Work> Launch(Status st) {
    cudaEvent_t ev = nullptr;
    if (st.ok()) {
      st = CudaError(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming),
                     "cudaEventCreate");
    }
    if (st.ok())
      st = CudaError(cudaEventRecord(ev, stream_), "cudaEventRecord");
    return std::make_shared<NcclWork>(this, ev, st);
  }

  ncclComm_t comm_;
  cudaStream_t stream_;
  int rank_, size_;
  std::chrono::milliseconds timeout_;
  void* barrier_buf_ = nullptr;
  std::atomic<bool> aborted_{false};
};

Status NcclWork::Wait(std::chrono::milliseconds timeout) {
  if (!launch_.ok()) return launch_;
  const auto limit = std::min(timeout, b_->timeout());
  const auto end = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (b_->aborted()) return absl::AbortedError("NCCL backend aborted");
    cudaError_t e = cudaEventQuery(ev_);
    if (e == cudaSuccess) return absl::OkStatus();
    if (e != cudaErrorNotReady) return CudaError(e, "NCCL operation");
    if (std::chrono::steady_clock::now() >= end) {
      b_->Abort();
      return absl::DeadlineExceededError(absl::StrCat(
          "NCCL operation on rank ", b_->rank(), " did not finish within ",
          limit.count(), " ms; communicator aborted"));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void NcclWork::Abort() { b_->Abort(); }

bool NcclWork::Aborted() const { return b_->aborted(); }

}  // namespace

int CudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

StatusOr<std::unique_ptr<Backend>> NewNcclBackend(
    std::shared_ptr<Store> store, int rank, int size,
    std::chrono::milliseconds timeout) {
  if (CudaDeviceCount() == 0) {
    return absl::FailedPreconditionError(
        "no CUDA device: the nccl backend needs a GPU");
  }
  ncclUniqueId id;
  if (rank == 0) {
    RETURN_IF_ERROR(NcclError(ncclGetUniqueId(&id), "ncclGetUniqueId"));
    RETURN_IF_ERROR(
        store->Set("nccl/id", std::string(id.internal, sizeof(id.internal))));
  } else {
    ASSIGN_OR_RETURN(std::string bytes, store->Get("nccl/id", timeout));
    if (bytes.size() != sizeof(id.internal))
      return absl::DataLossError("bad NCCL id in store");
    std::memcpy(id.internal, bytes.data(), sizeof(id.internal));
  }
  cudaStream_t stream;
  RETURN_IF_ERROR(
      CudaError(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                "cudaStreamCreate"));
  ncclComm_t comm;
  Status st =
      NcclError(ncclCommInitRank(&comm, size, id, rank), "ncclCommInitRank");
  if (!st.ok()) {
    cudaStreamDestroy(stream);
    return st;
  }
  return std::unique_ptr<Backend>(
      std::make_unique<NcclBackend>(comm, stream, rank, size, timeout));
}

}  // namespace strata::comm
