#include "control/local_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/subprocess.h"

namespace strata::control {
namespace {

// Polling periods while waiting for a child: short next to the startup and
// stop budgets (seconds), long enough not to spin.
constexpr int kReadPollMs = 10;
constexpr int kReapPollMs = 20;

StatusOr<pid_t> Spawn(std::vector<std::string> argv, const std::string& log,
                      int out_fd) {
  SubprocessOptions o;
  o.argv = std::move(argv);
  if (out_fd >= 0) {
    o.out.fd = out_fd;
  } else {
    o.out.path = log;
  }
  o.err.path = log;
  return StartSubprocess(o);
}

void KillAndReap(pid_t* pid) {
  if (*pid <= 0) return;
  kill(*pid, SIGKILL);
  waitpid(*pid, nullptr, 0);
  *pid = -1;
}

}  // namespace

StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(
    LocalClusterOptions options, const Clock* clock) {
  if (options.dir.empty() || options.coordinator_binary.empty() ||
      (options.workers > 0 && options.worker_binary.empty())) {
    return absl::InvalidArgumentError(
        "LocalCluster: dir, coordinator_binary and (with workers) "
        "worker_binary are required");
  }
  std::error_code ec;
  std::filesystem::create_directories(options.dir, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create ", options.dir, ": ", ec.message()));
  }
  std::unique_ptr<LocalCluster> cluster(
      new LocalCluster(std::move(options), clock));
  RETURN_IF_ERROR(cluster->StartCoordinator());
  RETURN_IF_ERROR(cluster->StartWorkers());
  return cluster;
}

LocalCluster::LocalCluster(LocalClusterOptions options, const Clock* clock)
    : options_(std::move(options)), clock_(clock) {}

LocalCluster::~LocalCluster() { Stop(); }

Status LocalCluster::StartCoordinator() {
  std::vector<std::string> argv = {options_.coordinator_binary,
                                   "--state-dir",
                                   options_.dir + "/" + options_.state_subdir,
                                   "--listen",
                                   options_.listen,
                                   "--heartbeat-ms",
                                   absl::StrCat(options_.heartbeat_ms)};
  argv.insert(argv.end(), options_.coordinator_args.begin(),
              options_.coordinator_args.end());
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  }
  auto pid = Spawn(argv, coordinator_log(), fds[1]);
  close(fds[1]);
  if (!pid.ok()) {
    close(fds[0]);
    return pid.status();
  }
  coordinator_ = *pid;
  Status read = ReadAnnouncements(fds[0]);
  close(fds[0]);
  return read;
}

Status LocalCluster::ReadAnnouncements(int fd) {
  announced_.clear();
  fcntl(fd, F_SETFL, O_NONBLOCK);
  const int64_t deadline = clock_->SteadyNowMs() + options_.startup_timeout_ms;
  std::string line;
  while (clock_->SteadyNowMs() < deadline) {
    char c;
    if (read(fd, &c, 1) == 1) {
      if (c != '\n') {
        line += c;
        continue;
      }
      const size_t space = line.find(' ');
      if (space != std::string::npos) {
        const std::string key = line.substr(0, space);
        if (key == "listening") {
          endpoint_ = line.substr(space + 1);
          return absl::OkStatus();
        }
        announced_[key] = line.substr(space + 1);
      }
      line.clear();
      continue;
    }
    if (waitpid(coordinator_, nullptr, WNOHANG) == coordinator_) {
      coordinator_ = -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kReadPollMs));
  }
  return absl::UnavailableError(
      absl::StrCat("the coordinator did not start; see ", coordinator_log()));
}

Status LocalCluster::StartWorkers() {
  for (int i = 0; i < options_.workers; ++i) {
    const std::string name = absl::StrCat("node-", i);
    std::vector<std::string> argv = {options_.worker_binary,
                                     "--coordinator",
                                     endpoint_,
                                     "--node-name",
                                     name,
                                     "--address",
                                     "127.0.0.1",
                                     "--work-dir",
                                     options_.dir + "/" + name};
    argv.insert(argv.end(), options_.worker_args.begin(),
                options_.worker_args.end());
    // Workers of a real cluster each have their node's /dev/shm for the
    // memory tier; these share one, so each gets a directory of its own.
    if (std::find(argv.begin(), argv.end(), "--mem-dir") == argv.end()) {
      mem_dirs_.push_back(
          absl::StrCat("/dev/shm/strata-mem-", getpid(), "-", name));
      argv.insert(argv.end(), {"--mem-dir", mem_dirs_.back()});
    }
    const std::string log =
        options_.dir + "/" +
        absl::StrReplaceAll(options_.worker_log, {{"{i}", absl::StrCat(i)}});
    ASSIGN_OR_RETURN(pid_t pid, Spawn(std::move(argv), log, -1));
    workers_.push_back(pid);
  }
  return absl::OkStatus();
}

void LocalCluster::KillCoordinator() { KillAndReap(&coordinator_); }

void LocalCluster::KillWorker(int i) { KillAndReap(&workers_[i]); }

void LocalCluster::Adopt(pid_t pid) { adopted_.push_back(pid); }

std::string LocalCluster::Announced(const std::string& key) const {
  auto it = announced_.find(key);
  return it == announced_.end() ? std::string() : it->second;
}

void LocalCluster::Stop() {
  std::vector<pid_t*> pids = {&coordinator_};
  for (pid_t& p : workers_) pids.push_back(&p);
  for (pid_t& p : adopted_) pids.push_back(&p);
  Terminate(pids);
  for (const std::string& dir : mem_dirs_) {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  mem_dirs_.clear();
}

// SIGTERM to all, then each is reaped or, past the grace, SIGKILLed.
void LocalCluster::Terminate(std::vector<pid_t*> pids) {
  if (options_.stop_grace_ms <= 0) {
    for (pid_t* p : pids) KillAndReap(p);
    return;
  }
  for (pid_t* p : pids) {
    if (*p > 0) kill(*p, SIGTERM);
  }
  const int64_t deadline = clock_->SteadyNowMs() + options_.stop_grace_ms;
  for (pid_t* p : pids) {
    while (*p > 0) {
      if (waitpid(*p, nullptr, WNOHANG) == *p) {
        *p = -1;
      } else if (clock_->SteadyNowMs() > deadline) {
        KillAndReap(p);
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(kReapPollMs));
      }
    }
  }
}

}  // namespace strata::control
