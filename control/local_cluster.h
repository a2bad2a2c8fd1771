// LocalCluster: a strata-coordinator and N strata-workers started as
// separate processes on this host (simulated nodes). The one implementation
// of "start a coordinator and N workers here", used by `strata run`
// (cli/run_command.cc), the multi-process control tests
// (tests/integration/control/local_cluster.h) and `strata-bench control`
// (which starts the coordinator alone: workers = 0).
//
// Layout under `dir` (created if missing; callers choose the names below):
//   <dir>/<state_subdir>/     the coordinator's --state-dir
//   <dir>/coordinator.log     the coordinator's stderr (appended)
//   <dir>/<worker_log(i)>     worker i's stdout and stderr (appended)
//   <dir>/node-<i>/           worker i's --work-dir (node name "node-<i>")
//   /dev/shm/strata-mem-<pid>-node-<i>/  worker i's --mem-dir (its memory
//                             checkpoint tier; docs/checkpoint.md), unless
//                             worker_args name one; removed by Stop()
//
// Startup: the coordinator's stdout is read until its "listening ENDPOINT"
// line (printed once the control socket is bound; coordinator/main.cc); the
// lines before it ("metrics URL", "dashboard URL") are kept and returned by
// Announced(). Workers start only after that, against the bound endpoint
// (so "tcp://127.0.0.1:0" works).
//
// Every child runs in its own process group and dies with the thread that
// started it (common/subprocess.h): create the cluster on a long-lived
// thread. Stop() and the destructor end every process the cluster started
// or Adopt()ed: SIGTERM, then SIGKILL after `stop_grace_ms`.
//
// Not thread-safe: one owner thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace strata::control {

struct LocalClusterOptions {
  std::string dir;                 // required
  std::string coordinator_binary;  // required
  std::string worker_binary;       // required when workers > 0
  int workers = 1;
  // --listen of the coordinator; port 0 picks a free one (read back from
  // its "listening" line).
  std::string listen = "tcp://127.0.0.1:0";
  int heartbeat_ms = 500;
  std::string state_subdir = "coordinator";
  // Worker i's log file name under `dir`; "{i}" is replaced by i.
  std::string worker_log = "node-{i}.log";
  // Added after the standard flags of every coordinator / worker.
  std::vector<std::string> coordinator_args;
  std::vector<std::string> worker_args;
  // How long StartCoordinator waits for the "listening" line (real time).
  int64_t startup_timeout_ms = 30000;
  // SIGTERM -> SIGKILL grace of Stop() and the destructor; 0: SIGKILL at once.
  int64_t stop_grace_ms = 5000;
};

class LocalCluster {
 public:
  // Starts the coordinator, waits for its endpoint, then starts the
  // workers. Errors: InvalidArgument (missing binary path), the
  // filesystem's error creating `dir`, the StartSubprocess error, or
  // Unavailable "the coordinator did not start; see <log>" when it exited
  // or said nothing within the timeout. `clock` must advance by itself
  // (SystemClock) and outlive the cluster.
  static StatusOr<std::unique_ptr<LocalCluster>> Start(
      LocalClusterOptions options, const Clock* clock);

  ~LocalCluster();
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  // (Re)starts the coordinator on the same state directory and listen
  // address and waits for its "listening" line (errors as for Start). The
  // endpoint is updated (a port-0 address gets a new port; workers started
  // earlier keep the old one, so restart with a fixed address).
  // REQUIRES: the coordinator is not running (KillCoordinator()).
  Status StartCoordinator();
  // SIGKILL and reap; coordinator_pid() is -1 afterwards.
  void KillCoordinator();
  void KillWorker(int i);
  // Ends every process (see above), all at once. Idempotent.
  void Stop();
  // A further process (e.g. a fault injector) Stop() must end.
  void Adopt(pid_t pid);

  const std::string& endpoint() const { return endpoint_; }
  // The value of a "KEY VALUE" line the coordinator printed before it
  // listened ("metrics", "dashboard"); empty if it printed none.
  std::string Announced(const std::string& key) const;
  const std::string& dir() const { return options_.dir; }
  std::string coordinator_log() const {
    return options_.dir + "/coordinator.log";
  }
  int workers() const { return static_cast<int>(workers_.size()); }
  // -1 while it is not running.
  pid_t coordinator_pid() const { return coordinator_; }
  pid_t worker_pid(int i) const { return workers_[i]; }

 private:
  LocalCluster(LocalClusterOptions options, const Clock* clock);
  Status StartWorkers();
  // Reads `fd` (the coordinator's stdout) up to the "listening" line.
  Status ReadAnnouncements(int fd);
  void Terminate(std::vector<pid_t*> pids);

  LocalClusterOptions options_;
  const Clock* clock_;
  std::string endpoint_;
  std::map<std::string, std::string> announced_;
  pid_t coordinator_ = -1;
  std::vector<pid_t> workers_;  // -1: killed
  std::vector<pid_t> adopted_;
  std::vector<std::string> mem_dirs_;  // removed by Stop()
};

}  // namespace strata::control
