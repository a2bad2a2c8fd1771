// Durable file writing for checkpoints (internal).
#pragma once

#include <string>

#include "common/status.h"

namespace strata::checkpoint::internal {

// Writes `data` to `path` through `path.tmp`: write, fsync, rename, fsync
// of the directory — the file appears whole or not at all.
Status WriteFileAtomic(const std::string& path, const std::string& data);
Status FsyncDir(const std::string& dir);
Status MakeDirs(const std::string& dir);
// pread of exactly n bytes; DataLoss naming the file when it is short.
Status ReadAt(int fd, const std::string& path, uint64_t offset, void* buf,
              size_t n);

}  // namespace strata::checkpoint::internal
