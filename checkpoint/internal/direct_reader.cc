#include "checkpoint/internal/direct_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "checkpoint/internal/file_util.h"

namespace strata::checkpoint::internal {

StatusOr<std::unique_ptr<DirectReader>> DirectReader::Open(
    const std::string& path) {
  bool direct = true;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_DIRECT);
  if (fd < 0 && errno == EINVAL) {
    direct = false;
    fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  }
  if (fd < 0 && errno == ELOOP) {
    return absl::DataLossError("checkpoint data file " + path +
                               " is a symlink; not followed");
  }
  if (fd < 0 && errno == ENOENT) {
    return absl::DataLossError("checkpoint data file " + path + " is missing");
  }
  if (fd < 0) return ErrnoToStatus(errno, "open " + path);
  return std::unique_ptr<DirectReader>(new DirectReader(path, fd, direct));
}

DirectReader::DirectReader(std::string path, int fd, bool direct)
    : path_(std::move(path)), fd_(fd), direct_(direct) {}

DirectReader::~DirectReader() {
  close(fd_);
  for (char* b : free_) std::free(b);
}

char* DirectReader::Acquire() {
  {
    MutexLock lock(mu_);
    if (!free_.empty()) {
      char* b = free_.back();
      free_.pop_back();
      return b;
    }
  }
  void* b = nullptr;
  if (posix_memalign(&b, kAlign, kBounceBytes) != 0) return nullptr;
  return static_cast<char*>(b);
}

void DirectReader::Release(char* b) {
  MutexLock lock(mu_);
  free_.push_back(b);
}

Status DirectReader::Read(uint64_t offset, void* buf, size_t n) {
  if (!direct_) return ReadAt(fd_, path_, offset, buf, n);
  char* bounce = Acquire();
  if (bounce == nullptr) {
    return absl::ResourceExhaustedError("cannot allocate a read buffer for " +
                                        path_);
  }
  char* out = static_cast<char*>(buf);
  const uint64_t end = offset + n;
  Status st;
  // Whole aligned windows around [offset, end); the last block of the file
  // may be short, which O_DIRECT reports as a short read.
  for (uint64_t pos = offset / kAlign * kAlign; pos < end && st.ok();) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(
        kBounceBytes, (end - pos + kAlign - 1) / kAlign * kAlign));
    ssize_t r = pread(fd_, bounce, want, static_cast<off_t>(pos));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      st = ErrnoToStatus(errno, "read " + path_);
      break;
    }
    const uint64_t got_end = pos + static_cast<uint64_t>(r);
    const uint64_t b = std::max(pos, offset);
    const uint64_t e = std::min(got_end, end);
    if (b < e) std::memcpy(out + (b - offset), bounce + (b - pos), e - b);
    // End of file before `end`: nothing read, or a read ending mid-block
    // (a short read ending on a block boundary is simply continued).
    if (got_end < end && (r == 0 || got_end % kAlign != 0)) {
      st = absl::DataLossError(absl::StrCat(
          path_, " is truncated: wanted bytes [", offset, ", ", end, ")"));
    }
    pos = got_end;
  }
  Release(bounce);
  return st;
}

}  // namespace strata::checkpoint::internal
