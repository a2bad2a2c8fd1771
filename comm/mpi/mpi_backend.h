// Backend over MPI, for jobs started by mpirun (docs/comm.md). Operations
// are MPI's nonblocking calls (MPI_Iallreduce, ...; SendRecv is an
// MPI_Isend plus an MPI_Irecv); Work::Wait polls MPI_Test until the
// operation's timeout (300 s by default, or OpOptions::timeout, counted from
// the call), then returns DeadlineExceeded — MPI cannot say which peer is
// missing. A dead rank normally makes mpirun abort the whole job.
//
// Threads: MPI must be initialised with at least MPI_THREAD_SERIALIZED and
// one thread at a time issues and waits on operations. Abort() may be
// called from any thread: it makes no MPI call, it marks the group aborted,
// so every pending Work returns Aborted at its next Wait or IsCompleted and
// later operations fail with FailedPrecondition (as after any error). MPI
// has no way to cancel a started collective: if the peers later complete
// an aborted operation, MPI still reads and writes its buffers, so keep
// them alive until MPI is finalised (or the process exits); for the same
// reason a broken backend leaves its communicator allocated.
//
// f16/bf16 reductions use user-defined MPI operations built on comm/types.h
// kernels.
#pragma once

#include <chrono>
#include <memory>

#include "comm/backend.h"

namespace strata::comm {

// Initialises MPI (MPI_THREAD_SERIALIZED, no argv) unless it already is,
// and then finalises it at process exit. Internal on failure.
Status EnsureMpiInitialized();

// Wraps a duplicate of MPI_COMM_WORLD. FailedPrecondition when MPI is not
// initialised.
StatusOr<std::unique_ptr<Backend>> NewMpiBackend(
    std::chrono::milliseconds timeout = std::chrono::seconds(300));

// Collective over MPI_COMM_WORLD (every world rank calls it, in the same
// order): ranks passing the same `color` (>= 0) form one group, ranked by
// `key` (MPI_Comm_split).
StatusOr<std::unique_ptr<Backend>> NewMpiSplitBackend(
    int color, int key,
    std::chrono::milliseconds timeout = std::chrono::seconds(300));

}  // namespace strata::comm
