#include "checkpoint/location.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "checkpoint/storage/storages.h"

namespace strata::checkpoint {
namespace {

Status Failed(const std::string& dir, const std::string& what, int err) {
  return absl::FailedPreconditionError(
      absl::StrCat("checkpoint location ", dir, " is not writable: ", what,
                   ": ", std::strerror(err), " (", FreeSpace(dir), ")"));
}

}  // namespace

StatusOr<std::string> CheckpointDir(const std::string& uri) {
  if (uri.starts_with("mem://")) return MemTierDir(uri);
  std::string dir = uri;
  for (const char* scheme : {"rocksdb://", "file://"}) {
    if (dir.starts_with(scheme)) dir = dir.substr(std::strlen(scheme));
  }
  if (dir.find("://") != std::string::npos || dir.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint URI '", uri,
                     "': expected file:///DIR, rocksdb:///DIR or a path"));
  }
  return dir;
}

Status CheckWritable(const std::string& uri, int rank) {
  ASSIGN_OR_RETURN(std::string dir, CheckpointDir(uri));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Failed(dir, "cannot create it", ec.value());
  const std::string probe =
      absl::StrCat(dir, "/.strata-write-probe.", rank, ".", getpid());
  int fd = open(probe.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Failed(dir, "cannot create a file in it", errno);
  const char bytes[4096] = {};
  const ssize_t w = write(fd, bytes, sizeof(bytes));
  const int write_err = w < 0 ? errno : ENOSPC;  // short write: full
  const bool written = w == static_cast<ssize_t>(sizeof(bytes));
  const bool synced = written && fsync(fd) == 0;
  const int sync_err = errno;
  close(fd);
  unlink(probe.c_str());
  if (!written) return Failed(dir, "cannot write 4 KiB", write_err);
  if (!synced) return Failed(dir, "fsync failed", sync_err);
  return absl::OkStatus();
}

std::string FreeSpace(const std::string& dir) {
  std::filesystem::path p = dir.empty() ? "." : dir;
  struct statvfs vfs;
  while (statvfs(p.c_str(), &vfs) != 0) {
    if (!p.has_parent_path() || p.parent_path() == p) {
      return "free space unknown";
    }
    p = p.parent_path();
  }
  const double mib = 1024.0 * 1024.0;
  return absl::StrFormat("%.1f MiB free of %.1f MiB on %s",
                         static_cast<double>(vfs.f_bavail) * vfs.f_frsize / mib,
                         static_cast<double>(vfs.f_blocks) * vfs.f_frsize / mib,
                         p.string());
}

}  // namespace strata::checkpoint
