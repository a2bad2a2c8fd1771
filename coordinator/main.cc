// strata-coordinator: serves the control protocol on --listen: worker
// registry and heartbeats, jobs (placement, launch orders, restart), events,
// job output and the rendezvous KV. State lives under --state-dir: RocksDB
// in db/ (jobs, events, KV) and relayed output in logs/
// (docs/control-plane.md). This file parses the flags; CoordinatorServer
// (coordinator/server/coordinator_server.h) assembles and runs the parts.
#include <sys/resource.h>

#include <atomic>
#include <csignal>
#include <iostream>
#include <string>

#include "CLI/CLI.hpp"
#include "common/logging.h"
#include "coordinator/server/coordinator_server.h"
#include "coordinator/server/heap_policy.h"

namespace {
std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

// One connection per worker: thousands of descriptors on a large cluster.
void RaiseFileLimit() {
  rlimit files;
  if (getrlimit(RLIMIT_NOFILE, &files) == 0) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
}
}  // namespace

int main(int argc, char** argv) {
  // Before any thread: malloc's arenas are made by the threads that use it.
  strata::coordinator::ConfigureHeap();
  CLI::App app{"strata coordinator"};
  strata::coordinator::CoordinatorOptions o;
  app.add_option("--state-dir", o.state_dir, "directory for persistent state")
      ->required();
  app.add_option("--listen", o.listen, "ZeroMQ endpoint to bind");
  app.add_option("--heartbeat-ms", o.heartbeat_ms, "worker heartbeat interval")
      ->check(CLI::Range(10, 600000));
  // docs/control-plane.md "Security"
  app.add_option("--curve-dir", o.curve_dir,
                 "CURVE keys (server.key, server.key_secret, authorized_keys); "
                 "default: plaintext, for loopback and trusted networks only");
  app.add_option("--missed-heartbeats", o.missed_heartbeats,
                 "intervals without heartbeat before a worker is lost")
      ->check(CLI::Range(1, 100));
  // docs/control-plane.md "Limits": what one job may ask for.
  strata::coordinator::JobLimits& limits = o.jobs.limits;
  app.add_option("--metrics-listen", o.metrics_listen,
                 "HOST:PORT of the read-only HTTP listener serving /metrics "
                 "(Prometheus) and the dashboard (/), e.g. 127.0.0.1:9478; "
                 "port 0 picks a free one; default off")
      ->capture_default_str();
  app.add_option("--metrics-token", o.metrics_token,
                 "bearer token the listener requires (required off loopback)");
  app.add_option("--max-nodes", limits.max_nodes, "nodes one job may use")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-ranks-per-node", limits.max_ranks_per_node,
                 "ranks one job may run on one node")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app.add_option("--max-ranks", limits.max_ranks,
                 "ranks of one job (nodes x ranks per node)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24))
      ->capture_default_str();
  app.add_option("--max-ranks-per-core", limits.max_ranks_per_core,
                 "ranks per CPU core or GPU a worker reported")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--max-command-bytes", limits.max_command_bytes,
                 "bytes of a job's launch.command")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20))
      ->capture_default_str();
  app.add_option("--max-env-bytes", limits.max_env_bytes,
                 "bytes of a job's launch.env (keys and values)")
      ->check(CLI::Range(size_t{0}, size_t{1} << 20))
      ->capture_default_str();
  app.add_option("--max-active-jobs", limits.max_active_jobs,
                 "pending and running jobs kept at once")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  app.add_option("--max-active-launch-bytes", limits.max_active_launch_bytes,
                 "bytes of launch.command + launch.env across pending and "
                 "running jobs")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--max-active-ranks", limits.max_active_ranks,
                 "ranks across pending and running jobs")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 32))
      ->capture_default_str();
  // docs/control-plane.md "Retention": ended jobs kept in memory.
  strata::coordinator::JobRetention& retention = o.jobs.retention;
  int64_t keep_hours = retention.max_ended_age_ms / 3600000;
  app.add_option("--keep-ended-jobs", retention.max_ended_jobs,
                 "ended jobs kept in memory (status, dashboard, /metrics); "
                 "older ones stay in the state store")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24))
      ->capture_default_str();
  app.add_option("--keep-ended-hours", keep_hours,
                 "hours an ended job stays in memory")
      ->check(CLI::Range(int64_t{0}, int64_t{24} * 366 * 10))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  retention.max_ended_age_ms = keep_hours * 3600000;
  auto logger = strata::GetLogger("CTRL");
  strata::RouteProtobufLogs(logger);  // bad frames must not flood stderr
  RaiseFileLimit();
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  strata::coordinator::CoordinatorServer server(std::move(o), logger);
  if (auto s = server.Init(); !s.ok()) {
    std::cerr << "strata-coordinator: " << s.message() << "\n";
    return absl::IsInvalidArgument(s) ? 2 : 1;
  }
  // What a parent process reads (control/local_cluster.h): the listening
  // line last, once everything is up.
  if (const std::string url = server.http_url(); !url.empty()) {
    std::cout << "metrics " << url << "/metrics" << std::endl;
    std::cout << "dashboard " << url << "/" << std::endl;
  }
  std::cout << "listening " << server.endpoint() << std::endl;
  server.Run(g_stop);
  return 0;
}
