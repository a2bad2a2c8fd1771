// Job output relayed by the workers (control.LogChunk), kept as plain files
// under <state_dir>/logs/<job_id>/: rank-<r>.log per rank (stdout and stderr
// interleaved at line granularity, across attempts) and all.log, the merged
// view with every line prefixed "[rank <r>] ". Files survive a coordinator
// restart; a chunk re-sent because its heartbeat reply was lost may appear
// twice (documented in docs/control-plane.md). Event-loop thread only.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "proto/control.pb.h"

namespace strata::coordinator {

class LogStore {
 public:
  explicit LogStore(std::string dir);

  Status Append(const control::LogChunk& chunk);
  // Appends a line to the merged log only (attempt boundaries).
  Status Note(const std::string& job_id, const std::string& line);

  // Reads up to max_bytes (0 or more than 1 MiB: 1 MiB) from `offset` (< 0: the
  // last -offset bytes) of rank `rank`'s log, or the merged log when rank < 0.
  // A job without output yet reads as empty.
  StatusOr<control::LogsReply> Read(const control::LogsRequest& request) const;

 private:
  std::string JobDir(const std::string& job_id) const;
  std::string dir_;
};

}  // namespace strata::coordinator
