// The few MPI calls strata-exec makes, with MPI errors turned into Status
// (MPI_ERRORS_RETURN on MPI_COMM_WORLD). Every call is collective over
// MPI_COMM_WORLD and must be made by all ranks in the same order; a failed
// collective leaves the ranks out of step, so callers Abort() on error.
// Main thread only (MPI_THREAD_SINGLE).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace strata::launch {

class MpiWorld {
 public:
  // MPI_Init. Once per process.
  static StatusOr<MpiWorld> Init(int* argc, char*** argv);

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Every rank's `mine`, indexed by rank (any lengths).
  StatusOr<std::vector<std::string>> AllGather(const std::string& mine) const;
  // Rank 0's `value` on every rank (other ranks' argument is ignored).
  StatusOr<std::string> Broadcast(const std::string& value) const;
  // A barrier that sleeps between polls (MPI_Ibarrier + MPI_Test every
  // `poll_ms`) instead of busy-waiting, so ranks that finished early do not
  // take CPU from ranks still running. Returns when every rank has entered.
  Status PollingBarrier(int poll_ms = 20) const;
  // MPI_Abort(MPI_COMM_WORLD, code): mpirun kills every rank and reports.
  [[noreturn]] void Abort(int code) const;
  Status Finalize() const;

 private:
  MpiWorld(int rank, int size) : rank_(rank), size_(size) {}
  int rank_, size_;
};

}  // namespace strata::launch
