#include "checkpoint/internal/direct_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace strata::checkpoint::internal {
namespace {

// Aligned write buffers kept across files, so a later save does not fault
// their pages in again (~24,000 faults per 96 MiB). At most one file's
// worth is kept.
class BufferPool {
 public:
  static BufferPool& Get() {
    static BufferPool* pool = new BufferPool;  // never destroyed
    return *pool;
  }
  // nullptr when out of memory.
  char* Take(size_t align, size_t bytes) {
    {
      MutexLock lock(mu_);
      if (!kept_.empty()) {
        char* b = kept_.back();
        kept_.pop_back();
        return b;
      }
    }
    void* p = nullptr;
    return posix_memalign(&p, align, bytes) == 0 ? static_cast<char*>(p)
                                                 : nullptr;
  }
  void Give(char* b) {
    if (b == nullptr) return;
    {
      MutexLock lock(mu_);
      if (kept_.size() < static_cast<size_t>(DirectWriter::kBuffers)) {
        kept_.push_back(b);
        return;
      }
    }
    std::free(b);
  }

 private:
  Mutex mu_;
  std::vector<char*> kept_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

StatusOr<std::unique_ptr<DirectWriter>> DirectWriter::Create(
    const std::string& path) {
  bool direct = true;
  int fd = open(
      path.c_str(),
      O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_DIRECT, 0644);
  if (fd < 0 && errno == EINVAL) {
    direct = false;
    fd = open(path.c_str(),
              O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  }
  if (fd < 0) return ErrnoToStatus(errno, "open " + path);
  auto w = std::unique_ptr<DirectWriter>(new DirectWriter(path, fd, direct));
  w->cur_ = BufferPool::Get().Take(kAlign, kBufferBytes);
  if (w->cur_ == nullptr) {
    return absl::ResourceExhaustedError(
        "cannot allocate the write buffer for " + path);
  }
  w->allocated_ = 1;
  return w;
}

DirectWriter::DirectWriter(std::string path, int fd, bool direct)
    : path_(std::move(path)), direct_(direct), fd_(fd) {
  for (int i = 0; i < kIoThreads; ++i) io_.emplace_back([this] { IoLoop(); });
}

DirectWriter::~DirectWriter() {
  StopThreads();
  if (fd_ >= 0) close(fd_);
  BufferPool::Get().Give(cur_);
  for (char* b : free_) BufferPool::Get().Give(b);
}

void DirectWriter::StopThreads() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : io_) t.join();
  io_.clear();
}

// Writer thread: takes the oldest queued piece and writes it at its offset
// (pieces are disjoint, so two threads' pwrites never overlap). After the
// first error the remaining pieces are dropped: the stream is lost anyway.
void DirectWriter::IoLoop() {
  UniqueLock lock(mu_);
  for (;;) {
    cv_.wait(lock.native(), [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || !queue_.empty();
    });
    if (queue_.empty()) return;  // stopping, nothing left to write
    Piece p = queue_.front();
    queue_.pop_front();
    const bool failed = !error_.ok();
    ++writing_;
    lock.unlock();
    Status st;
    for (size_t done = 0; !failed && done < p.len;) {
      ssize_t w = pwrite(fd_, p.data + done, p.len - done,
                         static_cast<off_t>(p.offset + done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        st = ErrnoToStatus(w < 0 ? errno : EIO, "write " + path_);
        break;
      }
      done += static_cast<size_t>(w);
    }
    lock.lock();
    --writing_;
    if (!st.ok() && error_.ok()) error_ = st;
    if (p.owned) free_.push_back(const_cast<char*>(p.data));
    cv_.notify_all();
  }
}

Status DirectWriter::Submit(size_t len, bool last) {
  UniqueLock lock(mu_);
  queue_.push_back({cur_, len, flushed_, /*owned=*/true});
  cur_ = nullptr;
  flushed_ += len;
  cv_.notify_all();
  if (!error_.ok() || last) return error_;
  if (free_.empty() && allocated_ < kBuffers) {
    lock.unlock();
    char* b = BufferPool::Get().Take(kAlign, kBufferBytes);
    if (b == nullptr) {
      return absl::ResourceExhaustedError(
          "cannot allocate a write buffer for " + path_);
    }
    cur_ = b;
    ++allocated_;
    return absl::OkStatus();
  }
  cv_.wait(lock.native(), [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !free_.empty();
  });
  cur_ = free_.back();
  free_.pop_back();
  return error_;
}

Status DirectWriter::Drain() {
  UniqueLock lock(mu_);
  cv_.wait(lock.native(), [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return queue_.empty() && writing_ == 0;
  });
  return error_;
}

Status DirectWriter::WriteFrom(const char* data, size_t len) {
  {
    MutexLock lock(mu_);
    for (size_t o = 0; o < len; o += kBufferBytes) {
      queue_.push_back({data + o, std::min(kBufferBytes, len - o),
                        flushed_ + o, /*owned=*/false});
    }
    flushed_ += len;
  }
  cv_.notify_all();
  // The pieces point at the caller's memory: wait before returning.
  return Drain();
}

Status DirectWriter::Append(const char* data, size_t n) {
  // A large stretch aligned in memory and in the file (the bytes buffered
  // so far fill whole blocks): flush those, then write the stretch's whole
  // blocks from the caller's memory; the rest is copied below.
  if (n >= kDirectFromBytes && cur_ != nullptr && used_ % kAlign == 0 &&
      reinterpret_cast<uintptr_t>(data) % kAlign == 0) {
    if (used_ > 0) {
      const size_t len = used_;
      used_ = 0;
      RETURN_IF_ERROR(Submit(len, /*last=*/false));
    }
    const size_t len = n / kAlign * kAlign;
    RETURN_IF_ERROR(WriteFrom(data, len));
    size_ += len;
    data += len;
    n -= len;
  }
  while (n > 0) {
    if (cur_ == nullptr) {
      return absl::FailedPreconditionError("write " + path_ +
                                           ": the stream has failed");
    }
    const size_t k = std::min(n, kBufferBytes - used_);
    std::memcpy(cur_ + used_, data, k);
    used_ += k;
    size_ += k;
    data += k;
    n -= k;
    if (used_ == kBufferBytes) {
      used_ = 0;
      RETURN_IF_ERROR(Submit(kBufferBytes, /*last=*/false));
    }
  }
  return absl::OkStatus();
}

Status DirectWriter::Finish() {
  if (cur_ != nullptr && used_ > 0) {
    // O_DIRECT writes whole aligned blocks: pad, then cut the file back.
    const size_t padded =
        direct_ ? (used_ + kAlign - 1) / kAlign * kAlign : used_;
    std::memset(cur_ + used_, 0, padded - used_);
    used_ = 0;
    RETURN_IF_ERROR(Submit(padded, /*last=*/true));
  }
  RETURN_IF_ERROR(Drain());
  StopThreads();
  if (ftruncate(fd_, static_cast<off_t>(size_)) != 0)
    return ErrnoToStatus(errno, "truncate " + path_);
  if (fsync(fd_) != 0) return ErrnoToStatus(errno, "fsync " + path_);
  const int fd = fd_;
  fd_ = -1;
  if (close(fd) != 0) return ErrnoToStatus(errno, "close " + path_);
  return absl::OkStatus();
}

}  // namespace strata::checkpoint::internal
