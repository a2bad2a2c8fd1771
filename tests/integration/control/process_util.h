// Helpers for multi-process control-plane tests: spawn a binary with stdout
// and stderr sent to a file, and SIGKILL + reap it.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common/subprocess.h"

namespace strata::testing {

// Starts `args` (common/subprocess.h: own process group, killed if the test
// dies) with stdout and stderr appended to `log`. Returns -1 if it could not
// be started (the reason is printed).
inline pid_t Spawn(std::vector<std::string> args,
                   const std::string& log = "/dev/null") {
  SubprocessOptions o;
  o.argv = std::move(args);
  o.out.path = log;
  o.err.path = log;
  auto pid = StartSubprocess(o);
  if (!pid.ok()) {
    std::fprintf(stderr, "Spawn %s: %s\n", o.argv[0].c_str(),
                 std::string(pid.status().message()).c_str());
    return -1;
  }
  return *pid;
}

inline void KillAndReap(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

// SIGKILLs and reaps the watched pids when it goes out of scope, so a failed
// ASSERT does not leave processes behind. Watched pids set to <= 0 are
// skipped (set them to -1 after reaping by hand).
class ProcessReaper {
 public:
  void Watch(pid_t* pid) { pids_.push_back(pid); }
  ~ProcessReaper() {
    for (pid_t* pid : pids_) {
      KillAndReap(*pid);
      *pid = -1;
    }
  }

 private:
  std::vector<pid_t*> pids_;
};

}  // namespace strata::testing
