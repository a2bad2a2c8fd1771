#include "launch/mpi_world.h"

#include <mpi.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"

namespace strata::launch {
namespace {

// Converts an MPI error code at the adapter, with the call site.
Status MpiStatus(int rc, const char* what, int line) {
  if (rc == MPI_SUCCESS) return absl::OkStatus();
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return absl::InternalError(absl::StrCat(what, " failed (mpi_world.cc:", line,
                                          "): ", std::string(msg, len)));
}
#define MPI_OK(call) MpiStatus((call), #call, __LINE__)

}  // namespace

StatusOr<MpiWorld> MpiWorld::Init(int* argc, char*** argv) {
  RETURN_IF_ERROR(MPI_OK(MPI_Init(argc, argv)));
  RETURN_IF_ERROR(
      MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN)));
  int rank = 0, size = 0;
  RETURN_IF_ERROR(MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank)));
  RETURN_IF_ERROR(MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &size)));
  return MpiWorld(rank, size);
}

StatusOr<std::vector<std::string>> MpiWorld::AllGather(
    const std::string& mine) const {
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(size_), offs(size_);
  RETURN_IF_ERROR(MPI_OK(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1,
                                       MPI_INT, MPI_COMM_WORLD)));
  int total = 0;
  for (int r = 0; r < size_; ++r) {
    offs[r] = total;
    total += lens[r];
  }
  std::string all(total, '\0');
  RETURN_IF_ERROR(
      MPI_OK(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(),
                            offs.data(), MPI_CHAR, MPI_COMM_WORLD)));
  std::vector<std::string> out(size_);
  for (int r = 0; r < size_; ++r) out[r] = all.substr(offs[r], lens[r]);
  return out;
}

StatusOr<std::string> MpiWorld::Broadcast(const std::string& value) const {
  int len = static_cast<int>(value.size());
  RETURN_IF_ERROR(MPI_OK(MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD)));
  std::string out = rank_ == 0 ? value : std::string(len, '\0');
  RETURN_IF_ERROR(
      MPI_OK(MPI_Bcast(out.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD)));
  return out;
}

Status MpiWorld::PollingBarrier(int poll_ms) const {
  MPI_Request req;
  RETURN_IF_ERROR(MPI_OK(MPI_Ibarrier(MPI_COMM_WORLD, &req)));
  for (;;) {
    int done = 0;
    RETURN_IF_ERROR(MPI_OK(MPI_Test(&req, &done, MPI_STATUS_IGNORE)));
    if (done) return absl::OkStatus();
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  }
}

void MpiWorld::Abort(int code) const {
  MPI_Abort(MPI_COMM_WORLD, code);
  _Exit(code);  // MPI_Abort does not return; in case it does
}

Status MpiWorld::Finalize() const { return MPI_OK(MPI_Finalize()); }

}  // namespace strata::launch
