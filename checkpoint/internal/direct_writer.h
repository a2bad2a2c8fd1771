// Sequential writer for checkpoint data files (internal). Bytes are copied
// into aligned buffers and written with O_DIRECT in large aligned pieces:
// on the disks we measured, buffered writes are bound by page-cache
// allocation (~0.9 GB/s here) while direct writes run at the device's rate
// (~3 GB/s here). Falls back to buffered I/O where O_DIRECT is refused
// (tmpfs). The file ends up exactly as long as the bytes appended.
//
// Pipelined: a full buffer goes to one of kIoThreads writer threads and the
// caller goes on filling the next one, so the caller's copy and checksum
// overlap the device's writes and up to kIoThreads writes are in flight
// (a single synchronous 8 MiB write at a time left the disk idle between
// writes: 0.9-1.1 GB/s here against 1.4-1.7 GB/s for 64-128 MiB requests
// or two in flight; docs/results.md, "PyTorch"). A large appended stretch
// that starts page-aligned in memory and in the file is written straight
// from the caller's memory, without the copy (O_DIRECT needs both
// alignments): Append then returns once it is written. Either way the
// caller's memory is never referenced after Append returns.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"

namespace strata::checkpoint::internal {

// Append and Finish run on one caller thread (not thread-safe); the writer
// threads are internal and joined by Finish or the destructor.
class DirectWriter {
 public:
  static StatusOr<std::unique_ptr<DirectWriter>> Create(
      const std::string& path);
  // Waits for the writes in flight, then closes the file (not durable
  // unless Finish succeeded).
  ~DirectWriter();
  DirectWriter(const DirectWriter&) = delete;
  DirectWriter& operator=(const DirectWriter&) = delete;

  // Copies the bytes (or writes a large aligned stretch of them directly,
  // see above); a full buffer is queued for writing. Returns the
  // first write error of this file once one has happened (the stream is
  // then lost). REQUIRES: Finish() has not been called.
  Status Append(const char* data, size_t n);
  // Writes the tail, waits for every write, trims the padding and makes
  // the file durable (fsync). The first error of any write or of these.
  // REQUIRES: called at most once.
  Status Finish();
  uint64_t size() const { return size_; }

  // Bytes per write request and buffers per file: 32 MiB requests reach
  // the rate of 64 MiB ones here with two in flight (docs/results.md);
  // three buffers let the caller fill one while two are written.
  static constexpr size_t kBufferBytes = 32 << 20;
  static constexpr int kBuffers = 3;
  static constexpr int kIoThreads = 2;
  // Stretches from this size on are written without a copy when aligned.
  static constexpr size_t kDirectFromBytes = 1 << 20;
  static constexpr size_t kAlign = 4096;

 private:
  struct Piece {
    const char* data;
    size_t len;  // bytes to write (padded to kAlign with O_DIRECT)
    uint64_t offset;
    bool owned;  // one of our buffers (back to free_ once written)
  };

  DirectWriter(std::string path, int fd, bool direct);
  // Queues buffer `cur_` holding `len` bytes at flushed_, then, unless
  // `last`, takes a free buffer (waiting for one) into cur_.
  Status Submit(size_t len, bool last);
  void IoLoop();
  // Writes `len` bytes (a multiple of kAlign with O_DIRECT) from the
  // caller's `data` at flushed_, through the writer threads, and waits.
  Status WriteFrom(const char* data, size_t len);
  // Waits until no write is queued or in flight; the first error.
  Status Drain();
  void StopThreads();

  const std::string path_;
  const bool direct_;
  int fd_;
  char* cur_ = nullptr;   // the buffer being filled (caller's)
  size_t used_ = 0;       // bytes in cur_
  uint64_t flushed_ = 0;  // bytes handed to writers
  uint64_t size_ = 0;     // bytes appended
  int allocated_ = 0;     // buffers taken from the pool (<= kBuffers)

  Mutex mu_;
  std::condition_variable cv_;
  std::deque<Piece> queue_ ABSL_GUARDED_BY(mu_);  // to write
  std::vector<char*> free_ ABSL_GUARDED_BY(mu_);  // written, reusable
  int writing_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Status error_ ABSL_GUARDED_BY(mu_);  // the first write error
  std::vector<std::thread> io_;
};

}  // namespace strata::checkpoint::internal
