// Durable file writing for checkpoints (internal).
#pragma once

#include <string>

#include "checkpoint/storage.h"
#include "common/status.h"

namespace strata::checkpoint::internal {

// Writes `data` to `path` through `path.tmp`: write, fsync, rename, fsync
// of the directory — the file appears whole or not at all. Never follows a
// symlink at `path.tmp`; on failure `path.tmp` is removed.
Status WriteFileAtomic(const std::string& path, const std::string& data);
Status FsyncDir(const std::string& dir);
Status MakeDirs(const std::string& dir);
// pread of exactly n bytes; DataLoss naming the file when it is short.
Status ReadAt(int fd, const std::string& path, uint64_t offset, void* buf,
              size_t n);

// Reads the whole regular file at `path`, never through a symlink at its
// last component: NotFound when missing, FailedPrecondition for a symlink.
StatusOr<std::string> ReadFileNoFollow(const std::string& path);

// Pins by flock on the file at `path` (never a symlink): a shared lock,
// taken (blocking briefly behind a remover) on the file, created first when
// `create`. NotFound when the file is missing or was unlinked before the
// lock took hold.
StatusOr<std::unique_ptr<StepPin>> PinFile(const std::string& path,
                                           bool create);
// The exclusive lock, without waiting: an open descriptor holding it (close
// releases it), FailedPrecondition naming `what` while a pin holds the
// file, NotFound when it is missing (and not `create`).
StatusOr<int> LockExclusive(const std::string& path, bool create,
                            const std::string& what);

}  // namespace strata::checkpoint::internal
