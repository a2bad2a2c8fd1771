// Starts and watches a worker's ranks (docs/architecture.md):
// each rank is fork/exec'd in its own process group with the launch order's
// environment (docs/placement.md) on top of the worker's, stdout and stderr go to
// files under <work_dir>/<job>/attempt-<a>/, and the rank gets SIGKILL if the
// worker dies (PR_SET_PDEATHSIG). Stopping sends SIGTERM to the process
// group and SIGKILL after the grace period. New output is relayed in whole
// lines (or 64 KiB pieces), committed only once the coordinator accepted it.
// One thread; not thread-safe.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "common/logging.h"
#include "common/status.h"
#include "proto/control.pb.h"

namespace strata::worker {

class RankSupervisor {
 public:
  using Clock = std::chrono::steady_clock;

  // `extra_env` (STRATA_STORE, STRATA_TELEMETRY, ...) is added to every rank.
  RankSupervisor(std::string work_dir,
                 std::map<std::string, std::string> extra_env);
  ~RankSupervisor();  // StopAll(0)

  // Starts one rank unless the worker already holds it. Exec failures are
  // reported as RANK_FAILED_TO_START, not returned.
  void Launch(const control::RankLaunch& order);
  // Stops every rank of attempt "<job>/<attempt>" and forgets the attempt
  // once they have exited and their output has been relayed.
  void Stop(const std::string& attempt_key, std::chrono::milliseconds grace);
  // Stops everything and waits (SIGKILL after `grace`) until all are reaped.
  void StopAll(std::chrono::milliseconds grace);

  // Reaps exited ranks, escalates overdue stops, drops finished attempts.
  void Poll();

  std::vector<control::RankReport> Reports() const;
  // New output since the last Commit, at most `max_bytes` in total.
  std::vector<control::LogChunk> CollectLogs(size_t max_bytes);
  void CommitLogs();
  // True when a rank changed state since the last TakeDirty().
  bool TakeDirty();
  int running() const;

 private:
  struct Stream {
    std::string path;
    int64_t sent = 0;     // bytes the coordinator has accepted
    int64_t pending = 0;  // bytes collected but not yet accepted
  };
  struct Rank {
    control::RankReport report;
    Stream out, err;
    bool stopping = false;
    Clock::time_point kill_at;
  };
  struct Attempt {
    std::map<int, Rank> ranks;
    bool stop_requested = false;
  };

  void Start(Rank& rank, const control::RankLaunch& order,
             const std::string& dir);
  bool Flushed(const Rank& rank) const;

  std::string work_dir_;
  std::map<std::string, std::string> extra_env_;
  std::map<std::string, Attempt> attempts_;  // by "<job>/<attempt>"
  bool dirty_ = false;
  Logger logger_;
};

}  // namespace strata::worker
