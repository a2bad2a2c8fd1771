// Backend over MPI, for jobs started by mpirun (DESIGN.md §5). Operations
// run synchronously on the calling thread and return completed Work
// handles; MPI must be initialised (MPI_Init_thread with at least
// MPI_THREAD_SERIALIZED) and only one thread may use the backend at a time.
//
// Limits: MPI has no per-operation timeout, so a dead or stuck peer is
// handled by mpirun (Open MPI aborts the job when a rank dies), not by
// DeadlineExceeded; Abort() calls MPI_Abort. f16/bf16 reductions use
// user-defined MPI operations built on comm/types.h kernels.
#pragma once

#include <memory>

#include "comm/backend.h"

namespace strata::comm {

// Wraps a duplicate of MPI_COMM_WORLD. FailedPrecondition when MPI is not
// initialised.
StatusOr<std::unique_ptr<Backend>> NewMpiBackend();

}  // namespace strata::comm
