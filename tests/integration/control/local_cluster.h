// A real strata-coordinator and N strata-workers as separate processes on
// this host (control/local_cluster.h; ipc:// control endpoint, ranks reach
// each other on 127.0.0.1), with the control calls the multi-process
// control-plane tests make. Everything is SIGKILLed and reaped when the
// cluster goes out of scope.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "common/clock.h"
#include "control/dealer_client.h"
#include "control/local_cluster.h"
#include "tests/integration/control/process_util.h"

namespace strata::testing {

class LocalCluster {
 public:
  // 500 ms heartbeats: a worker is lost after 1.5 s of silence, which a
  // loaded 2-core CI machine does not produce by accident.
  // `worker_args` are added to every strata-worker's command line.
  LocalCluster(int workers, int heartbeat_ms = 500,
               std::vector<std::string> worker_args = {})
      : bin_(std::getenv("STRATA_BINARY_DIR") ? std::getenv("STRATA_BINARY_DIR")
                                              : ".") {
    static int counter = 0;
    dir_ = "/tmp/strata-cluster-" + std::to_string(getpid()) + "-" +
           std::to_string(counter++);
    std::filesystem::remove_all(dir_);
    endpoint_ = "ipc://" + dir_ + "/coordinator.sock";
    control::LocalClusterOptions o;
    o.dir = dir_;
    o.coordinator_binary = bin_ + "/coordinator/strata-coordinator";
    o.worker_binary = bin_ + "/worker/strata-worker";
    o.workers = workers;
    o.listen = endpoint_;
    o.heartbeat_ms = heartbeat_ms;
    o.state_subdir = "state";
    o.worker_log = "worker-{i}.log";
    o.worker_args = std::move(worker_args);
    o.stop_grace_ms = 0;  // SIGKILL: the tests reap at once
    auto started = control::LocalCluster::Start(std::move(o), &clock_);
    EXPECT_TRUE(started.ok()) << started.status();
    if (started.ok()) cluster_ = *std::move(started);
    client_ = std::make_unique<control::DealerClient>(&ctx_, endpoint_);
  }
  ~LocalCluster() {
    cluster_.reset();
    if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir_);
  }

  void StartCoordinator() {
    ASSERT_TRUE(cluster_ != nullptr);
    Status s = cluster_->StartCoordinator();
    EXPECT_TRUE(s.ok()) << s;
  }
  void KillCoordinator() {
    if (cluster_) cluster_->KillCoordinator();
  }
  void KillWorker(int i) {
    if (cluster_) cluster_->KillWorker(i);
  }

  // Retries while the coordinator (re)starts, up to ~10 s.
  StatusOr<control::Reply> Call(const control::Request& req) {
    StatusOr<control::Reply> reply = absl::UnavailableError("not called");
    for (int i = 0; i < 50; ++i) {
      reply = client_->Call(req, 200);
      if (reply.ok() ||
          reply.status().code() != absl::StatusCode::kDeadlineExceeded) {
        return reply;
      }
    }
    return reply;
  }

  // Submits once, after the coordinator has answered a harmless request: a
  // submit retried because its first try was only slow (a loaded CI
  // machine) would store a second job, which then waits for workers the
  // first one holds.
  StatusOr<std::string> Submit(const JobSpec& spec) {
    control::Request list;
    list.mutable_list_jobs();
    if (auto up = Call(list); !up.ok()) return up.status();
    control::Request req;
    *req.mutable_submit_job()->mutable_spec() = spec;
    auto reply = client_->Call(req, 10000);
    if (!reply.ok()) return reply.status();
    return reply->submit_job().job_id();
  }

  StatusOr<control::JobInfo> JobStatus(const std::string& job) {
    control::Request req;
    req.mutable_job_status()->set_job_id(job);
    auto reply = Call(req);
    if (!reply.ok()) return reply.status();
    return reply->jobs().jobs(0);
  }

  // Polls until `done(job)`; DeadlineExceeded (with the last state) when it
  // does not happen within the timeout.
  StatusOr<control::JobInfo> WaitFor(
      const std::string& job,
      const std::function<bool(const control::JobInfo&)>& done,
      std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    StatusOr<control::JobInfo> info = absl::DeadlineExceededError("timeout");
    while (std::chrono::steady_clock::now() < deadline) {
      info = JobStatus(job);
      if (info.ok() && done(*info)) return info;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!info.ok()) return info.status();
    return absl::DeadlineExceededError(
        "condition not reached; last state " +
        control::JobState_Name(info->state()) + ", attempt " +
        std::to_string(info->attempt()) + ": " + info->message());
  }
  StatusOr<control::JobInfo> WaitEnded(const std::string& job,
                                       std::chrono::milliseconds timeout) {
    return WaitFor(
        job,
        [](const control::JobInfo& j) {
          return j.state() == control::SUCCEEDED ||
                 j.state() == control::FAILED ||
                 j.state() == control::CANCELLED;
        },
        timeout);
  }

  // A rank's whole relayed output, or the merged log for rank < 0.
  std::string Logs(const std::string& job, int rank) {
    control::Request req;
    req.mutable_logs()->set_job_id(job);
    req.mutable_logs()->set_rank(rank);
    auto reply = Call(req);
    return reply.ok() ? reply->logs().data() : std::string();
  }

  std::vector<control::Event> Events(const std::string& job) {
    control::Request req;
    req.mutable_events()->set_job_id(job);
    auto reply = Call(req);
    if (!reply.ok()) return {};
    return {reply->events().events().begin(), reply->events().events().end()};
  }

  const std::string& endpoint() const { return endpoint_; }
  const std::string& dir() const { return dir_; }
  const std::string& bin() const { return bin_; }
  // -1 while it is not running.
  pid_t coordinator_pid() const {
    return cluster_ ? cluster_->coordinator_pid() : -1;
  }
  pid_t worker_pid(int i) const {
    return cluster_ ? cluster_->worker_pid(i) : -1;
  }

 private:
  std::string bin_, dir_, endpoint_;
  SystemClock clock_;
  std::unique_ptr<control::LocalCluster> cluster_;
  zmq::context_t ctx_;
  std::unique_ptr<control::DealerClient> client_;
};

}  // namespace strata::testing
