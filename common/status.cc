#include "common/status.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace strata {

Status ErrnoToStatus(int err, const std::string& what) {
  std::string msg = what + ": " + std::strerror(err);
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(msg);
    case EEXIST:
      return absl::AlreadyExistsError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    case EINVAL:
      return absl::InvalidArgumentError(msg);
    case ENOSPC:
    case ENOMEM:
    case EMFILE:
    case ENFILE:
      return absl::ResourceExhaustedError(msg);
    case ETIMEDOUT:
      return absl::DeadlineExceededError(msg);
    case EAGAIN:
    case EINTR:
    case ECONNREFUSED:
    case ECONNRESET:
    case EPIPE:
    case EHOSTUNREACH:
    case ENETUNREACH:
      return absl::UnavailableError(msg);
    case EIO:
      return absl::DataLossError(msg);
    default:
      return absl::UnknownError(msg);
  }
}

namespace internal {
void CheckFailed(const char* file, int line, const char* expr,
                 const std::string& detail) {
  std::fprintf(stderr, "%s:%d: check failed: %s %s\n", file, line, expr,
               detail.c_str());
  std::fflush(stderr);
  std::abort();
}
}  // namespace internal

}  // namespace strata
