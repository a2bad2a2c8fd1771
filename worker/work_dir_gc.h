// Removes the directories of ended jobs from the worker's work dir
// (<work_dir>/<job>/attempt-<a>/, made by RankSupervisor) so that a worker
// that runs for months does not keep every job's output forever (issue 34:
// 18 MB for 1,500 small jobs).
//
// Contract:
// - Only entries named like the coordinator's job ids ("job-" and digits)
//   that are real directories (lstat: a symlink is never followed nor
//   removed) are considered; everything else in the work dir (the
//   telemetry socket, keys) is left alone.
// - A job the runner still holds ranks of (RankRunner::Reports(): running,
//   exited but not yet reported, or with output not yet relayed) is never
//   touched.
// - A job's age is the time since the newest modification of its directory
//   or of anything one or two levels below it (lstat), i.e. since its last
//   rank wrote output; a directory is removed once that age exceeds
//   `retention_ms`, and beyond `max_ended_jobs` ended job directories the
//   oldest are removed first whatever their age. Removal is
//   std::filesystem::remove_all, which deletes symlinks inside the tree
//   without following them. Each removal is logged (info) with the job,
//   its age and the reason; a failure is logged (warn) and retried at the
//   next sweep.
// - Sweeps run from Tick() at most every `sweep_interval_ms` on the
//   injected Clock's steady reading; ages use its wall time (NowMs) against
//   file modification times.
// Thread model: the worker's loop thread; not thread-safe. Borrows `clock`
// and `runner`; they must outlive it.
#pragma once

#include <cstdint>
#include <string>

#include "common/clock.h"
#include "common/logging.h"
#include "worker/rank_runner.h"

namespace strata::worker {

struct WorkDirGcOptions {
  int64_t retention_ms = 24 * 3600 * 1000;  // strata-worker --job-dir-retention-s
  int max_ended_jobs = 200;                 // strata-worker --max-ended-job-dirs
  int64_t sweep_interval_ms = 60 * 1000;
};

class WorkDirGc {
 public:
  WorkDirGc(const Clock* clock, std::string work_dir, const RankRunner* runner,
            WorkDirGcOptions options, Logger logger);

  // Sweeps if the last sweep is `sweep_interval_ms` old (the first call
  // always sweeps). Returns the number of job directories removed.
  int Tick();
  // Sweeps now.
  int Sweep();

 private:
  const Clock* clock_;
  std::string work_dir_;
  const RankRunner* runner_;
  WorkDirGcOptions options_;
  Logger logger_;
  int64_t last_sweep_ms_ = 0;
  bool swept_ = false;
};

}  // namespace strata::worker
