// Backend over MPI, for jobs started by mpirun (docs/comm.md). Operations
// are MPI's nonblocking calls (MPI_Iallreduce, ...); Work::Wait polls
// MPI_Test until the operation's timeout (300 s by default, or
// OpOptions::timeout), then returns DeadlineExceeded — MPI cannot say which
// peer is missing. A dead rank normally makes mpirun abort the whole job.
// MPI must be initialised (MPI_Init_thread with at least
// MPI_THREAD_SERIALIZED); one thread uses the backend at a time, and an
// operation's Work must complete before the next reduce-scatter or
// all-gather is issued (their count arrays are reused). Abort() calls
// MPI_Abort. f16/bf16 reductions use user-defined MPI operations built on
// comm/types.h kernels.
#pragma once

#include <memory>

#include "comm/backend.h"

namespace strata::comm {

// Wraps a duplicate of MPI_COMM_WORLD. FailedPrecondition when MPI is not
// initialised.
StatusOr<std::unique_ptr<Backend>> NewMpiBackend();

}  // namespace strata::comm
