// Where a checkpoint URI lives on the file system: its directory, a check
// that it can be written (trainers run it before their first step, so an
// unwritable location fails at start, not after the run), and how much
// space is left there (every failed save names it).
#pragma once

#include <string>

#include "common/status.h"

namespace strata::checkpoint {

// The directory of a checkpoint URI: file:///DIR, rocksdb:///DIR or a plain
// DIR. InvalidArgument for another scheme or an empty path.
StatusOr<std::string> CheckpointDir(const std::string& uri);

// Creates the directory of `uri` if needed, then creates, writes, fsyncs
// and removes a probe file in it (named after `rank` and the process id,
// so ranks sharing the directory do not collide). FailedPrecondition
// naming the directory and the system's error when any of that fails;
// InvalidArgument as CheckpointDir.
Status CheckWritable(const std::string& uri, int rank);

// "N MiB free of M MiB on DIR" for the file system holding `dir` (or its
// nearest existing parent); "free space unknown" when that cannot be read.
std::string FreeSpace(const std::string& dir);

}  // namespace strata::checkpoint
