// Reader for checkpoint data files (internal), the counterpart of
// DirectWriter. Reads go through O_DIRECT into aligned bounce buffers and
// are copied out: a resharding load reads each byte once, so the page cache
// only costs (allocating, filling and evicting its pages bounds buffered
// reads near 2 GB/s on the VMs we measured, where direct reads of the same
// files run at the device's 2.3-3.2 GB/s — docs/checkpoint.md) and a large
// load would evict the host's working set. The copy out is a memcpy at tens
// of GB/s, and it lets callers pass any buffer (O_DIRECT needs block-aligned
// addresses, offsets and lengths, which tensor memory rarely has). Falls back
// to buffered reads where O_DIRECT is refused (tmpfs). Thread-safe: each
// read takes a bounce buffer from a pool, so concurrent reads overlap.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"

namespace strata::checkpoint::internal {

class DirectReader {
 public:
  // DataLoss naming `path` when it is missing.
  static StatusOr<std::unique_ptr<DirectReader>> Open(const std::string& path);
  ~DirectReader();
  DirectReader(const DirectReader&) = delete;
  DirectReader& operator=(const DirectReader&) = delete;

  // Exactly n bytes at `offset` into `buf`; DataLoss naming the file and
  // the byte range when the file is shorter.
  Status Read(uint64_t offset, void* buf, size_t n);

 private:
  DirectReader(std::string path, int fd, bool direct);
  char* Acquire();
  void Release(char* b);

  static constexpr uint64_t kAlign = 4096;
  // A 2 MiB read piece (reader.cc) plus the blocks around an unaligned
  // start and end: one pread per piece.
  static constexpr size_t kBounceBytes = (2 << 20) + 2 * kAlign;
  const std::string path_;
  const int fd_;
  const bool direct_;
  Mutex mu_;
  std::vector<char*> free_ ABSL_GUARDED_BY(mu_);  // idle bounce buffers
};

}  // namespace strata::checkpoint::internal
