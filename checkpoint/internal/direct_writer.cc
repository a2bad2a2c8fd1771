#include "checkpoint/internal/direct_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace strata::checkpoint::internal {

StatusOr<std::unique_ptr<DirectWriter>> DirectWriter::Create(
    const std::string& path) {
  bool direct = true;
  int fd = open(path.c_str(),
                O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_DIRECT,
                0644);
  if (fd < 0 && errno == EINVAL) {
    direct = false;
    fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
              0644);
  }
  if (fd < 0) return ErrnoToStatus(errno, "open " + path);
  auto w = std::unique_ptr<DirectWriter>(new DirectWriter(path, fd, direct));
  if (posix_memalign(reinterpret_cast<void**>(&w->buf_), kAlign,
                     kBufferBytes) != 0) {
    return absl::ResourceExhaustedError(
        "cannot allocate the write buffer for " + path);
  }
  return w;
}

DirectWriter::DirectWriter(std::string path, int fd, bool direct)
    : path_(std::move(path)), fd_(fd), direct_(direct) {}

DirectWriter::~DirectWriter() {
  if (fd_ >= 0) close(fd_);
  std::free(buf_);
}

Status DirectWriter::Flush(size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t w =
        pwrite(fd_, buf_ + done, n - done, static_cast<off_t>(flushed_ + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return ErrnoToStatus(errno, "write " + path_);
    done += static_cast<size_t>(w);
  }
  flushed_ += n;
  return absl::OkStatus();
}

Status DirectWriter::Append(const char* data, size_t n) {
  while (n > 0) {
    const size_t k = std::min(n, kBufferBytes - used_);
    std::memcpy(buf_ + used_, data, k);
    used_ += k;
    size_ += k;
    data += k;
    n -= k;
    if (used_ == kBufferBytes) {
      RETURN_IF_ERROR(Flush(used_));
      used_ = 0;
    }
  }
  return absl::OkStatus();
}

Status DirectWriter::Finish() {
  if (used_ > 0) {
    // O_DIRECT writes whole aligned blocks: pad, then cut the file back.
    const size_t padded =
        direct_ ? (used_ + kAlign - 1) / kAlign * kAlign : used_;
    std::memset(buf_ + used_, 0, padded - used_);
    RETURN_IF_ERROR(Flush(padded));
    used_ = 0;
  }
  if (ftruncate(fd_, static_cast<off_t>(size_)) != 0)
    return ErrnoToStatus(errno, "truncate " + path_);
  if (fsync(fd_) != 0) return ErrnoToStatus(errno, "fsync " + path_);
  const int fd = fd_;
  fd_ = -1;
  if (close(fd) != 0) return ErrnoToStatus(errno, "close " + path_);
  return absl::OkStatus();
}

}  // namespace strata::checkpoint::internal
