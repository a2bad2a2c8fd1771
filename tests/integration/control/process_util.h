// Helpers for multi-process control-plane tests: spawn a binary with stdout
// and stderr sent to a file, and SIGKILL + reap it.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace strata::testing {

inline pid_t Spawn(std::vector<std::string> args,
                   const std::string& log = "/dev/null") {
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
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
