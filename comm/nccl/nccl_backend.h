// Backend over NCCL for GPU buffers (docs/comm.md). Built only where CUDA
// and NCCL are found (STRATA_WITH_CUDA=AUTO); its tests skip without a GPU.
//
// Buffers are device pointers. Operations are enqueued on the backend's
// CUDA stream and return at once; Work::Wait polls a CUDA event until the
// operation's timeout, then aborts the communicator (ncclCommAbort) and
// returns DeadlineExceeded — NCCL's own answer to a dead or stuck peer.
// Abort() (any thread) calls ncclCommAbort once: pending Work returns
// Aborted, later operations FailedPrecondition.
// NCCL needs equal block sizes, so reduce-scatter and all-gather with a
// count not divisible by the group size fall back to all-reduce + copy and
// to one broadcast per block.
#pragma once

#include <memory>

#include "comm/backend.h"
#include "comm/store.h"

namespace strata::comm {

// Creates the communicator: rank 0 makes the NCCL unique id and publishes it
// under "nccl/id" in `store`; every rank joins with ncclCommInitRank on the
// current CUDA device. FailedPrecondition when no GPU is usable.
StatusOr<std::unique_ptr<Backend>> NewNcclBackend(
    std::shared_ptr<Store> store, int rank, int size,
    std::chrono::milliseconds timeout = std::chrono::seconds(300));

// Number of CUDA devices this process can use (0 without a GPU or driver).
int CudaDeviceCount();

}  // namespace strata::comm
