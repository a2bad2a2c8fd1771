// A real strata-coordinator (and optionally strata-workers) for the
// coordinator fault tests, with the knobs LocalCluster does not have: the
// state dir placed anywhere (a small tmpfs), extra flags and environment
// (LD_PRELOAD of libstrata_failio), its exit status and RSS, and the `strata`
// CLI run against it. Binaries come from $STRATA_BINARY_DIR (ctest sets it),
// so the same test can be pointed at an older build. Everything is SIGKILLed
// and reaped at destruction.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "control/dealer_client.h"
#include "tests/integration/cli/run_command.h"
#include "tests/integration/control/process_util.h"

namespace strata::testing {

class FaultCoordinator {
 public:
  FaultCoordinator()
      : bin_(std::getenv("STRATA_BINARY_DIR") ? std::getenv("STRATA_BINARY_DIR")
                                              : ".") {
    static int counter = 0;
    dir_ = "/tmp/strata-fault-coord-" + std::to_string(getpid()) + "-" +
           std::to_string(counter++);
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    state_dir_ = dir_ + "/state";
    endpoint_ = "ipc://" + dir_ + "/coordinator.sock";
  }
  ~FaultCoordinator() {
    for (pid_t& p : workers_) KillAndReap(p);
    Kill();
    if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir_);
  }

  // Starts the coordinator with `flags` after the standard ones; `env`
  // entries (KEY=VALUE) are added to its environment.
  void Start(std::vector<std::string> flags = {},
             std::vector<std::string> env = {}) {
    std::vector<std::string> argv = wrapper_;
    if (!env.empty()) {
      argv.push_back("/usr/bin/env");
      argv.insert(argv.end(), env.begin(), env.end());
    }
    for (const std::string& a :
         {bin_ + "/coordinator/strata-coordinator", std::string("--state-dir"),
          state_dir_, std::string("--listen"), endpoint_,
          std::string("--heartbeat-ms"), std::string("500")}) {
      argv.push_back(a);
    }
    argv.insert(argv.end(), flags.begin(), flags.end());
    pid_ = Spawn(argv, log_path());
    client_.reset();
    ctx_ = std::make_unique<zmq::context_t>();
    client_ = std::make_unique<control::DealerClient>(ctx_.get(), endpoint_);
  }
  // Caps the coordinator's address space (prlimit --as), so a coordinator
  // that allocates without bound dies alone instead of taking the machine.
  void LimitMemory(int64_t bytes) {
    wrapper_ = {"/usr/bin/prlimit", "--as=" + std::to_string(bytes), "--"};
  }
  void Kill() {
    KillAndReap(pid_);
    pid_ = -1;
  }
  // The exit code if the coordinator exits within `timeout`, else -1
  // (still running).
  int WaitExit(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  bool Alive() const { return pid_ > 0 && kill(pid_, 0) == 0; }

  void StartWorker(const std::string& node) {
    workers_.push_back(Spawn({bin_ + "/worker/strata-worker", "--coordinator",
                              endpoint_, "--node-name", node, "--address",
                              "127.0.0.1", "--work-dir", dir_ + "/" + node},
                             dir_ + "/" + node + ".log"));
  }

  // One call; retried while the coordinator starts (up to ~`tries` x 200 ms).
  StatusOr<control::Reply> Call(const control::Request& req, int tries = 50) {
    StatusOr<control::Reply> reply = absl::UnavailableError("not called");
    for (int i = 0; i < tries; ++i) {
      reply = client_->Call(req, 200);
      if (reply.ok() ||
          reply.status().code() != absl::StatusCode::kDeadlineExceeded) {
        return reply;
      }
    }
    return reply;
  }
  bool WaitUp() {
    control::Request req;
    req.mutable_list_jobs();
    return Call(req).ok();
  }
  // Waits until `n` workers are registered and alive.
  bool WaitWorkers(int n, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      control::Request req;
      req.mutable_list_workers();
      auto reply = Call(req, 5);
      if (reply.ok() && reply->list_workers().workers_size() >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  StatusOr<control::JobInfo> Job(const std::string& id) {
    control::Request req;
    req.mutable_job_status()->set_job_id(id);
    auto reply = Call(req);
    if (!reply.ok()) return reply.status();
    return reply->jobs().jobs(0);
  }

  // `strata ARGS --coordinator ENDPOINT`.
  RunResult Strata(const std::string& args) {
    return RunStrata(args + " --coordinator " + endpoint_);
  }

  // Resident set of the coordinator in KiB (0 if it is gone).
  int64_t RssKiB() const {
    std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("VmRSS:", 0) == 0) {
        return std::atoll(line.c_str() + 6);
      }
    }
    return 0;
  }

  std::string Log() const {
    std::ifstream in(log_path());
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::string log_path() const { return dir_ + "/coordinator.log"; }
  const std::string& dir() const { return dir_; }
  const std::string& state_dir() const { return state_dir_; }
  const std::string& endpoint() const { return endpoint_; }
  const std::string& bin() const { return bin_; }
  pid_t pid() const { return pid_; }

 private:
  std::string bin_, dir_, state_dir_, endpoint_;
  std::vector<std::string> wrapper_;
  pid_t pid_ = -1;
  std::vector<pid_t> workers_;
  std::unique_ptr<zmq::context_t> ctx_;
  std::unique_ptr<control::DealerClient> client_;
};

}  // namespace strata::testing
