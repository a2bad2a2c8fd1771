// Starts and watches a worker's ranks (docs/control-plane.md "Supervision"):
// each rank is started with common/subprocess.h (own process group, SIGKILL
// if the worker dies) with the launch order's environment (docs/placement.md)
// on top of the worker's, stdout and stderr go to files under
// <work_dir>/<job>/attempt-<a>/. Stopping sends SIGTERM to the process group
// and SIGKILL once the grace period has passed on the injected Clock. New
// output is relayed in whole lines (or 64 KiB pieces), committed only once
// the coordinator accepted it. One thread; not thread-safe.
#pragma once

#include <functional>

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/logging.h"
#include "common/status.h"
#include "proto/control.pb.h"
#include "worker/rank_runner.h"

namespace strata::worker {

// The less privileged user a root worker runs ranks as (`--rank-user`,
// docs/security.md "Ranks as another user").
struct RankUser {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;  // its primary group
};

// Looks USER up in the user database. InvalidArgument naming it when there
// is no such user or it is root; FailedPrecondition when this process is not
// root (only root can switch users).
StatusOr<RankUser> LookUpRankUser(const std::string& name);

class RankSupervisor : public RankRunner {
 public:
  // `extra_env` (STRATA_STORE, STRATA_TELEMETRY, ...) is added to every rank.
  // `clock` must outlive the supervisor.
  RankSupervisor(const Clock* clock, std::string work_dir,
                 std::map<std::string, std::string> extra_env);
  ~RankSupervisor() override;  // SIGKILLs and reaps every running rank

  // Under CURVE: the coordinator's public key (Z85). Ranks whose launch
  // order carries a key of their own get a private curve dir with it and
  // that key as $STRATA_CURVE_DIR; no rank ever inherits the worker's.
  void SetCurveServerKey(std::string key) { curve_server_key_ = std::move(key); }

  // Ranks started from now on run as `user` (set in the child before exec:
  // groups, gid, uid) instead of as the worker. What a rank needs from the
  // work dir is opened to the user's group only: the work dir and attempt
  // dirs become traversable (0710), the telemetry socket connectable
  // (0660), the plan readable (0640); the rank's own curve dir and keys
  // are handed to the user (0700/0600, written first); the rank also gets
  // a directory of its own, <attempt dir>/rank-<r>.tmp (owned by the user,
  // 0700), as $TMPDIR. The worker's own key files are
  // never opened to it. Errors name the path.
  Status SetRankUser(RankUser user);

  // The memory tier (docs/checkpoint.md "Memory tier"): ranks started from
  // now on get STRATA_MEM_DIR=<mem_dir>/<job id>, created for them (0700,
  // owned by the rank user when there is one). Empty: no memory tier.
  // `refused(job, message)`: a job's memory-tier directory that cannot be
  // made its own (reported to the coordinator as a job event).
  void SetMemDir(std::string mem_dir,
                 std::function<void(const std::string&, const std::string&)>
                     refused = {}) {
    mem_dir_ = std::move(mem_dir);
    mem_refused_ = std::move(refused);
  }

  // RankRunner. Exec failures are reported as RANK_FAILED_TO_START
  // ("exec /x: No such file or directory").
  void Launch(const control::RankLaunch& order) override;
  void Stop(const std::string& attempt_key, int64_t grace_ms) override;
  // Waits (blocking, polling every 5 ms) at most kReplaceReapMs for the
  // killed process; one stuck in the kernel is left to Poll()'s reaping
  // and the replacement starts anyway.
  static constexpr int64_t kReplaceReapMs = 2000;
  void Replace(const control::RankLaunch& order) override;
  // Reaps exited ranks, escalates overdue stops, drops finished attempts.
  void Poll() override;
  std::vector<control::RankReport> Reports() const override;
  std::vector<control::LogChunk> CollectLogs(size_t max_bytes) override;
  void CommitLogs() override;
  bool TakeDirty() override;
  int running() const override;

  // Shutdown: stops everything and blocks (polling every 10 ms) until all
  // are reaped, SIGKILL once `grace_ms` has passed; gives up on ranks still
  // not reaped 5 s after that (stuck in the kernel).
  // REQUIRES: a clock that advances by itself (SystemClock) if grace_ms > 0.
  void StopAll(int64_t grace_ms);

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
    int64_t kill_at_ms = 0;  // steady time of the SIGKILL
  };
  struct Attempt {
    std::map<int, Rank> ranks;
    bool stop_requested = false;
  };

  void Start(Rank& rank, const control::RankLaunch& order,
             const std::string& dir);
  bool Flushed(const Rank& rank) const;

  const Clock* clock_;
  std::string work_dir_;
  std::map<std::string, std::string> extra_env_;
  std::string curve_server_key_;
  std::optional<RankUser> rank_user_;
  std::string mem_dir_;
  std::function<void(const std::string&, const std::string&)> mem_refused_;
  std::map<std::string, Attempt> attempts_;  // by "<job>/<attempt>"
  bool dirty_ = false;
  Logger logger_;
};

}  // namespace strata::worker
